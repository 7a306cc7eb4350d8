"""Telling a lost Spark Connect session and an unreachable broker from the task's own errors."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from sluiceway_executor.failures import FailureKind, classify, is_kafka_unreachable, is_spark_session_lost


def _raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise outer from inner
    except BaseException as caught:
        return caught


def test_the_spark_connect_clients_session_errors_are_recognised() -> None:
    for text in (
        "[INVALID_HANDLE.SESSION_NOT_FOUND] The handle 1234 is invalid. Session not found.",
        "[RESPONSE_ALREADY_RECEIVED] The response was already received (INVALID_HANDLE.OPERATION_NOT_FOUND)",
        "[NO_ACTIVE_SESSION] No active Spark session found.",
        "Received incorrect server side session identifier for request. Please create a new Spark Session",
        "<_MultiThreadedRendezvous of RPC that terminated with: status = StatusCode.UNAVAILABLE",
    ):
        assert is_spark_session_lost(RuntimeError(text)), text
        assert classify(RuntimeError(text), lambda: True) is FailureKind.SPARK_SESSION


def test_a_cause_deep_in_the_chain_counts() -> None:
    wrapped = _raised_from(ValueError("the batch failed"), RuntimeError("[NO_ACTIVE_SESSION] gone"))
    assert is_spark_session_lost(wrapped)


def test_an_unreachable_broker_is_infrastructure_here_or_inside_spark() -> None:
    down = KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN, "all brokers down"))
    assert is_kafka_unreachable(down)
    assert classify(down, lambda: True) is FailureKind.INFRASTRUCTURE
    in_spark = RuntimeError(
        'PythonException: cimpl.KafkaException: KafkaError{code=_TRANSPORT,val=-195,str="disconnected"}'
    )
    assert classify(in_spark, lambda: True) is FailureKind.INFRASTRUCTURE
    # A Kafka error that will not pass by itself is the task's.
    denied = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied"))
    assert not is_kafka_unreachable(denied)
    assert classify(denied, lambda: True) is FailureKind.TASK


def test_other_errors_from_spark_are_the_tasks_unless_the_session_probe_fails() -> None:
    probes: list[bool] = []

    def healthy() -> bool:
        probes.append(True)
        return True

    odd = SparkConnectGrpcException("something odd")
    assert classify(odd, healthy) is FailureKind.TASK
    assert probes == [True]
    assert classify(odd, lambda: False) is FailureKind.SPARK_SESSION
    # Raised by Spark deep in the chain of the connector's own error: probed too.
    assert classify(_raised_from(ValueError("read failed"), odd), lambda: False) is FailureKind.SPARK_SESSION


def test_the_connectors_own_errors_are_the_tasks_without_a_probe() -> None:
    def probe() -> bool:
        raise AssertionError("no probe for an error that did not come from Spark")

    assert classify(ValueError("bad record"), probe) is FailureKind.TASK


def test_a_cyclic_chain_ends() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert not is_spark_session_lost(first)
