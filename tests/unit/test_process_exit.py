"""`lingering_threads`: what a stopped process would wait on at exit, after a grace period."""

from __future__ import annotations

import threading
import time

from sluiceway.common.process_exit import lingering_threads


def test_a_thread_that_ends_within_the_grace_is_not_lingering() -> None:
    worker = threading.Thread(target=time.sleep, args=(0.2,), name="finishing")
    worker.start()
    assert worker not in lingering_threads(grace=2.0)
    assert not worker.is_alive()


def test_a_blocked_thread_is_named_once_the_grace_is_over_and_daemons_are_not() -> None:
    release = threading.Event()
    blocked = threading.Thread(target=release.wait, name="blocked")
    daemon = threading.Thread(target=release.wait, name="daemon", daemon=True)
    blocked.start()
    daemon.start()
    try:
        started = time.monotonic()
        stuck = lingering_threads(grace=0.3)
        assert time.monotonic() - started >= 0.3
        assert blocked in stuck
        assert daemon not in stuck
        assert threading.current_thread() not in stuck
    finally:
        release.set()
        blocked.join()
        daemon.join()
