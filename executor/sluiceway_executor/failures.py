"""Which failures of a task are the infrastructure's and which are the task's own.

A task fails for one of three reasons, and each is handled differently by its runner:

- ``SPARK_SESSION``: the executor's Spark Connect session is gone (the server was restarted, killed,
  or released the session; the channel broke). The session is replaced and the task goes on from its
  committed offsets; no restart attempt is counted and the task is never FAILED for it.
- ``INFRASTRUCTURE``: something the task depends on is unreachable for now (a Kafka broker, a
  timeout on the way to it). The task is started again after a pause, without counting an attempt.
- ``TASK``: an error of the connector or of the data. The task shows RESTARTING and runs again
  when its automatic-restart policy says so; it becomes FAILED only once the policy gives up (or
  when restarts are off).

The Spark Connect client reports a lost session in several ways: gRPC UNAVAILABLE once its own
retries give up, the server's INVALID_HANDLE error classes, a client-side "no active session"
error, or an assertion about a changed server-side session id. Those are recognised from the
exception; anything else raised by a Spark call is judged by probing the session (see
``SparkSessions.healthy``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Final

from confluent_kafka import KafkaException

from sluiceway.common.kafka_errors import error_of, is_transient

__all__ = ["FailureKind", "classify", "is_kafka_unreachable", "is_spark_session_lost"]


class FailureKind(enum.Enum):
    SPARK_SESSION = "spark-session"
    INFRASTRUCTURE = "infrastructure"
    TASK = "task"


# Text the Spark Connect client puts in the errors it raises when the session or its server is gone.
_SESSION_LOST_MARKERS: Final = (
    "INVALID_HANDLE.SESSION_NOT_FOUND",
    "INVALID_HANDLE.SESSION_CHANGED",
    "INVALID_HANDLE.SESSION_CLOSED",
    "INVALID_HANDLE.OPERATION_NOT_FOUND",
    "INVALID_HANDLE.OPERATION_ABANDONED",
    "INVALID_CURSOR.DISCONNECTED",
    "RESPONSE_ALREADY_RECEIVED",
    "NO_ACTIVE_SESSION",
    "server side session identifier",
    "StatusCode.UNAVAILABLE",
    "failed to connect to all addresses",
    "Socket closed",
)

# Kafka error names that say a broker could not be reached, as they appear in the text of an error a
# Python data source raised inside Spark (the KafkaException itself stays on the Spark side).
_KAFKA_UNREACHABLE_MARKERS: Final = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_MSG_TIMED_OUT")


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception and its causes and contexts, outermost first, each once."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not other for other in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def is_spark_session_lost(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the Spark Connect session or server is gone."""
    for item in _chain(exc):
        text = f"{type(item).__name__}: {item}"
        if any(marker in text for marker in _SESSION_LOST_MARKERS):
            return True
    return False


def is_kafka_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is a Kafka error that passes by itself: a broker down or
    slow to answer, raised here or inside a Spark job."""
    for item in _chain(exc):
        if isinstance(item, KafkaException):
            if is_transient(error_of(item)):
                return True
            continue
        text = str(item)
        if "KafkaException" in text and any(marker in text for marker in _KAFKA_UNREACHABLE_MARKERS):
            return True
    return False


# Modules whose exceptions come from a call to Spark Connect (its client or the gRPC under it).
_SPARK_CLIENT_MODULES: Final = ("pyspark", "grpc", "py4j")


def _raised_by_spark(exc: BaseException) -> bool:
    return any(type(item).__module__.startswith(_SPARK_CLIENT_MODULES) for item in _chain(exc))


def classify(exc: BaseException, session_healthy: Callable[[], bool]) -> FailureKind:
    """What kind of failure ``exc`` is. ``session_healthy`` probes the Spark Connect session; it is
    called only for an error Spark's client raised that does not say by itself (an error raised by
    the connector's own code is the task's without a probe)."""
    if is_spark_session_lost(exc):
        return FailureKind.SPARK_SESSION
    if is_kafka_unreachable(exc):
        return FailureKind.INFRASTRUCTURE
    if _raised_by_spark(exc) and not session_healthy():
        return FailureKind.SPARK_SESSION
    return FailureKind.TASK
