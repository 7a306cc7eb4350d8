"""The records a sink task left out (errors.tolerance=all) and dead-lettered, on the executor: the
runner counts them over committed batches only, reports new counts with RUNNING at once and then at
most once per interval (sooner with an idleness report), keeps an idle task's detail in those
reports, and starts from 0 with each run; the task table sends the counts and lists them in the
next Hello. The pipeline, the committer and the throttle's clock are small in-process fakes."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus
from sluiceway_executor.pipelines.idle import END_OF_DATA
from sluiceway_executor.pipelines.pipeline import BatchOutcome, ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from sluiceway_executor.task_table import TaskTable
from tests.unit.executor.task_hosts import TIMEOUT, RecordingHost, Report

# Restarts after 100 ms, so a failed run is followed by the next one within the test.
FAST = {"task.restart.backoff.initial.ms": "100", "task.restart.backoff.max.ms": "2000"}
DLQ = "dlq"


class Clock:
    """The monotonic clock the runner's throttle reads; the pipeline sets it as its batches run."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Step:
    """One scripted batch: it ends at ``at`` (seconds on the fake clock) with ``outcome``."""

    at: float
    outcome: BatchOutcome


@dataclass
class Script:
    """The batches of each run, one list per run; a run past its list runs empty batches."""

    clock: Clock
    runs: list[list[Step]]
    started: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> ScriptedPipeline:
        steps = self.runs[self.started] if self.started < len(self.runs) else []
        self.started += 1
        return ScriptedPipeline(self, list(steps))


class ScriptedPipeline:
    def __init__(self, script: Script, steps: list[Step]) -> None:
        self.script = script
        self.steps = steps

    def start(self) -> None:
        pass

    def run_batch(self, batch_id: int) -> BatchOutcome:
        if self.steps:
            step = self.steps.pop(0)
            self.script.clock.now = step.at
            return step.outcome
        if self.script.started >= len(self.script.runs):
            self.script.done.set()
        return BatchOutcome(records=0)

    def committed(self, outcome: BatchOutcome) -> None:
        pass

    def stop(self) -> None:
        pass


class Committer:
    """Answers each commit with the next scripted outcome, then OK."""

    def __init__(self, outcomes: Sequence[CommitOutcome] = ()) -> None:
        self.outcomes = list(outcomes)
        self.dead_letters: list[int] = []

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Committer:
        return self

    def open(self, timeout: float) -> None:
        pass

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        self.dead_letters.append(len(records))
        return self.outcomes.pop(0) if self.outcomes else CommitOutcome(CommitStatus.OK)

    def close(self) -> None:
        pass


def _spec() -> TaskSpec:
    return TaskSpec("connectors/c/tasks/0", "c", 0, (1 << 32) + 1, {"connector.class": "X"}, {}, False, 1)


def batch(records: int, skipped: int = 0, dead: int = 0, *, end: bool = False) -> BatchOutcome:
    """A batch of ``records`` read, ``skipped`` of them left out, ``dead`` of those dead-lettered."""
    return BatchOutcome(
        records=records,
        offsets=[({"p": 0}, {"n": records})] if records else [],
        end_of_data=end,
        skipped=skipped,
        dead_letters=tuple(ProducedRecord(DLQ, None, b"x") for _ in range(dead)),
    )


def _run(
    runs: list[list[Step]], committer: Committer | None = None, *, until: int = 1
) -> tuple[list[Report], Committer]:
    """Runs the task through every scripted batch of every run and returns what it reported."""
    clock = Clock()
    script = Script(clock, runs)
    committer = committer or Committer()
    host = RecordingHost()
    runner = TaskRunner(
        _spec(),
        host,
        script,
        FAST,
        committer_factory=committer,
        poll_interval=0.01,
        max_poll_interval=0.02,
        idle_after=60.0,  # no "no new records" idleness within a test
        counts_interval=5.0,
        clock=clock,
    ).start()
    try:
        assert script.done.wait(TIMEOUT), f"the script did not finish: {host.states()}"
        host.wait_for(lambda reports: len(reports) >= until)
    finally:
        runner.stop(commit=False)
        assert runner.join(TIMEOUT)
    return host.reports, committer


def running(reports: list[Report]) -> list[tuple[str, int, int]]:
    return [
        (r.detail, r.records_skipped, r.records_dead_lettered)
        for r in reports
        if r.state == common_pb2.STATE_RUNNING
    ]


def test_new_counts_go_out_at_once_and_then_at_most_once_per_interval() -> None:
    reports, committer = _run(
        [
            [
                Step(1.0, batch(10, 3, 2)),  # the first change: reported at once
                Step(2.0, batch(10, 1)),  # 1 s after: waits
                Step(3.0, batch(10)),  # still waiting, nothing new
                Step(6.0, batch(10)),  # 5 s after the last report: the pending change goes out
                Step(7.0, batch(10, 1, 1)),  # waits again
                Step(8.0, batch(10)),
                Step(12.0, batch(0)),  # an empty batch past the interval carries it too
                Step(13.0, batch(10)),  # nothing new: no report
            ]
        ],
        until=4,
    )
    assert running(reports) == [("", 0, 0), ("", 3, 2), ("", 4, 2), ("", 5, 3)]
    # The runner hands the batch's dead letters to the commit that writes them.
    assert committer.dead_letters == [2, 0, 0, 0, 1, 0, 0]


