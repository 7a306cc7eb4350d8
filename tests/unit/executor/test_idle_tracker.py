"""When a running task counts as idle (issue 31, item 8): IdleTracker's transitions on clocks the
test moves, and a TaskRunner that reports RUNNING with the idle detail only when the state changes.
The runner's pipeline and committer are small in-process fakes; tests/integration/test_idle_status.py
runs the same path on Kafka and Spark."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from sluiceway.api.v1 import common_pb2
from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus
from sluiceway_executor.pipelines.idle import END_OF_DATA, NO_NEW_RECORDS, Idleness, IdleTracker
from sluiceway_executor.pipelines.pipeline import BatchOutcome, ProducedRecord
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from tests.unit.executor.task_hosts import RecordingHost, Report


class Clocks:
    def __init__(self) -> None:
        self.now = 100.0

    def mono(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now


def tracker(clocks: Clocks, idle_after: float = 10.0) -> IdleTracker:
    return IdleTracker(idle_after, clock=clocks.mono, wall_clock=clocks.wall)


def wall_ms(clocks: Clocks) -> int:
    return int(clocks.wall() * 1000)


def test_empty_batches_make_a_task_idle_only_after_the_threshold() -> None:
    clocks = Clocks()
    idle = tracker(clocks)
    assert idle.observe(empty=False) is False and idle.state is None
    first_empty = wall_ms(clocks)
    assert idle.observe(empty=True) is False
    clocks.now += 9.9
    assert idle.observe(empty=True) is False and idle.state is None
    clocks.now += 0.1
    assert idle.observe(empty=True) is True
    # Idle since the first empty batch, not since the threshold passed.
    assert idle.state == Idleness(NO_NEW_RECORDS, first_empty)
    clocks.now += 30
    assert idle.observe(empty=True) is False
    # The first batch with records makes it busy again, and the count starts afresh.
    assert idle.observe(empty=False) is True and idle.state is None
    clocks.now += 1
    assert idle.observe(empty=True) is False
    clocks.now += 9
    assert idle.observe(empty=True) is False


def test_records_more_often_than_the_threshold_never_make_it_idle() -> None:
    clocks = Clocks()
    idle = tracker(clocks)
    for _ in range(20):
        for _ in range(8):  # eight seconds of empty batches, then records
            clocks.now += 1
            assert idle.observe(empty=True) is False
        assert idle.observe(empty=False) is False
    assert idle.state is None


def test_end_of_data_is_idle_at_once_and_stays_until_records_come() -> None:
    clocks = Clocks()
    idle = tracker(clocks)
    # The batch that holds the last records says end of data: idle from then.
    at_end = wall_ms(clocks)
    assert idle.observe(empty=False, end_of_data=True) is True
    assert idle.state == Idleness(END_OF_DATA, at_end)
    clocks.now += 60
    assert idle.observe(empty=True, end_of_data=True) is False
    # An empty batch that does not repeat it does not turn it into "no new records".
    clocks.now += 60
    assert idle.observe(empty=True) is False and idle.state == Idleness(END_OF_DATA, at_end)
    assert idle.observe(empty=False) is True and idle.state is None


def test_end_of_data_after_empty_batches_keeps_their_start() -> None:
    clocks = Clocks()
    idle = tracker(clocks)
    first_empty = wall_ms(clocks)
    idle.observe(empty=True)
    clocks.now += 11
    assert idle.observe(empty=True) is True and idle.state == Idleness(NO_NEW_RECORDS, first_empty)
    clocks.now += 1
    # The detail changes (a transition to report); the time it has been idle does not.
    assert idle.observe(empty=True, end_of_data=True) is True
    assert idle.state == Idleness(END_OF_DATA, first_empty)


# --- the runner -------------------------------------------------------------------------------


class ScriptedPipeline:
    """Returns the scripted outcomes one per batch, then empty batches until stopped."""

    def __init__(self, outcomes: list[BatchOutcome]) -> None:
        self.outcomes = list(outcomes)
        self.done = threading.Event()

    def start(self) -> None:
        pass

    def run_batch(self, batch_id: int) -> BatchOutcome:
        if self.outcomes:
            return self.outcomes.pop(0)
        self.done.set()
        return BatchOutcome(records=0)

    def committed(self, outcome: BatchOutcome) -> None:
        pass

    def stop(self) -> None:
        pass


class Committer:
    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Committer:
        return self

    def open(self, timeout: float) -> None:
        pass

    def commit(
        self, offsets: list[OffsetPair], timeout: float, records: Sequence[ProducedRecord] = ()
    ) -> CommitOutcome:
        return CommitOutcome(CommitStatus.OK)

    def close(self) -> None:
        pass


def _spec() -> TaskSpec:
    return TaskSpec("connectors/c/tasks/0", "c", 0, (1 << 32) + 1, {"connector.class": "X"}, {}, False, 1)


def _run(outcomes: list[BatchOutcome], idle_after: float, until: int) -> list[Report]:
    pipeline = ScriptedPipeline(outcomes)
    host = RecordingHost()
    runner = TaskRunner(
        _spec(),
        host,
        lambda spec, worker_config: pipeline,
        {},
        committer_factory=Committer(),
        poll_interval=0.01,
        max_poll_interval=0.02,
        idle_after=idle_after,
    ).start()
    try:
        host.wait_for(lambda reports: len(reports) >= until)
        pipeline.done.wait(5)
    finally:
        runner.stop(commit=False)
        assert runner.join(10)
    return host.reports


def _data(records: int, *, end: bool = False) -> BatchOutcome:
    return BatchOutcome(records=records, offsets=[({"p": 0}, {"n": records})], end_of_data=end)


def test_the_runner_reports_idleness_only_when_it_changes() -> None:
    outcomes = [
        _data(5),
        _data(5),
        BatchOutcome(records=0, end_of_data=True),
        BatchOutcome(records=0, end_of_data=True),
        BatchOutcome(records=0, end_of_data=True),
        _data(2),
        _data(2),
    ]
    # Long threshold: the empty batches at the end do not make it idle during the test.
    reports = _run(outcomes, idle_after=60.0, until=3)
    running = [r for r in reports if r.state == common_pb2.STATE_RUNNING]
    assert [r.detail for r in running] == ["", END_OF_DATA, ""]
    assert running[1].idle_since_ms > 0 and running[2].idle_since_ms == 0


def test_the_runner_reports_a_task_without_records_idle_after_the_threshold() -> None:
    reports = _run([_data(3)], idle_after=0.2, until=2)
    assert [(r.state, r.detail) for r in reports] == [
        (common_pb2.STATE_RUNNING, ""),
        (common_pb2.STATE_RUNNING, NO_NEW_RECORDS),
    ]
    # Idle since its first empty batch, a little before it was reported.
    assert 0 < reports[1].wall_ms - reports[1].idle_since_ms < 2_000
