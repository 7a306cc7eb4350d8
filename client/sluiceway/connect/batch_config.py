"""How big one batch of a task may grow: the `batch.*` keys every connector takes.

A batch holds what the task has to do, up to three bounds, whichever is reached first: the time a
batch should take (`batch.duration.ms`), the bytes it may hold (`batch.max.bytes`) and a record
count (`batch.max.records`). A task with little to do takes all of it in each batch; one with a
backlog takes its first batch up to the bounds and then batches of about `batch.duration.ms` of
work, which spreads the fixed cost of a batch (its Spark job, its offset commit) over many records.
The executor learns a task's speed and record size from the batches it has run
(``sluiceway_executor.pipelines.batch_sizing``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from sluiceway.connect.config import (
    AbstractConfig,
    ConfigDef,
    ConfigType,
    Importance,
    Range,
    Width,
)

__all__ = [
    "BATCH_DURATION_MS_CONFIG",
    "BATCH_GROUP",
    "BATCH_MAX_BYTES_CONFIG",
    "BATCH_MAX_RECORDS_CONFIG",
    "DEFAULT_BATCH_DURATION_MS",
    "DEFAULT_BATCH_MAX_BYTES",
    "DEFAULT_BATCH_MAX_RECORDS",
    "BatchLimits",
    "batch_config_def",
]

BATCH_GROUP: Final = "Batches"
BATCH_MAX_RECORDS_CONFIG: Final = "batch.max.records"
BATCH_MAX_BYTES_CONFIG: Final = "batch.max.bytes"
BATCH_DURATION_MS_CONFIG: Final = "batch.duration.ms"

DEFAULT_BATCH_MAX_RECORDS: Final = 1_000_000
DEFAULT_BATCH_MAX_BYTES: Final = 256 * 1024 * 1024
DEFAULT_BATCH_DURATION_MS: Final = 5_000


@functools.cache
def batch_config_def() -> ConfigDef:
    """The three keys, with their defaults (built once: every task start parses them)."""
    return (
        ConfigDef()
        .define(
            BATCH_DURATION_MS_CONFIG,
            ConfigType.LONG,
            DEFAULT_BATCH_DURATION_MS,
            Range.at_least(1),
            Importance.LOW,
            "About how long, in milliseconds, one batch of a task should take. A task with a backlog "
            "gets batches that take about this long (learnt from its earlier batches), which spreads "
            "each batch's fixed cost over more records; a task with less to do takes all of it in one "
            "batch. Longer batches also mean more work redone after a failure and a later stop.",
            BATCH_GROUP,
            1,
            Width.SHORT,
            "Batch duration (ms)",
        )
        .define(
            BATCH_MAX_BYTES_CONFIG,
            ConfigType.LONG,
            DEFAULT_BATCH_MAX_BYTES,
            Range.at_least(1),
            Importance.LOW,
            "The most bytes of keys and values one batch of a task should hold, estimated from the "
            "sizes of the records seen so far: a sink's (sampled at each partition's end) and a "
            "record-level source's. A DataFrame-level source is given a record count only.",
            BATCH_GROUP,
            2,
            Width.SHORT,
            "Batch bytes",
        )
        .define(
            BATCH_MAX_RECORDS_CONFIG,
            ConfigType.INT,
            DEFAULT_BATCH_MAX_RECORDS,
            Range.at_least(1),
            Importance.LOW,
            "The most records one batch of a task holds, whatever batch.duration.ms and "
            "batch.max.bytes allow. A source task writes at most one batch again after a fault.",
            BATCH_GROUP,
            3,
            Width.SHORT,
            "Batch records",
        )
    )


@dataclass(frozen=True)
class BatchLimits:
    """A connector's batch bounds, parsed."""

    max_records: int = DEFAULT_BATCH_MAX_RECORDS
    max_bytes: int = DEFAULT_BATCH_MAX_BYTES
    duration_ms: int = DEFAULT_BATCH_DURATION_MS

    @classmethod
    def from_config(cls, connector_config: Mapping[str, str]) -> BatchLimits:
        """The bounds a connector config sets, defaults for the keys it leaves unset or empty.
        Raises ConfigException naming a malformed key."""
        given = {
            name: value.strip()
            for name in (BATCH_DURATION_MS_CONFIG, BATCH_MAX_BYTES_CONFIG, BATCH_MAX_RECORDS_CONFIG)
            if (value := connector_config.get(name)) is not None and value.strip()
        }
        parsed = AbstractConfig(batch_config_def(), given)
        return cls(
            max_records=parsed.get_int(BATCH_MAX_RECORDS_CONFIG),
            max_bytes=parsed.get_long(BATCH_MAX_BYTES_CONFIG),
            duration_ms=parsed.get_long(BATCH_DURATION_MS_CONFIG),
        )

    @property
    def duration_s(self) -> float:
        return self.duration_ms / 1000.0
