"""errors.* read for a task, and what a failed record becomes: its dead letter (Kafka Connect's
context headers when enabled) and its error log line (never its contents)."""

from __future__ import annotations

import logging

import pytest

from sluiceway.connect import ConnectException
from sluiceway_executor.pipelines.error_handling import (
    ErrorHandling,
    FailedRecord,
    first_failure_message,
    log_failures,
    log_source_failures,
)
from sluiceway_executor.pipelines.pipeline import ProducedRecord

FAILED = FailedRecord(
    topic="orders",
    partition=2,
    offset=17,
    timestamp_ms=1_700_000_000_000,
    key=b"k17",
    value=b"not json",
    headers=(("origin", b"test"), ("empty", None)),
    stage="VALUE_CONVERTER",
    class_name="org.apache.kafka.connect.json.JsonConverter",
    exception="sluiceway.connect.DataException",
    message="invalid JSON",
)


def test_defaults_are_kafka_connects() -> None:
    assert ErrorHandling.of({}) == ErrorHandling(
        tolerant=False,
        log_enable=False,
        log_include_messages=False,
        dlq_topic="",
        dlq_replication_factor=3,
        dlq_context_headers=False,
    )


def test_settings_are_read() -> None:
    handling = ErrorHandling.of(
        {
            "errors.tolerance": "all",
            "errors.log.enable": "TRUE",
            "errors.log.include.messages": "true",
            "errors.deadletterqueue.topic.name": " orders-dlq ",
            "errors.deadletterqueue.topic.replication.factor": "-1",
            "errors.deadletterqueue.context.headers.enable": "true",
        }
    )
    assert handling.tolerant and handling.log_enable and handling.log_include_messages
    assert (handling.dlq_topic, handling.dlq_replication_factor, handling.dlq_context_headers) == (
        "orders-dlq",
        -1,
        True,
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("errors.tolerance", "some", "errors.tolerance must be none or all"),
        ("errors.deadletterqueue.topic.replication.factor", "three", "must be a whole number"),
    ],
)
def test_a_bad_setting_fails_the_task_naming_the_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConnectException, match=message):
        ErrorHandling.of({key: value})


def test_a_dead_letter_is_the_record_as_read_plus_the_context_headers_when_enabled() -> None:
    plain = FAILED.dead_letter(ErrorHandling(tolerant=True, dlq_topic="dlq"), "lake", 3)
    assert plain == ProducedRecord(
        "dlq", b"k17", b"not json", (("origin", b"test"), ("empty", None)), 1_700_000_000_000
    )
    handling = ErrorHandling(tolerant=True, dlq_topic="dlq", dlq_context_headers=True)
    headers = dict(FAILED.dead_letter(handling, "lake", 3).headers)
    assert headers == {
        "origin": b"test",
        "empty": None,
        "__connect.errors.topic": b"orders",
        "__connect.errors.partition": b"2",
        "__connect.errors.offset": b"17",
        "__connect.errors.connector.name": b"lake",
        "__connect.errors.task.id": b"3",
        "__connect.errors.stage": b"VALUE_CONVERTER",
        "__connect.errors.class.name": b"org.apache.kafka.connect.json.JsonConverter",
        "__connect.errors.exception.class.name": b"sluiceway.connect.DataException",
        "__connect.errors.exception.message": b"invalid JSON",
    }


def test_the_error_log_names_the_record_only_when_asked_and_never_its_contents(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    log_failures(ErrorHandling(tolerant=True), "t", [FAILED])
    assert caplog.records == []  # errors.log.enable is off
    log_failures(ErrorHandling(tolerant=True, log_enable=True), "t", [FAILED])
    log_failures(ErrorHandling(tolerant=True, log_enable=True, log_include_messages=True), "t", [FAILED])
    plain, detailed = (r.getMessage() for r in caplog.records)
    assert "VALUE_CONVERTER" in plain and "invalid JSON" in plain and "orders-2@17" not in plain
    assert "orders-2@17" in detailed and "1700000000000" in detailed
    for text in (plain, detailed):
        assert "not json" not in text and "k17" not in text and "test" not in text


def test_source_failures_are_logged_by_stage(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    error = {"stage": "TRANSFORMATION", "class_name": "x.Cast", "message": "the value is no int32"}
    log_source_failures(ErrorHandling(tolerant=True, log_enable=True), "t", [error])
    assert [r.getMessage() for r in caplog.records] == [
        "task t: a record failed at stage TRANSFORMATION (x.Cast): the value is no int32; skipped"
    ]


def test_a_task_without_tolerance_fails_naming_the_record_and_the_way_out() -> None:
    message = first_failure_message(FAILED)
    assert message.startswith(
        "record orders-2@17 failed at stage VALUE_CONVERTER (org.apache.kafka.connect.json.JsonConverter): "
        "invalid JSON."
    )
    assert "errors.tolerance=all" in message
