"""The runner's head start on a batch (PlansAhead): the next batch is planned while the one before
commits, and nothing else reaches the pipeline until that plan is done. The pipeline and the
committer are small in-process fakes; the sink pipeline's own plan_ahead runs on Kafka and Spark
in the integration tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus
from sluiceway_executor.pipelines.pipeline import BatchOutcome, PlansAhead, ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from tests.unit.executor.task_hosts import TIMEOUT, RecordingHost


@dataclass
class PlanningPipeline:
    """Batch n holds offset n; every call is written to ``events`` with the thread it came on."""

    events: list[tuple[str, int, str]] = field(default_factory=list)
    # Set when the commit of batch n begins.
    commit_began: dict[int, threading.Event] = field(default_factory=dict)
    # The batch whose outcome is empty (no offsets), if any.
    empty_batch: int | None = None
    batches: int = 0

    def _event(self, what: str, n: int) -> None:
        self.events.append((what, n, threading.current_thread().name))

    def start(self) -> None:
        pass

    def run_batch(self, batch_id: int) -> BatchOutcome:
        self._event("run_batch", batch_id)
        self.batches += 1
        if batch_id == self.empty_batch:
            return BatchOutcome(records=0)
        return BatchOutcome(records=1, offsets=[({"p": 0}, {"n": batch_id})])

    def plan_ahead(self, outcome: BatchOutcome) -> None:
        n = int(outcome.offsets[0][1]["n"])  # type: ignore[index]
        # Runs while the commit of the same batch does: it waits for that commit to begin.
        began = self.commit_began.setdefault(n, threading.Event())
        assert began.wait(TIMEOUT), "plan_ahead ran without the commit"
        time.sleep(0.02)
        self._event("plan_ahead", n)

    def committed(self, outcome: BatchOutcome) -> None:
        self._event("committed", int(outcome.offsets[0][1]["n"]))  # type: ignore[index]

    def stop(self) -> None:
        self._event("stop", -1)


class WaitingCommitter:
    """Says when a commit begins; the commit of batch ``fenced_at`` comes back FENCED."""

    def __init__(self, pipeline: PlanningPipeline, fenced_at: int | None = None) -> None:
        self.pipeline = pipeline
        self.fenced_at = fenced_at
        self.commits: list[list[OffsetPair]] = []

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> WaitingCommitter:
        return self

    def open(self, timeout: float) -> None:
        pass

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        n = int(offsets[0][1]["n"])  # type: ignore[index]
        self.pipeline.events.append(("commit", n, threading.current_thread().name))
        self.commits.append(offsets)
        self.pipeline.commit_began.setdefault(n, threading.Event()).set()
        time.sleep(0.01)
        if n == self.fenced_at:
            return CommitOutcome(CommitStatus.FENCED, "a newer generation holds the task")
        return CommitOutcome(CommitStatus.OK)

    def close(self) -> None:
        pass


def run(pipeline: PlanningPipeline, committer: WaitingCommitter, batches: int) -> TaskRunner:
    spec = TaskSpec(
        "connectors/c/tasks/0", "c", 0, 7, {"connector.class": "X"}, {}, False, 1, fingerprint="fp"
    )
    runner = TaskRunner(
        spec,
        RecordingHost(),
        lambda spec, worker: pipeline,
        {},
        committer_factory=committer,
        poll_interval=0.01,
        max_poll_interval=0.01,
    )
    runner.start()
    deadline = time.monotonic() + TIMEOUT
    while pipeline.batches < batches and runner.alive and time.monotonic() < deadline:
        time.sleep(0.005)
    runner.stop(commit=False)
    assert runner.join(TIMEOUT)
    return runner


def test_the_next_batch_is_planned_while_the_one_before_commits() -> None:
    pipeline = PlanningPipeline()
    assert isinstance(pipeline, PlansAhead)
    runner = run(pipeline, WaitingCommitter(pipeline), batches=4)
    events = [(what, n) for what, n, _ in pipeline.events]
    # Every committed batch: its commit, its plan ahead on another thread, then `committed` once
    # that plan is done, and only then the next batch.
    for n in range(3):
        at = events.index(("commit", n))
        assert events[at + 1 : at + 4] == [("plan_ahead", n), ("committed", n), ("run_batch", n + 1)]
    threads = {what: thread for what, _, thread in pipeline.events}
    assert threads["plan_ahead"] != threads["commit"] == threads["run_batch"]
    assert threads["plan_ahead"] == f"plan-{runner.name}"
    assert pipeline.events[-1][0] == "stop"


def test_a_batch_with_nothing_to_commit_is_not_planned_ahead() -> None:
    pipeline = PlanningPipeline(empty_batch=1)
    run(pipeline, WaitingCommitter(pipeline), batches=3)
    events = [(what, n) for what, n, _ in pipeline.events]
    assert ("plan_ahead", 0) in events
    assert ("plan_ahead", 1) not in events and ("commit", 1) not in events


def test_a_fenced_commit_waits_for_the_plan_before_the_pipeline_stops() -> None:
    pipeline = PlanningPipeline()
    committer = WaitingCommitter(pipeline, fenced_at=1)
    runner = run(pipeline, committer, batches=5)
    assert runner.fenced
    events = [(what, n) for what, n, _ in pipeline.events]
    # The plan made during the refused commit finishes before the pipeline stops; no batch follows.
    assert events[-3:] == [("commit", 1), ("plan_ahead", 1), ("stop", -1)]
    assert ("committed", 1) not in events
