"""Which Kafka client errors pass by themselves: the transient test of the retry loops of the
control plane and the executors (offset commits and fencing, topic creation, the Admin API calls of
offset changes, the stores' end-offset reads), which hand `transient_exception` to their
`sluiceway.common.retry.RetryPolicy`.

Two kinds of loop ask librdkafka's retriable flag alone, on purpose (`flagged_retriable`,
`retriable_exception`): the leader's ``commit_transaction`` retry (storage/leader_writer.py), where
that flag is librdkafka's contract for calling commit again (any other error needs an abort or is
fatal, and calling commit again would not help), and the consumers of the sink planner and of the
reader inside Spark, where an error the consumer reports without the flag ends the read (the
consumer recovers from the others by itself)."""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError, KafkaException

__all__ = [
    "TRANSIENT_CODES",
    "error_of",
    "flagged_retriable",
    "is_transient",
    "retriable_exception",
    "transient_exception",
]

# Errors librdkafka does not always flag retriable that go away on their own: a connection the
# broker dropped, a request that timed out, a coordinator or partition leader moving or loading, a
# transaction of the same producer still ending.
TRANSIENT_CODES: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.CONCURRENT_TRANSACTIONS,
        KafkaError.NOT_CONTROLLER,
        KafkaError.LEADER_NOT_AVAILABLE,
    }
)


def error_of(exc: KafkaException) -> KafkaError | None:
    """The KafkaError a KafkaException carries, if any."""
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


def is_transient(error: object) -> bool:
    """Whether trying the same call again may succeed: the client says so, or the code is one of
    TRANSIENT_CODES."""
    return isinstance(error, KafkaError) and (bool(error.retriable()) or error.code() in TRANSIENT_CODES)


def transient_exception(exc: BaseException) -> bool:
    """`is_transient` for what a Kafka call raised: a KafkaException whose error passes by itself,
    or a TimeoutError from waiting on the future of an Admin API call (as the client's own
    _TIMED_OUT would be)."""
    if isinstance(exc, TimeoutError):
        return True
    return isinstance(exc, KafkaException) and is_transient(error_of(exc))


def flagged_retriable(error: object) -> bool:
    """Whether librdkafka itself flags the error retriable (and not fatal); see the module doc for
    the places that ask this rather than `is_transient`."""
    return isinstance(error, KafkaError) and bool(error.retriable()) and not error.fatal()


def retriable_exception(exc: BaseException) -> bool:
    """`flagged_retriable` for what a Kafka call raised."""
    return isinstance(exc, KafkaException) and flagged_retriable(error_of(exc))
