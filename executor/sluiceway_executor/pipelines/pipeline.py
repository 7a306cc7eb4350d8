"""The interface between the runner and a task's pipeline: `Pipeline`, `PipelineFactory`, what one
batch did (`BatchOutcome`), the heartbeat schedule a source pipeline may expose to the runner
(`SchedulesHeartbeats`), the head start a pipeline may take on its next batch (`PlansAhead`), and
the canonical text of a source partition both index offsets by."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.pipelines.observed import Tally
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = [
    "BatchOutcome",
    "Pipeline",
    "PipelineFactory",
    "PlansAhead",
    "ProducedRecord",
    "SchedulesHeartbeats",
    "canonical",
    "merge_offsets",
]


@dataclass(frozen=True)
class ProducedRecord:
    """A record the runner writes to Kafka in the transaction that commits its batch's offsets (a
    record for a sink's dead-letter queue): visible to readers exactly when the commit is."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch did: ``records`` handled (None when the pipeline cannot tell cheaply; it is
    then taken as "some"), the ``offsets`` to commit now that the data is durable, and the
    ``topics`` it wrote (sources) or read (sinks). ``steps`` holds the seconds its named steps took
    (a sink's ``plan`` and ``write``), which the runner logs with the commit's. ``end_of_data``: the
    task said it has nothing more to read after this batch (``SourceBatch.end_of_data``).
    ``skipped``: records left out because they failed a converter or a transform
    (``errors.tolerance=all``); ``dead_letters``: those of them the commit writes to the
    dead-letter queue. ``read`` and ``written``: the records (and bytes) the batch took in and
    handed on, as Spark counted them in the batch's own job (None where it did not, see
    ``observed``). ``backlog`` (sinks): the records each partition still holds after the batch,
    from the end offsets its plan fetched."""

    records: int | None
    offsets: list[OffsetPair] = field(default_factory=list)
    topics: frozenset[str] = frozenset()
    steps: Mapping[str, float] = field(default_factory=dict, compare=False)
    end_of_data: bool = False
    skipped: int = 0
    dead_letters: tuple[ProducedRecord, ...] = ()
    read: Tally | None = None
    written: Tally | None = None
    backlog: Mapping[tuple[str, int], int] | None = None

    @property
    def empty(self) -> bool:
        return self.records == 0


class Pipeline(Protocol):
    """One task's batches. ``run_batch`` does the Spark work and returns once the batch's data is
    durable; ``committed`` is called once its offsets are committed."""

    def start(self) -> None: ...

    def run_batch(self, batch_id: int) -> BatchOutcome: ...

    def committed(self, outcome: BatchOutcome) -> None: ...

    def stop(self) -> None: ...


@runtime_checkable
class SchedulesHeartbeats(Protocol):
    """A pipeline whose task sends heartbeat records (KIP-910) at the start of a batch once they are
    due: the runner shortens its pause after an empty batch so that a due heartbeat is not late."""

    def seconds_until_heartbeat(self) -> float | None:
        """Seconds until the next heartbeat is due (0: at the next batch); None: no heartbeats."""
        ...


@runtime_checkable
class PlansAhead(Protocol):
    """A pipeline that plans its next batch while the runner commits the offsets of the one before,
    so the commit's round trips leave the batch loop's critical path."""

    def plan_ahead(self, outcome: BatchOutcome) -> None:
        """Plans the batch after ``outcome`` as if its offsets were committed, for the next
        ``run_batch`` to take. Runs on a thread of its own while the runner commits, which calls
        nothing else on the pipeline until this returns. It does not raise: a plan it cannot make
        is left to ``run_batch``. If the commit does not happen the task's run ends, and the plan
        is never used."""
        ...


class PipelineFactory(Protocol):
    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline: ...


def canonical(value: Mapping[str, Any]) -> str:
    """Compact JSON with sorted keys, so equal source partitions give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def merge_offsets(*offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> list[OffsetPair]:
    """One offset per source partition: for a partition given more than once, the last one given."""
    merged: dict[str, OffsetPair] = {}
    for pairs in offsets:
        for partition, offset in pairs:
            key = canonical(partition)
            merged.pop(key, None)
            merged[key] = (dict(partition), None if offset is None else dict(offset))
    return list(merged.values())
