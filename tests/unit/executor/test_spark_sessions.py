"""SparkSessions with a stand-in for the Spark Connect client: one replacement per lost session,
shared by every task that noticed, retried until the server answers, and ended by stop or cancel.
(tests/integration/executor/test_spark_session_recovery.py kills a real server.)"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from pyspark.sql import SparkSession

from sluiceway_executor.spark_sessions import SparkSessions


class FakeSession:
    def __init__(self, number: int) -> None:
        self.number = number
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


class Server:
    """Builds numbered sessions; refuses while `down` is set."""

    def __init__(self) -> None:
        self.down = threading.Event()
        self.built: list[FakeSession] = []
        self.attempts = 0
        self.lock = threading.Lock()

    def connect(self, remote: str) -> SparkSession:
        with self.lock:
            self.attempts += 1
            if self.down.is_set():
                raise ConnectionError("nothing listens")
            session = FakeSession(len(self.built) + 1)
            self.built.append(session)
            time.sleep(0.05)  # long enough for other callers to queue up behind the build
            return cast(SparkSession, session)


def sessions(server: Server, stop: threading.Event | None = None) -> SparkSessions:
    return SparkSessions(
        "sc://nowhere:1", stop or threading.Event(), connect=server.connect, retry_min=0.01, retry_max=0.05
    )


def test_the_first_session_waits_for_the_server() -> None:
    server = Server()
    server.down.set()
    keeper = sessions(server)
    threading.Timer(0.2, server.down.clear).start()
    first = keeper.start()
    assert first is keeper.current() and cast(Any, first).number == 1
    assert server.attempts > 1 and keeper.generation == 1


def test_tasks_that_lose_the_session_together_share_one_replacement() -> None:
    server = Server()
    keeper = sessions(server)
    lost = keeper.start()
    results: list[SparkSession | None] = []
    threads = [threading.Thread(target=lambda: results.append(keeper.renew(lost))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(server.built) == 2
    assert all(result is keeper.current() for result in results) and len(results) == 4
    assert cast(Any, lost).stopped and keeper.generation == 2
    # A task that noticed late, with the lost session in hand, gets the replacement as it is.
    assert keeper.renew(lost) is keeper.current() and len(server.built) == 2


def test_stop_or_cancel_ends_the_wait_for_a_down_server() -> None:
    server = Server()
    stop = threading.Event()
    keeper = sessions(server, stop)
    lost = keeper.start()
    server.down.set()
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    assert keeper.renew(lost, cancel) is None
    # The build a cancelled task began is taken up by the next task that asks.
    threading.Timer(0.2, server.down.clear).start()
    replacement = keeper.renew(lost)
    assert replacement is not None and replacement is not lost
    server.down.set()
    threading.Timer(0.2, stop.set).start()
    assert keeper.renew(replacement) is None


def test_a_probe_that_does_not_answer_in_time_says_unhealthy() -> None:
    class Hanging:
        def range(self, n: int) -> Any:
            time.sleep(5)

    keeper = sessions(Server())
    assert not keeper.healthy(cast(SparkSession, Hanging()), timeout=0.2)

    class Failing:
        def range(self, n: int) -> Any:
            raise ConnectionError("gone")

    assert not keeper.healthy(cast(SparkSession, Failing()), timeout=1)
