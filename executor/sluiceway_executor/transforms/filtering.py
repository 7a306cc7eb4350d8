"""Dropping records inside a transformed batch without slowing Spark down.

Spark's optimizer pushes a filter down through the projections beneath it, writing each projected
column's expression into the condition. Over a chain of transforms that means a typed value's whole
build, its JSON parse included, once per reference in the condition: the condition grows to dozens
of parses per record and loses code generation (a Sql ``where`` made a sink about twenty times
slower). A condition guarded by a nondeterministic expression stays where it is written, on the
projected columns, which Spark computes once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["KEEP_COLUMN", "kept_where", "pinned_condition"]

KEEP_COLUMN: Final = "__sluiceway_keep"


def pinned_condition(condition: Column) -> Column:
    """``condition``, evaluated where it is written: ``spark_partition_id()`` is nondeterministic,
    so the optimizer neither pushes it down nor folds it away (``rand() >= 0`` it would fold)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return F.when(F.spark_partition_id() >= 0, condition)


def kept_where(frame: DataFrame, condition: Column) -> DataFrame:
    """The records of ``frame`` where ``condition`` holds, filtered after ``frame``'s projections."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    flagged = frame.withColumn(KEEP_COLUMN, pinned_condition(condition))
    return flagged.where(F.col(KEEP_COLUMN)).drop(KEEP_COLUMN)
