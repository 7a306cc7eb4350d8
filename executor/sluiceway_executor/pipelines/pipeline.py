"""The interface between the runner and a task's pipeline: `Pipeline`, `PipelineFactory`, what one
batch did (`BatchOutcome`), and the canonical text of a source partition both index offsets by."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from sluiceway.offsets import OffsetPair
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["BatchOutcome", "Pipeline", "PipelineFactory", "canonical"]


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch did: ``records`` handled (None when the pipeline cannot tell cheaply; it is
    then taken as "some"), the ``offsets`` to commit now that the data is durable, and the
    ``topics`` it wrote (sources) or read (sinks)."""

    records: int | None
    offsets: list[OffsetPair] = field(default_factory=list)
    topics: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return self.records == 0


class Pipeline(Protocol):
    """One task's batches. ``run_batch`` does the Spark work and returns once the batch's data is
    durable; ``committed`` is called after the control plane accepted its offsets."""

    def start(self) -> None: ...

    def run_batch(self, batch_id: int) -> BatchOutcome: ...

    def committed(self, outcome: BatchOutcome) -> None: ...

    def stop(self) -> None: ...


class PipelineFactory(Protocol):
    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline: ...


def canonical(value: Mapping[str, Any]) -> str:
    """Compact JSON with sorted keys, so equal source partitions give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
