"""Which Kafka client errors pass by themselves, for the retry loops of the control plane and the
executors (offset commits and fencing, topic creation, the Admin API calls of offset changes, the
stores' end-offset reads). Two places ask the error alone on purpose: the leader's
``commit_transaction`` retry (storage/leader_writer.py), where librdkafka's retriable flag is the
contract for calling commit again, and the consumers of the sink planner and of the reader inside
Spark, where an error the consumer reports but does not flag retriable ends the read (the consumer
recovers from the others by itself)."""

from __future__ import annotations

from typing import Final

from confluent_kafka import KafkaError, KafkaException

__all__ = ["TRANSIENT_CODES", "error_of", "is_transient"]

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
