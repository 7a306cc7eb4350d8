"""Leaving a `sluiceway` process (control plane or executor) once its own shutdown is done, without
waiting on threads that cannot be stopped.

Python joins every non-daemon thread at exit, `concurrent.futures` pool threads included. A plugin
callback that never returns (abandoned after plugin.callback.timeout.ms) or a Spark Connect client
retrying an unreachable server would then hold a stopped process alive until a supervisor kills
it. `exit_now` flushes the logs and leaves at once; `lingering_threads` says whether it is needed."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import NoReturn

__all__ = ["exit_now", "lingering_threads"]


def lingering_threads(grace: float = 0.0) -> list[threading.Thread]:
    """The non-daemon threads besides the caller's still alive after up to ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while True:
        current = threading.current_thread()
        alive = [t for t in threading.enumerate() if t is not current and not t.daemon and t.is_alive()]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def exit_now(code: int) -> NoReturn:
    """Ends the process with ``code`` after flushing the logs and the standard streams; no exit
    hooks and no thread joins run."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
