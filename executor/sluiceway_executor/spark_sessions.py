"""The executor's Spark Connect session, and its replacement when it is lost.

Every task of an executor runs its jobs on one Spark Connect session. When the server is killed,
restarted or replaced, that session is gone for good: the client answers with errors about an
unknown or changed session, or with UNAVAILABLE while nothing listens. The first task that notices
asks for a new session (``renew``); the others that notice meanwhile wait for the same one instead
of building their own. A new session gets what a session needs before any task uses it: our data
sources registered and the client's retry policy set.

The client's own retries are shortened (``CLIENT_MAX_RETRIES``, ``CLIENT_MAX_BACKOFF_MS``): by
default it would retry a down server for about ten minutes inside a single call, which would keep a
task silent long after the server is back. Here a call gives up after about fifteen seconds, and
``renew`` keeps trying to build a session, waiting as ``sluiceway.common.retry`` says between tries, until
the server answers or the executor stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from sluiceway.common.retry import RetryPolicy

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkSessions", "connect", "register_data_sources"]

log = logging.getLogger(__name__)

# The client's DefaultPolicy, but at most ~2 s between tries and ~15 s in all (see the module doc).
CLIENT_MAX_RETRIES: Final = 10
CLIENT_MAX_BACKOFF_MS: Final = 2000
_RETRY_MIN_S: Final = 0.5
_RETRY_MAX_S: Final = 5.0
_WARN_EVERY_S: Final = 30.0
_STOP_TIMEOUT_S: Final = 5.0


def register_data_sources(spark: SparkSession) -> None:
    """Registers the data sources the pipelines read and write through on ``spark``:
    ``sluiceway-kafka`` and ``sluiceway-source-task``."""
    from sluiceway_executor.datasources.registry import register

    register(spark)


def connect(remote: str) -> SparkSession:
    """A new session on ``remote`` with the short retry policy and our data sources registered."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark = SparkSession.builder.remote(remote).create()
    policy = DefaultPolicy(max_retries=CLIENT_MAX_RETRIES, max_backoff=CLIENT_MAX_BACKOFF_MS)
    spark.client.set_retry_policies([policy])
    register_data_sources(spark)
    return spark


def _stop_quietly(spark: SparkSession) -> None:
    """Ends a session whose server may be gone, without waiting on it for long: the client may
    retry its release call."""

    def stop() -> None:
        try:
            spark.stop()
        except Exception:
            log.debug("closing a lost Spark Connect session failed", exc_info=True)

    closing = threading.Thread(target=stop, name="spark-close", daemon=True)
    closing.start()
    closing.join(_STOP_TIMEOUT_S)


class SparkSessions:
    """Holds the executor's current session; builds the first one and each replacement."""

    def __init__(
        self,
        remote: str,
        stop: threading.Event,
        *,
        connect: Callable[[str], SparkSession] = connect,
        retry_min: float = _RETRY_MIN_S,
        retry_max: float = _RETRY_MAX_S,
    ) -> None:
        self.remote = remote
        self._stop = stop
        self._connect = connect
        # Building a session again until Spark Connect answers or the executor stops.
        self._retry = RetryPolicy(initial=retry_min, maximum=max(retry_max, retry_min))
        self._condition = threading.Condition()
        self._session: SparkSession | None = None
        self._building = False
        # How many sessions were built: 1 after start(), one more per replacement.
        self.generation = 0
        self._listeners: list[Callable[[], None]] = []

    def on_new_session(self, listener: Callable[[], None]) -> None:
        """Calls ``listener`` (on the building thread) after each new session is ready."""
        self._listeners.append(listener)

    def current(self) -> SparkSession:
        """The session tasks run on now (while a replacement is built, still the lost one: a task
        that fails on it asks ``renew`` and waits for the replacement)."""
        with self._condition:
            if self._session is None:
                raise RuntimeError("no Spark Connect session yet: call start() first")
            return self._session

    def start(self) -> SparkSession | None:
        """Builds the first session, retrying until Spark Connect answers; None when the executor
        is stopped first."""
        return self.renew(None)

    def renew(
        self, broken: SparkSession | None, cancel: threading.Event | None = None
    ) -> SparkSession | None:
        """The session to go on with after ``broken`` failed: a new one if ``broken`` is still the
        current session, else the one that already replaced it. Blocks until a session is ready;
        None when the executor stops or ``cancel`` is set first."""

        def cancelled() -> bool:
            return self._stop.is_set() or (cancel is not None and cancel.is_set())

        with self._condition:
            while True:
                if cancelled():
                    return None
                if self._session is not None and self._session is not broken:
                    return self._session
                if not self._building:
                    self._building = True
                    old = self._session
                    break
                self._condition.wait(0.2)
        session: SparkSession | None = None
        try:
            if old is not None:
                log.warning("the Spark Connect session to %s is lost; building a new one", self.remote)
            session = self._build(cancelled)
            return session
        finally:
            with self._condition:
                self._building = False
                if session is not None:
                    self._session = session
                    self.generation += 1
                self._condition.notify_all()
            if session is not None and old is not None:
                _stop_quietly(old)
            if session is not None:
                for listener in self._listeners:
                    listener()

    def _build(self, cancelled: Callable[[], bool]) -> SparkSession | None:
        started = warned = time.monotonic()
        retry = self._retry.start()
        while not cancelled():
            try:
                session = self._connect(self.remote)
            except Exception as exc:
                now = time.monotonic()
                level = (
                    logging.WARNING if now - warned >= _WARN_EVERY_S or warned == started else logging.DEBUG
                )
                if level == logging.WARNING:
                    warned = now
                delay = retry.next_delay()
                assert delay is not None  # the policy has neither a deadline nor an attempt limit
                log.log(
                    level,
                    "Spark Connect at %s is not usable yet (%s); trying again in %.1fs",
                    self.remote,
                    exc,
                    delay,
                )
                self._stop.wait(delay)
                continue
            log.info("Spark Connect session to %s ready in %.1fs", self.remote, time.monotonic() - started)
            return session
        return None

    def healthy(self, session: SparkSession, timeout: float = 20.0) -> bool:
        """Whether ``session`` still runs a trivial job within ``timeout`` seconds."""
        answered = threading.Event()
        works: list[bool] = []

        def probe() -> None:
            try:
                works.append(session.range(1).count() == 1)
            except Exception:
                log.debug("the Spark Connect session probe failed", exc_info=True)
                works.append(False)
            finally:
                answered.set()

        threading.Thread(target=probe, name="spark-probe", daemon=True).start()
        return answered.wait(timeout) and all(works)

    def close(self) -> None:
        """Ends the current session (on executor shutdown)."""
        with self._condition:
            session, self._session = self._session, None
        if session is not None:
            _stop_quietly(session)
