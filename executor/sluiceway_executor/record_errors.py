"""Per-record failures inside a batch's Spark job, as a column: which records a converter or a
transform could not handle, at which stage and why.

With ``errors.tolerance=all`` the pipelines build the batch with one extra column,
``ERROR_COLUMN`` (a struct, null for a record that went through). A stage that finds a record it
cannot handle sets it, naming the stage as Kafka Connect does (``KEY_CONVERTER``,
``VALUE_CONVERTER``, ``TRANSFORMATION``) and the class at work, and the record's key and value are
nulled from then on, so no later stage fails the job on it. The records with the column set are
then skipped or dead-lettered, the others written.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "DATA_EXCEPTION",
    "ERROR_COLUMN",
    "Stage",
    "error_type",
    "has_error_column",
    "marked",
    "with_error_column",
]

ERROR_COLUMN: Final = "__sluiceway_error"
# What the dead-letter headers name as the exception: the SDK's class for bad data.
DATA_EXCEPTION: Final = "sluiceway.connect.DataException"


class Stage(enum.Enum):
    """Where in the pipeline a record failed (Kafka Connect's stage names, which the dead-letter
    queue's ``__connect.errors.stage`` header carries)."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"


def error_type() -> StructType:
    """The Spark type of ``ERROR_COLUMN``."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType(
        [
            StructField("stage", StringType(), False),
            StructField("class_name", StringType(), False),
            StructField("exception", StringType(), False),
            StructField("message", StringType(), True),
        ]
    )


def has_error_column(frame: DataFrame) -> bool:
    return ERROR_COLUMN in frame.columns


def with_error_column(frame: DataFrame) -> DataFrame:
    """``frame`` with an empty error column: every record fine so far."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return frame.withColumn(ERROR_COLUMN, F.lit(None).cast(error_type()))


def marked(
    frame: DataFrame,
    problem: Column,
    stage: Stage,
    class_name: str,
    nulled: tuple[str, ...] = ("key", "value"),
    exception: Column | None = None,
) -> DataFrame:
    """``frame`` with the records where ``problem`` (a string column: why the record fails, null
    when it does not) is set marked as failed at ``stage`` by ``class_name``, unless an earlier
    stage marked them; the ``nulled`` columns of every marked record become null, so later stages
    see nothing they could fail on. ``exception`` names the exception's class per record (the
    SDK's DataException when not given)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    error = F.col(ERROR_COLUMN)
    found = F.when(
        problem.isNotNull(),
        F.struct(
            F.lit(stage.value).alias("stage"),
            F.lit(class_name).alias("class_name"),
            (F.lit(DATA_EXCEPTION) if exception is None else exception).alias("exception"),
            problem.alias("message"),
        ),
    )
    out = frame.withColumn(ERROR_COLUMN, F.coalesce(error, found))
    failed = F.col(ERROR_COLUMN).isNotNull()
    for name in nulled:
        if name in out.columns:
            out = out.withColumn(name, F.when(~failed, F.col(name)))
    return out


def failing(value: Column, problem: Column) -> Column:
    """``value``, failing the job on a record where ``problem`` is set (errors.tolerance=none)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return F.when(problem.isNotNull(), F.raise_error(problem)).otherwise(value)
