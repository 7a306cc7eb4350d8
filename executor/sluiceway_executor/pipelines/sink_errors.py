"""A sink batch's failed records (errors.tolerance=all): taking them out of the batch, and the
dead-letter topic they go to.

A checked batch (``SinkPipeline.converted(raw, checked=True)``) carries two extra columns: the
error column (``record_errors``) and ``RAW_COLUMN``, each record as it was read from Kafka. The
failed records are collected from it in one small job, with their original bytes; the task gets the
others without either column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from sluiceway.connect.topic_creation_config import DEFAULT_TOPIC_CREATION_GROUP, TopicCreationGroup
from sluiceway_executor.pipelines.error_handling import ErrorHandling, FailedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.record_errors import ERROR_COLUMN
from sluiceway_executor.topic_creation import TopicCreator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "RAW_COLUMN",
    "RAW_FIELDS",
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
