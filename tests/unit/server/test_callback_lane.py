"""CallbackLane and LanePool: a lane's calls in order, one at a time, on pool threads (daemon,
named after the lane while they run its calls); a call that hangs holds up only its own lane, the
pool starting a thread when a lane waits; idle threads end."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from sluiceway.common.log_context import current_log_fields, log_fields
from sluiceway_server.herder.callback_lane import CallbackLane, LanePool


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def pool() -> LanePool:
    return LanePool("test-lane", patience=0.02, idle_s=0.2)


def test_calls_run_in_order_one_at_a_time_on_a_named_daemon_thread(pool: LanePool) -> None:
    lane = CallbackLane("connector-orders", pool=pool)
    seen: list[tuple[int, str, bool]] = []
    running = threading.Semaphore(1)

    def call(n: int) -> int:
        assert running.acquire(blocking=False), "two calls at once"
        try:
            time.sleep(0.001)
            thread = threading.current_thread()
            seen.append((n, thread.name, thread.daemon))
            return n * 2
        finally:
            running.release()

    futures = [lane.submit(call, n) for n in range(50)]
    assert [f.result(5) for f in futures] == [n * 2 for n in range(50)]
    assert [n for n, _, _ in seen] == list(range(50))
    assert {(name, daemon) for _, name, daemon in seen} == {("connector-orders", True)}


def test_idle_threads_end_and_a_new_one_starts_for_the_next_call(pool: LanePool) -> None:
    lane = CallbackLane("connector-idle", pool=pool)
    assert lane.submit(lambda: "first").result(5) == "first"
    wait_until(lambda: not lane.busy)
    assert pool.threads == 1
    wait_until(lambda: pool.threads == 0)
    assert lane.submit(lambda: "again").result(5) == "again"
    assert pool.threads == 1


def test_many_lanes_of_quick_calls_share_a_few_threads() -> None:
    # A patience of 0.5 s: however slow a loaded machine runs this, the watcher adds at most two
    # threads a second, and quick calls never need more than a few.
    pool = LanePool("test-many", patience=0.5, idle_s=0.2)
    lanes = [CallbackLane(f"connector-many-{n}", pool=pool) for n in range(2000)]
    futures = [lane.submit(lambda n=n: n) for n, lane in enumerate(lanes)]  # type: ignore[misc]
    assert [f.result(5) for f in futures] == list(range(2000))
    assert pool.threads < 50
    wait_until(lambda: pool.threads == 0)


def test_a_lane_runs_its_calls_inside_its_context(pool: LanePool) -> None:
    lane = CallbackLane("connector-fields", lambda: log_fields(connector="fields"), pool=pool)
    assert lane.submit(lambda: dict(current_log_fields())).result(5) == {"connector": "fields"}
    other = CallbackLane("connector-plain", pool=pool)
    assert other.submit(lambda: dict(current_log_fields())).result(5) == {}

    def broken() -> AbstractContextManager[object]:
        raise RuntimeError("context failed")

    failing = CallbackLane("connector-broken-context", broken, pool=pool)
    assert failing.submit(lambda: "ran").result(5) == "ran"


def test_an_exception_reaches_the_caller_and_later_calls_still_run(pool: LanePool) -> None:
    lane = CallbackLane("connector-raises", pool=pool)

    def fail() -> None:
        raise ValueError("plugin failed")

    failed = lane.submit(fail)
    after = lane.submit(lambda: "after")
    with pytest.raises(ValueError, match="plugin failed"):
        failed.result(5)
    assert after.result(5) == "after"


def test_hung_calls_hold_up_their_own_lanes_only(pool: LanePool) -> None:
    release = threading.Event()
    hung = [CallbackLane(f"connector-hung-{n}", pool=pool) for n in range(5)]
    stuck = [lane.submit(release.wait) for lane in hung]
    behind = [lane.submit(lambda: "behind") for lane in hung]
    other = CallbackLane("connector-other", pool=pool)
    try:
        wait_until(lambda: all(f.running() for f in stuck))
        started = time.monotonic()
        assert other.submit(lambda: "free").result(2) == "free"
        assert time.monotonic() - started < 1.0
        assert not any(f.done() for f in stuck + behind)
    finally:
        release.set()
    assert [f.result(5) for f in behind] == ["behind"] * 5


def test_shutdown_refuses_new_calls_but_runs_the_queued_ones(pool: LanePool) -> None:
    release = threading.Event()
    lane = CallbackLane("connector-closing", pool=pool)
    first = lane.submit(release.wait)
    queued = lane.submit(lambda: "queued")
    lane.shutdown(wait=False)
    with pytest.raises(RuntimeError, match="after shutdown"):
        lane.submit(lambda: None)
    release.set()
    assert first.result(5) is True
    assert queued.result(5) == "queued"


def test_shutdown_can_cancel_the_queued_calls_and_wait_for_the_running_one(pool: LanePool) -> None:
    release = threading.Event()
    lane = CallbackLane("connector-cancel", pool=pool)
    first = lane.submit(release.wait)
    queued = lane.submit(lambda: "never")
    wait_until(first.running)
    threading.Timer(0.05, release.set).start()
    lane.shutdown(wait=True, cancel_futures=True)
    assert first.done() and queued.cancelled()
    # A call that shuts its own lane down does not wait for itself.
    closing = CallbackLane("connector-self-closing", pool=pool)
    assert closing.submit(lambda: closing.shutdown(wait=True)).result(5) is None


def test_asyncio_can_await_a_lane_as_its_executor() -> None:
    lane = CallbackLane("connector-asyncio")  # on the shared pool

    async def main() -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(lane, lambda: threading.current_thread().name)

    assert asyncio.run(main()) == "connector-asyncio"
