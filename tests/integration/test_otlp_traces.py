"""Traces sent to an OTLP collector of the tests' own by real processes (issue 35): a mutation
sent to a follower is one trace over both replicas (the follower's span is the parent of the
leader's), a refused one is marked failed with its gRPC code, and each batch an executor runs for
a real DataGenSource pipeline is a span with the connector and task and a child span for its commit."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.client import SluicewayClient
from sluiceway.errors import SluicewayError
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.fault.fault_helpers import topic_records
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor
from tests.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.integration

SERVER_KIND = 2  # SPAN_KIND_SERVER in OTLP
RECORDS = 2000


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    # The children inherit it: spans leave within a fifth of a second instead of five.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
    with otlp_receiver() as started:
        yield started


@pytest.fixture
def traced(
    broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, receiver: OtlpReceiver, tmp_path: Path
) -> Iterator[tuple[PipelineStack, ControlPlaneProcess]]:
    settings = {**FAST_EXECUTOR_SESSION, "tracing.otlp.endpoint": receiver.endpoint}
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=settings).start()
    follower = ControlPlaneProcess(broker, plane.suffix, settings=settings)
    own = tmp_path / "executor.properties"
    own.write_text(f"tracing.otlp.endpoint={receiver.endpoint}\n")
    try:
        follower.start(lead=False)
        stack = attach_executor(plane, spark_connect, "traced", "--config", str(own))
    except BaseException:
        follower.stop()
        plane.stop()
        raise
    try:
        yield stack, follower
    finally:
        stack.close()
        follower.stop()
        plane.stop()


def test_a_forwarded_mutation_is_one_trace_and_each_batch_a_span(
    traced: tuple[PipelineStack, ControlPlaneProcess],
    receiver: OtlpReceiver,
    broker: EmbeddedBroker,
    unique: str,
) -> None:
    stack, follower = traced
    leader_id = stack.plane.server_info().this_replica.id
    follower_id = follower.server_info().this_replica.id
    name, topic = f"gen-{unique}", f"traced-{unique}"
    with SluicewayClient(follower.address, timeout=30) as through_follower:
        through_follower.create_connector(
            name,
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": "1",
                "max.records": str(RECORDS),
                "batch.max.records": "1000",
            },
        )
        with pytest.raises(SluicewayError) as refused:
            through_follower.create_connector(f"bad-{unique}", {"connector.class": "NoSuchConnector"})
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT

    def created(span: ReceivedSpan) -> bool:
        return (
            span.name == "sluiceway.api.v1.ConnectorService/CreateConnector"
            and span.attributes.get("sluiceway.connector") == name
        )

    spans = receiver.wait_for(
        lambda s: created(s) and s.attributes.get("sluiceway.replica") == leader_id, "the leader"
    )
    on_leader = spans[0]
    [on_follower] = receiver.wait_for(
        lambda s: created(s) and s.span_id == on_leader.parent_id, "the follower"
    )
    # One trace: the follower answered the client and forwarded; the leader did the work.
    assert on_follower.trace_id == on_leader.trace_id
    assert on_follower.attributes["sluiceway.replica"] == follower_id
    assert on_leader.attributes["sluiceway.forwarded_by"] == follower_id
    for span in (on_leader, on_follower):
        assert span.service == "sluiceway-control-plane"
        assert span.kind == SERVER_KIND
        assert span.attributes["rpc.system"] == "grpc"
        assert span.attributes["rpc.grpc.status_code"] == 0
        assert span.status_code != 2
    assert on_leader.instance == leader_id and on_follower.instance == follower_id

    # The refused mutation: failed on both replicas, with the code the client saw.
    failed = receiver.wait_for(
        lambda s: (
            s.attributes.get("sluiceway.connector") == f"bad-{unique}"
            and s.attributes.get("sluiceway.replica") == leader_id
        ),
        "the refused call",
    )
    assert failed[0].status_code == 2
    assert failed[0].attributes["rpc.grpc.status_code"] == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert failed[0].status_message.startswith("INVALID_ARGUMENT")

    # Every record lands, and the batches that carried them are spans of the executor.
    stack.wait_for(lambda: topic_records(broker.bootstrap_servers, topic) == RECORDS, "every record", 240)

    def batch(span: ReceivedSpan) -> bool:
        return span.name == "sluiceway.batch" and span.attributes.get("sluiceway.connector") == name

    def written(found: list[ReceivedSpan]) -> int:
        return sum(int(str(s.attributes.get("sluiceway.batch.records_written", 0))) for s in found)

    stack.wait_for(
        lambda: written([s for s in receiver.spans() if batch(s)]) == RECORDS, "the batches' spans"
    )
    batches = [s for s in receiver.spans() if batch(s)]
    assert {s.service for s in batches} == {"sluiceway-executor"}
    assert {s.attributes["sluiceway.task"] for s in batches} == {0}
    assert all(s.attributes["sluiceway.batch.committed"] is True for s in batches)
    assert len({s.attributes["sluiceway.batch.id"] for s in batches}) == len(batches)
    commits = {s.parent_id: s for s in receiver.spans() if s.name == "sluiceway.batch.commit"}
    for span in batches:
        commit = commits[span.span_id]  # each batch's commit is its child, inside its time
        assert commit.trace_id == span.trace_id
        assert span.start_ns <= commit.start_ns <= commit.end_ns <= span.end_ns
    # Idle batches after the last record leave no span.
    assert all(int(str(s.attributes["sluiceway.batch.records_written"])) > 0 for s in batches)