def test_a_batch_whose_commit_failed_counts_nothing_and_each_run_counts_from_zero() -> None:
    refused = CommitOutcome(CommitStatus.REJECTED, "the broker refused the transaction")
    reports, _ = _run(
        [
            [Step(1.0, batch(10, 3, 2))],  # its commit is refused: the run fails
            [Step(2.0, batch(10, 1))],  # the next run counts from 0
        ],
        Committer([refused]),
        until=4,
    )
    assert [common_pb2.State.Name(r.state) for r in reports] == [
        "STATE_RUNNING",
        "STATE_RESTARTING",
        "STATE_RUNNING",
        "STATE_RUNNING",
    ]
    assert reports[1].records_skipped == reports[1].records_dead_lettered == 0
    assert running(reports) == [("", 0, 0), ("", 0, 0), ("", 1, 0)]


def test_a_batch_fenced_at_its_commit_counts_nothing() -> None:
    clock = Clock()
    script = Script(clock, [[Step(1.0, batch(10, 3, 3))]])
    host = RecordingHost()
    runner = TaskRunner(
        _spec(),
        host,
        script,
        FAST,
        committer_factory=Committer([CommitOutcome(CommitStatus.FENCED, "another executor")]),
        poll_interval=0.01,
        clock=clock,
    ).start()
    # Another executor took the task over: the runner ends without a word about the batch.
    assert runner.join(TIMEOUT) and runner.fenced
    assert running(host.reports) == [("", 0, 0)]


def test_an_idle_report_carries_pending_counts_and_a_counts_report_keeps_the_idle_detail() -> None:
    reports, _ = _run(
        [
            [
                Step(1.0, batch(10, 2, 2)),  # reported at once
                Step(2.0, batch(10, 1)),  # waits
                Step(3.0, batch(0, end=True)),  # idle: the idleness report takes the pending count
                Step(4.0, batch(5, 1, 1, end=True)),  # still idle at the end of data; waits
                Step(8.0, batch(0, end=True)),  # 5 s on: counts again, still idle
                Step(9.0, batch(0, end=True)),
            ]
        ],
        until=4,
    )
    assert running(reports) == [
        ("", 0, 0),
        ("", 2, 2),
        (END_OF_DATA, 3, 2),
        (END_OF_DATA, 4, 3),
    ]
    idle = [r for r in reports if r.detail]
    assert idle[0].idle_since_ms > 0 and idle[1].idle_since_ms == idle[0].idle_since_ms


# --- the task table ------------------------------------------------------------------------------


class Outlet:
    def __init__(self) -> None:
        self.sent: list[executor_pb2.ExecutorMessage] = []

    def send(self, message: executor_pb2.ExecutorMessage) -> bool:
        self.sent.append(message)
        return True


class HeldPipeline:
    """A pipeline whose start waits until released: its runner reports nothing meanwhile."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def start(self) -> None:
        self.release.wait(TIMEOUT)

    def run_batch(self, batch_id: int) -> BatchOutcome:
        return BatchOutcome(records=0)

    def committed(self, outcome: BatchOutcome) -> None:
        pass

    def stop(self) -> None:
        pass


def test_the_task_table_sends_the_counts_and_lists_them_in_the_next_hello() -> None:
    pipeline = HeldPipeline()
    table = TaskTable(lambda spec, worker_config: pipeline, Committer())
    spec = _spec()
    table.assign([spec], {})
    try:
        first = Outlet()
        table.connect(first, executor_pb2.Hello(executor_id="e1"))
        table.send_status(
            spec,
            common_pb2.STATE_RUNNING,
            detail=END_OF_DATA,
            idle_since_ms=1_700_000_000_000,
            records_skipped=7,
            records_dead_lettered=4,
        )
        report = first.sent[-1].task_status
        assert (report.detail, report.records_skipped, report.records_dead_lettered) == (END_OF_DATA, 7, 4)
        table.disconnect(first)
        # Attaching again, the executor lists the task with what it last reported.
        second = Outlet()
        table.connect(second, executor_pb2.Hello(executor_id="e1"))
        (listed,) = second.sent[0].hello.running_tasks
        assert listed.state == common_pb2.STATE_RUNNING and listed.detail == END_OF_DATA
        assert listed.idle_since.ToMilliseconds() == 1_700_000_000_000
        assert (listed.records_skipped, listed.records_dead_lettered) == (7, 4)
    finally:
        pipeline.release.set()
        assert table.stop_all(TIMEOUT)
