"""sluiceway.common.tracing and the executor's batch spans, sent to an OTLP collector of the tests'
own: the endpoint's forms and sources, nothing made while tracing is off, and the spans of a batch
that worked, failed, or was idle."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from sluiceway.common import tracing
from sluiceway_executor.batch_traces import BatchTrace, traced_batch
from sluiceway_executor.pipelines.observed import Tally
from sluiceway_executor.pipelines.pipeline import BatchOutcome
from sluiceway_executor.pipelines.spec import TaskSpec
from tests.otlp_receiver import OtlpReceiver, otlp_receiver

SPEC = TaskSpec(
    name="connectors/orders/tasks/2",
    connector="orders",
    task_index=2,
    generation=1,
    connector_config={},
    task_config={},
    paused=False,
    task_count=3,
)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("", ""),
        ("  ", ""),
        (" http://collector:4317 ", "http://collector:4317"),
        ("https://c.example", "https://c.example"),
    ],
)
def test_endpoint_forms(given: str, expected: str) -> None:
    assert tracing.validate_endpoint(given) == expected


@pytest.mark.parametrize("given", ["collector:4317", "grpc://collector:4317", "http://", "http://c:port"])
def test_endpoints_that_name_no_collector_are_refused(given: str) -> None:
    with pytest.raises(tracing.TracingEndpointError):
        tracing.validate_endpoint(given)


def test_the_worker_key_wins_over_opentelemetrys_variables() -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://general:4317"}
    assert tracing.otlp_endpoint("http://ours:4317", environ) == "http://ours:4317"
    assert tracing.otlp_endpoint("", environ) == "http://general:4317"
    environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = "http://traces:4317"
    assert tracing.otlp_endpoint(" ", environ) == "http://traces:4317"
    assert tracing.otlp_endpoint("", {}) == ""
    with pytest.raises(tracing.TracingEndpointError, match=r"^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "):
        tracing.otlp_endpoint("", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "collector:4317"})


def test_off_until_started_and_nothing_is_made() -> None:
    assert not tracing.tracing_on()
    assert tracing.start_span("anything") is None
    assert tracing.inject_context() == ()
    # One shared do-nothing object: no allocation per batch.
    assert traced_batch(SPEC, 1) is traced_batch(SPEC, 2)
    with traced_batch(SPEC, 1) as trace:
        trace.ran(BatchOutcome(records=5))
        trace.committed()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    with otlp_receiver() as started:
        tracing.start_tracing(started.endpoint, service="unit", instance="here", version="0")
        try:
            yield started
        finally:
            tracing.stop_tracing()


def test_a_batch_that_worked_is_a_span_with_its_commit(receiver: OtlpReceiver) -> None:
    trace = traced_batch(SPEC, 7)
    assert isinstance(trace, BatchTrace)
    with trace:
        trace.ran(
            BatchOutcome(
                records=None,
                offsets=[({"p": 1}, {"o": 9})],
                read=Tally(10),
                written=Tally(10, 480),
                steps={"write": 0.25},
            )
        )
        trace.committed()
    with traced_batch(SPEC, 8) as idle:  # nothing read, nothing to commit: no span
        idle.ran(BatchOutcome(records=0))
        idle.committed()
    tracing.stop_tracing()  # sends what waits
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"sluiceway.batch", "sluiceway.batch.commit"}
    batch, commit = spans["sluiceway.batch"], spans["sluiceway.batch.commit"]
    assert (batch.service, batch.instance) == ("unit", "here")
    assert batch.attributes == {
        "sluiceway.connector": "orders",
        "sluiceway.task": 2,
        "sluiceway.batch.id": 7,
        "sluiceway.batch.records_read": 10,
        "sluiceway.batch.records_written": 10,
        "sluiceway.batch.bytes_written": 480,
        "sluiceway.batch.offsets": 1,
        "sluiceway.batch.write_seconds": 0.25,
        "sluiceway.batch.committed": True,
    }
    assert commit.parent_id == batch.span_id and commit.trace_id == batch.trace_id
    assert batch.start_ns <= commit.start_ns <= commit.end_ns <= batch.end_ns


def test_a_failed_batch_is_a_failed_span(receiver: OtlpReceiver) -> None:
    with pytest.raises(RuntimeError), traced_batch(SPEC, 3):
        raise RuntimeError("Spark went away")
    tracing.stop_tracing()
    [span] = receiver.spans()
    assert span.name == "sluiceway.batch"
    assert span.status_code == 2
    assert span.status_message == "RuntimeError: Spark went away"
    assert span.attributes["sluiceway.batch.id"] == 3


def test_a_span_carries_on_a_callers_trace(receiver: OtlpReceiver) -> None:
    parent = tracing.start_span("caller")
    assert parent is not None
    with tracing.current(parent):
        metadata = tracing.inject_context()
    assert [key for key, _ in metadata] == ["traceparent"]
    child = tracing.start_span("callee", metadata=(("other", "x"), *metadata))
    assert child is not None
    tracing.end_span(child)
    tracing.end_span(parent)
    tracing.stop_tracing()
    spans = {span.name: span for span in receiver.spans()}
    assert spans["callee"].parent_id == spans["caller"].span_id
    assert spans["callee"].trace_id == spans["caller"].trace_id


def test_a_control_plane_refuses_a_bad_opentelemetry_variable_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sluiceway_server.config import WorkerConfig
    from sluiceway_server.server import start_control_plane

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317")
    config = WorkerConfig.load(env={})
    with pytest.raises(RuntimeError, match=r"^cannot trace: OTEL_EXPORTER_OTLP_ENDPOINT: expected http://"):
        asyncio.run(start_control_plane(config))
    assert not tracing.tracing_on()
