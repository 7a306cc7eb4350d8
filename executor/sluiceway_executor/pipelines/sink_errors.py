"""A sink batch's failed records (errors.tolerance=all): taking them out of the batch, and the
dead-letter topic they go to.

A checked batch (``SinkPipeline.converted(raw, checked=True)``) carries two extra columns: the
error column (``record_errors``) and ``RAW_COLUMN``, each record as it was read from Kafka. The
failed records are collected from it in one small job, with their original bytes; the task gets the
others without either column. A batch whose job failed on a record's data (a Sql expression that
raised) is checked by halves instead (:func:`checked_by_halves`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from sluiceway.connect.topic_creation_config import DEFAULT_TOPIC_CREATION_GROUP, TopicCreationGroup
from sluiceway_executor.pipelines.error_handling import ErrorHandling, FailedRecord
from sluiceway_executor.pipelines.failure_isolation import (
    ROW_ID,
    IsolatedFailure,
    isolated,
    united,
    with_row_ids,
)
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.record_errors import ERROR_COLUMN, Stage
from sluiceway_executor.topic_creation import TopicCreator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "RAW_COLUMN",
    "RAW_FIELDS",
    "checked_by_halves",
    "dead_letter_topic_creator",
    "failed_records",
    "first_failed_record",
    "without_failed",
]

# The record as read, kept beside the converted one so a failed record is dead-lettered unchanged.
RAW_COLUMN: Final = "__sluiceway_raw"
RAW_FIELDS: Final = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")

_HINT: Final = (
    "Create the dead-letter topic yourself, or name one in errors.deadletterqueue.topic.name that can be "
    "created, then restart the task."
)


def _failed(staged: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return staged.where(F.col(ERROR_COLUMN).isNotNull()).select(f"{RAW_COLUMN}.*", ERROR_COLUMN)


def failed_records(staged: DataFrame) -> list[FailedRecord]:
    """The records of a checked batch that a converter or transform failed on (one Spark job)."""
    return [FailedRecord.from_row(row) for row in _failed(staged).collect()]


def first_failed_record(staged: DataFrame) -> FailedRecord | None:
    """The first of them by topic, partition and offset, or None."""
    rows = _failed(staged).orderBy("topic", "partition", "offset").limit(1).collect()
    return FailedRecord.from_row(rows[0]) if rows else None


def without_failed(staged: DataFrame) -> DataFrame:
    """The records of a checked batch that went through, without the two extra columns."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return staged.where(F.col(ERROR_COLUMN).isNull()).drop(ERROR_COLUMN, RAW_COLUMN)


def checked_by_halves(
    converted: DataFrame, transform: Callable[[DataFrame], DataFrame], class_name: str, first: BaseException
) -> DataFrame:
    """A checked batch when ``transform`` (the chain) of the ``converted`` one (checked, not yet
    transformed) failed with ``first`` on some record's data: the parts of it the chain went
    through, and the records it fails on alone, marked as failed at TRANSFORMATION by
    ``class_name`` with the error Spark raised (``failure_isolation``)."""
    base = with_row_ids(converted)
    built, failures = isolated(base, lambda part: transform(part.drop(ROW_ID)), first)
    if failures:
        schema = (built[0] if built else transform(base.limit(0).drop(ROW_ID))).schema
        built.append(_failed_rows(base, failures, schema, class_name))
    # Pinned once more: the failed records' job and the task's then read one plan, not the union.
    return united(built).localCheckpoint()


def _failed_rows(
    base: DataFrame, failures: list[IsolatedFailure], schema: StructType, class_name: str
) -> DataFrame:
    """The records that fail alone, laid out as a checked batch's rows (``schema``): as read
    (``RAW_COLUMN``), with the error column set, nothing converted."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    errors = base.sparkSession.createDataFrame(
        [(f.row, f.exception, f.message) for f in failures],
        f"{ROW_ID} long, exception string, message string",
    )
    joined = base.join(errors, ROW_ID)
    columns = []
    for field in schema.fields:
        if field.name == ERROR_COLUMN:
            column = F.struct(
                F.lit(Stage.TRANSFORMATION.value).alias("stage"),
                F.lit(class_name).alias("class_name"),
                F.coalesce(F.col("exception"), F.lit("")).alias("exception"),
                F.col("message"),
            )
        elif field.name == RAW_COLUMN:
            column = F.col(RAW_COLUMN)
        elif field.name in RAW_FIELDS and field.name not in ("key", "value"):
            column = F.col(f"{RAW_COLUMN}.{field.name}")
        else:
            column = F.lit(None)
        columns.append(column.cast(field.dataType).alias(field.name, metadata=field.metadata))
    return joined.select(*columns)


def dead_letter_topic_creator(
    worker_config: Mapping[str, str], spec: TaskSpec, handling: ErrorHandling
) -> TopicCreator:
    """Makes the dead-letter topic exist before a task's first batch, as Kafka Connect does: one
    partition, ``errors.deadletterqueue.topic.replication.factor`` replicas."""
    group = TopicCreationGroup(
        # The default group takes every topic, and so this one.
        name=DEFAULT_TOPIC_CREATION_GROUP,
        include=(),
        exclude=(),
        partitions=1,
        replication_factor=handling.dlq_replication_factor,
    )
    return TopicCreator(
        worker_config,
        spec.connector_config,
        task=spec.name,
        always=group,
        label="dead-letter topic",
        hint=_HINT,
    )
