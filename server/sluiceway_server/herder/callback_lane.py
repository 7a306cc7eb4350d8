"""`CallbackLane`: an executor that runs what it is given one call after another, in order, on a
thread of a shared `LanePool`, which starts threads when lanes wait and lets idle ones end.

Each connector instance on the leader has a lane for its plugin's callbacks (`connector_instance`).
A `ThreadPoolExecutor(1)` per instance did the same, but kept a thread for the instance's whole
life: with 10,000 connectors that is 10,000 idle threads, and CPython makes every start of a
non-daemon thread walk the shutdown locks of all the others (`threading._maintain_shutdown_locks`),
so each new connector cost more than the one before (measured: 52 creates/s at 1,000 connectors,
8 at 10,000; a cold start at 10,000 spent a third of its CPU in that walk). A thread started for
each burst of calls instead spent most of a cold start creating threads.

So lanes share the threads of one pool. A lane with calls to run waits in the pool's queue; the
first idle thread takes it and runs its calls, in order, until none is left. The isolation a
thread per connector gave is kept by the pool's watcher: when the lane at the head of the queue
has waited ``patience`` seconds and no thread is idle, a new thread starts. So a callback that
hangs (or runs long) holds one thread and its own lane only; every other lane gets a thread within
about ``patience``. A thread idle for ``idle_s`` ends. The threads are daemon threads: a callback
that never returns does not keep the process from exiting (its caller gave up on it long before).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from contextlib import AbstractContextManager
from typing import Any, Final, ParamSpec, TypeVar

__all__ = ["CallbackLane", "LanePool", "shared_pool"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# How long a lane may wait for a thread before the pool starts another one.
DEFAULT_PATIENCE_S: Final = 0.05
# How long a thread waits for work before it ends.
DEFAULT_IDLE_S: Final = 30.0


class LanePool:
    """Daemon threads that run the calls of lanes (see the module doc): as many as the lanes that
    ran at once needed, started when a lane waited ``patience`` seconds with no thread idle, each
    ending after ``idle_s`` seconds without work."""

    def __init__(
        self,
        name: str = "plugin-lane",
        *,
        patience: float = DEFAULT_PATIENCE_S,
        idle_s: float = DEFAULT_IDLE_S,
    ) -> None:
        self._name = name
        self._patience = patience
        self._idle_s = idle_s
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # threads waiting for a lane
        self._watch = threading.Condition(self._lock)  # the watcher, waiting for a queue
        self._ready: deque[tuple[CallbackLane, float]] = deque()  # lanes, and since when they wait
        self._threads = 0
        self._idle = 0
        self._started = 0
        self._watcher: threading.Thread | None = None

    @property
    def threads(self) -> int:
        """The pool's threads now, busy or idle."""
        with self._lock:
            return self._threads

    def _schedule(self, lane: CallbackLane) -> None:
        """``lane`` has calls and is neither queued nor running: a thread is to run them."""
        with self._lock:
            self._ready.append((lane, time.monotonic()))
            if self._idle > len(self._ready) - 1:
                self._work.notify()
            elif self._threads == 0:
                self._start_thread()
            else:
                if self._watcher is None:
                    self._watcher = threading.Thread(
                        target=self._watch_queue, name=f"{self._name}-watcher", daemon=True
                    )
                    self._watcher.start()
                self._watch.notify()

    def _start_thread(self) -> None:
        """(Lock held.) One more thread."""
        self._threads += 1
        self._started += 1
        thread = threading.Thread(target=self._serve, name=f"{self._name}-{self._started}", daemon=True)
        thread.start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
                deadline = time.monotonic() + self._idle_s
                while not self._ready:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._idle -= 1
                        self._threads -= 1
                        return
                    self._work.wait(left)
                self._idle -= 1
                lane, _ = self._ready.popleft()
            try:
                lane._run_queued()
            except Exception:  # never expected: _run_queued hands every call's failure on
                log.exception("%s: a lane failed outside its calls", self._name)

    def _watch_queue(self) -> None:
        """Starts a thread whenever the lane at the head of the queue has waited ``patience``
        seconds and no thread is idle (the others are busy, perhaps for good)."""
        with self._lock:
            while True:
                if not self._ready:
                    self._watch.wait()
                    continue
                waited = time.monotonic() - self._ready[0][1]
                if waited >= self._patience and self._idle == 0:
                    self._start_thread()
                    # The new thread takes the head: give it that long before looking again.
                    self._watch.wait(self._patience)
                else:
                    self._watch.wait(max(self._patience - waited, 0.001))


@functools.cache
def shared_pool() -> LanePool:
    """The process's pool for connector callbacks, made on first use."""
    return LanePool()


class CallbackLane(Executor):
    """Runs submitted calls in submission order, one at a time, on a thread of ``pool`` (the
    shared one by default), named ``name`` while it runs them and inside ``around()`` (for example
    a connector's log fields). A call that never returns holds up only the calls behind it in this
    lane. ``shutdown`` refuses new calls; those already queued still run unless cancelled, as with
    ``ThreadPoolExecutor``."""

    def __init__(
        self,
        name: str,
        around: Callable[[], AbstractContextManager[object]] | None = None,
        pool: LanePool | None = None,
    ) -> None:
        self._name = name
        self._around = around or contextlib.nullcontext
        self._pool = pool or shared_pool()
        self._lock = threading.Lock()
        self._queue: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._scheduled = False  # queued in the pool or running its calls
        self._closed = False
        self._done = threading.Condition(self._lock)
        self._runner: threading.Thread | None = None  # the pool thread running the calls now

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self._name}: cannot take calls after shutdown")
            self._queue.append((future, lambda: fn(*args, **kwargs)))
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._pool._schedule(self)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            if cancel_futures:
                while self._queue:
                    self._queue.popleft()[0].cancel()
            if wait and self._runner is not threading.current_thread():
                self._done.wait_for(lambda: not self._scheduled)

    @property
    def busy(self) -> bool:
        """Whether calls are queued or running."""
        with self._lock:
            return self._scheduled

    def _run_queued(self) -> None:
        """(On a pool thread.) Runs the lane's calls until none is left."""
        thread = threading.current_thread()
        own_name = thread.name
        thread.name = self._name
        with self._lock:
            self._runner = thread
        try:
            with contextlib.ExitStack() as stack:
                try:
                    stack.enter_context(self._around())
                except Exception:
                    log.exception(
                        "%s: entering the lane's context failed; running its calls anyway", self._name
                    )
                while True:
                    with self._lock:
                        if not self._queue:
                            self._scheduled = False
                            self._runner = None
                            self._done.notify_all()
                            return
                        future, call = self._queue.popleft()
                    if not future.set_running_or_notify_cancel():
                        continue
                    try:
                        result = call()
                    except BaseException as exc:  # handed to the caller, as an executor does
                        future.set_exception(exc)
                    else:
                        future.set_result(result)
        finally:
            thread.name = own_name
