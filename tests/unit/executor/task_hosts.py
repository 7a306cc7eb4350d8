"""A TaskHost for runner unit tests: it keeps every status a runner reports and lets a test wait
for the ones it expects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluiceway.api.v1 import common_pb2
from sluiceway_executor.pipelines.pipeline import BatchOutcome
from sluiceway_executor.pipelines.spec import TaskSpec

TIMEOUT = 10.0


@dataclass(frozen=True)
class Report:
    state: common_pb2.State.ValueType
    trace: str
    attempt: int
    next_restart_ms: int
    at: float  # time.monotonic() when reported
    wall_ms: int  # time.time() in ms when reported
    detail: str = ""
    idle_since_ms: int = 0
    records_skipped: int = 0
    records_dead_lettered: int = 0


class RecordingHost:
    def __init__(self) -> None:
        self.reports: list[Report] = []
        self.batches: list[BatchOutcome] = []
        self._cond = threading.Condition()

    def send_status(
        self,
        spec: TaskSpec,
        state: common_pb2.State.ValueType,
        trace: str = "",
        *,
        restart_attempt: int = 0,
        next_restart_ms: int = 0,
        detail: str = "",
        idle_since_ms: int = 0,
        records_skipped: int = 0,
        records_dead_lettered: int = 0,
    ) -> None:
        report = Report(
            state,
            trace,
            restart_attempt,
            next_restart_ms,
            time.monotonic(),
            int(time.time() * 1000),
            detail,
            idle_since_ms,
            records_skipped,
            records_dead_lettered,
        )
        with self._cond:
            self.reports.append(report)
            self._cond.notify_all()

    def send_active_topics(self, spec: TaskSpec, topics: list[str]) -> None:
        pass

    def batch_committed(self, spec: TaskSpec, outcome: BatchOutcome, commit_seconds: float) -> None:
        self.batches.append(outcome)

    def wait_for(self, check: Callable[[list[Report]], bool], timeout: float = TIMEOUT) -> list[Report]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not check(self.reports):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"not reported within {timeout}s: {self.states()}")
                self._cond.wait(left)
            return list(self.reports)

    def states(self) -> list[str]:
        return [common_pb2.State.Name(r.state) for r in self.reports]


def count(state: common_pb2.State.ValueType, at_least: int) -> Callable[[list[Report]], bool]:
    """A check for ``wait_for``: ``state`` reported at least ``at_least`` times."""
    return lambda reports: sum(r.state == state for r in reports) >= at_least
