"""Authentication, roles, the audit log and the closed executor channel, over the real socket of
a control plane started with a tokens file (and, in test_security_tls.py, with TLS)."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from sluiceway.api.v1 import (
    cluster_pb2,
    common_pb2,
    connectors_pb2,
    connectors_pb2_grpc,
    executor_pb2,
    executor_pb2_grpc,
    offsets_pb2,
    plugins_pb2,
    topics_pb2,
)
from sluiceway.client import SluicewayClient, State
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import NotFoundError, PermissionDeniedError, SluicewayError
from sluiceway_server.embedded import EmbeddedBroker
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import failure, read_topic, wait_until
from tests.integration.executor_peer import ExecutorPeer, wait_for

ADMIN = "admin-token-for-tests-0001"
OPERATOR = "operator-token-for-tests-0001"
VIEWER = "viewer-token-for-tests-0001"
EXECUTOR_A = "executor-a-token-for-tests-01"
EXECUTOR_B = "executor-b-token-for-tests-01"
REPLICA = "replica-token-for-tests-00001"
WORKER_SECRET = "worker-sasl-secret-do-not-send"
TOKENS = f"""# role token principal
admin     {ADMIN}       alice
operator  {OPERATOR}    olga
viewer    {VIEWER}      victor
executor  {EXECUTOR_A}  exec-a
executor  {EXECUTOR_B}  exec-b
replica   {REPLICA}     replicas
"""
SERVICES = (connectors_pb2, plugins_pb2, offsets_pb2, topics_pb2, cluster_pb2, executor_pb2)


def auth_settings(directory: Path) -> dict[str, str]:
    tokens = directory / "tokens.txt"
    tokens.write_text(TOKENS)
    return {
        "auth.tokens.file": str(tokens),
        "replica.auth.token": REPLICA,
        "audit.log.file": str(directory / "audit.log"),
        # Secrets of the worker's own Kafka clients, which no executor may receive.
        "producer.sasl.password": WORKER_SECRET,
        "admin.sasl.password": WORKER_SECRET,
    }


@pytest.fixture(scope="module")
def secured(
    broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlaneProcess]:
    directory = tmp_path_factory.mktemp("auth")
    plane = ControlPlaneProcess(
        broker,
        uuid.uuid4().hex[:8],
        settings=auth_settings(directory),
        security=TransportSecurity(token=ADMIN),
    ).start()
    yield plane
    plane.stop()


def client_as(plane: ControlPlaneProcess, token: str | None) -> SluicewayClient:
    return SluicewayClient(plane.address, timeout=20, security=TransportSecurity(token=token))


def audit_lines(plane: ControlPlaneProcess) -> list[dict[str, Any]]:
    path = Path(plane.settings["audit.log.file"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def every_method() -> list[tuple[str, Any, bool, bool]]:
    """(path, request class, request streaming, response streaming) of every RPC we serve."""
    methods = []
    for module in SERVICES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                methods.append(
                    (
                        f"/{service.full_name}/{method.name}",
                        message_factory.GetMessageClass(method.input_type),
                        method.client_streaming,
                        method.server_streaming,
                    )
                )
    return methods


def call_raw(
    channel: grpc.Channel, method: str, request: Any, streams: tuple[bool, bool], token: str | None
) -> None:
    """One call with an empty request; raises grpc.RpcError as the server answers."""
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    serialize = type(request).SerializeToString
    if streams == (False, False):
        channel.unary_unary(method, request_serializer=serialize)(request, timeout=10, metadata=metadata)
    elif streams == (False, True):
        for _ in channel.unary_stream(method, request_serializer=serialize)(
            request, timeout=3, metadata=metadata
        ):
            break
    else:
        responses: Iterator[Any] = channel.stream_stream(method, request_serializer=serialize)(
            iter([request]), timeout=3, metadata=metadata
        )
        for _ in responses:
            break


def wrong_token(method: str) -> str:
    from sluiceway_server.security.access import ADMIN_CALLS, ATTACH, OPERATOR_CALLS

    if method == ATTACH:
        return ADMIN
    if method in ADMIN_CALLS:
        return OPERATOR
    if method in OPERATOR_CALLS:
        return VIEWER
    return EXECUTOR_A


def right_token(method: str) -> str:
    from sluiceway_server.security.access import ADMIN_CALLS, ATTACH, OPERATOR_CALLS

    if method == ATTACH:
        return EXECUTOR_A
    if method in ADMIN_CALLS:
        return ADMIN
    if method in OPERATOR_CALLS:
        return OPERATOR
    return VIEWER


def test_every_rpc_needs_credentials_and_the_right_role(secured: ControlPlaneProcess) -> None:
    methods = every_method()
    assert len(methods) >= 25
    with grpc.insecure_channel(secured.address) as channel:
        for method, request_class, *streams in methods:
            call = functools.partial(call_raw, channel, method, request_class(), (streams[0], streams[1]))
            anonymous = failure(functools.partial(call, None))
            assert (anonymous.code, anonymous.reason) == (
                grpc.StatusCode.UNAUTHENTICATED,
                "UNAUTHENTICATED",
            ), method
            forged = failure(functools.partial(call, "not-a-token-at-all-0000"))
            assert forged.code == grpc.StatusCode.UNAUTHENTICATED, method
            denied = failure(functools.partial(call, wrong_token(method)))
            assert (denied.code, denied.reason) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AUTHORIZED"), (
                method
            )
            assert denied.metadata["method"] == method
            # With the right role the call reaches its servicer: an empty request is then refused
            # for what it lacks, never for who sent it.
            code = code_of(functools.partial(call, right_token(method)))
            assert code not in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED), method


def code_of(call: Callable[[], None]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        return code
    return grpc.StatusCode.OK


def test_each_role_does_its_work_and_every_mutation_is_audited_once(
    secured: ControlPlaneProcess, unique: str
) -> None:
    name = f"audited-{unique}"
    topic = f"audited-{unique}"
    before = len(audit_lines(secured))
    admin, operator, viewer = (client_as(secured, t) for t in (ADMIN, OPERATOR, VIEWER))
    try:
        secret_value = f"jdbc-secret-{unique}"
        created = admin.create_connector(
            name,
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": "1",
                "connection.password": secret_value,
            },
            initial_state="STOPPED",
        )
        assert created.name == name
        assert viewer.get_connector(name).config["connection.password"] == "[hidden]"
        assert [c.name for c in viewer.list_connectors()] and viewer.connector_status(name)
        viewer.list_plugins()
        viewer.server_info()
        viewer.get_offsets(name)
        with pytest.raises(PermissionDeniedError):
            viewer.pause_connector(name)
        operator.reset_offsets(name)
        operator.resume_connector(name)
        operator.pause_connector(name)
        operator.stop_connector(name)
        with pytest.raises(PermissionDeniedError):
            operator.delete_connector(name)
        admin.patch_connector_config(name, {"max.records": "10"})
        admin.delete_connector(name)
    finally:
        for client in (admin, operator, viewer):
            client.close()

    lines = [line for line in audit_lines(secured)[before:] if line["connector"] == name]
    made = [(line["principal"], line["method"], line["outcome"]) for line in lines]
    assert made == [
        ("alice", "CreateConnector", "OK"),
        ("victor", "PauseConnector", "PERMISSION_DENIED"),
        ("olga", "ResetConnectorOffsets", "OK"),
        ("olga", "ResumeConnector", "OK"),
        ("olga", "PauseConnector", "OK"),
        ("olga", "StopConnector", "OK"),
        ("olga", "DeleteConnector", "PERMISSION_DENIED"),
        ("alice", "PatchConnectorConfig", "OK"),
        ("alice", "DeleteConnector", "OK"),
    ]
    text = Path(secured.settings["audit.log.file"]).read_text()
    assert secret_value not in text and "DataGenSource" not in text


def test_with_authentication_file_connectors_need_allowed_paths(
    secured: ControlPlaneProcess, broker: EmbeddedBroker, unique: str
) -> None:
    # The plane authenticates callers and names no connector.allowed.paths: even an admin may not
    # point a file connector anywhere on the machines that run it.
    name = f"file-{unique}"
    before = len(audit_lines(secured))
    with client_as(secured, ADMIN) as admin:
        with pytest.raises(SluicewayError) as caught:
            admin.create_connector(
                name, {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out.txt"}
            )
        error = caught.value
        assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG")
        assert [v.field for v in error.field_violations] == ['connector.config["file"]']
        description = error.field_violations[0].description
        assert "authentication is on (auth.tokens.file)" in description
        assert "set connector.allowed.paths in the worker config" in description
        with pytest.raises(NotFoundError):
            admin.get_connector(name)
    config_keys = [key for key, _ in read_topic(broker.bootstrap_servers, secured.topics["config"])]
    assert not [key for key in config_keys if key and key.endswith(name)]
    made = [
        (line["method"], line["outcome"])
        for line in audit_lines(secured)[before:]
        if line["connector"] == name
    ]
    assert made == [("CreateConnector", "INVALID_ARGUMENT")]


def attach(
    plane: ControlPlaneProcess, token: str | None, executor_id: str
) -> tuple[grpc.Channel, Iterator[executor_pb2.ControllerMessage]]:
    channel = grpc.insecure_channel(plane.address)
    hello = executor_pb2.ExecutorMessage(hello=executor_pb2.Hello(executor_id=executor_id, host="test"))
    metadata = (("authorization", f"Bearer {token}"),) if token else ()

    def requests() -> Iterator[executor_pb2.ExecutorMessage]:
        yield hello
        # Keeps the stream open until the test closes the channel.
        import threading

        threading.Event().wait(30)

    stream = executor_pb2_grpc.ExecutorServiceStub(channel).Attach(requests(), metadata=metadata, timeout=30)
    return channel, stream


def test_only_executors_attach_an_id_stays_with_its_principal_and_welcome_holds_no_secret(
    secured: ControlPlaneProcess, unique: str
) -> None:
    executor_id = f"exec-{unique}"
    for token, code in ((None, grpc.StatusCode.UNAUTHENTICATED), (ADMIN, grpc.StatusCode.PERMISSION_DENIED)):
        channel, stream = attach(secured, token, executor_id)
        with channel:
            assert failure(functools.partial(next, stream)).code == code
    channel, stream = attach(secured, EXECUTOR_A, executor_id)
    with channel:
        first = next(stream)
        assert first.WhichOneof("kind") == "welcome"
        welcome = first.welcome
        assert welcome.worker_config["bootstrap.servers"] == secured.broker.bootstrap_servers
        assert not {"producer.sasl.password", "admin.sasl.password", "replica.auth.token"} & set(
            welcome.worker_config
        )
        assert WORKER_SECRET.encode() not in first.SerializeToString()
        assert REPLICA.encode() not in first.SerializeToString()
        # Another executor principal cannot take this id over while it is held.
        other, taken = attach(secured, EXECUTOR_B, executor_id)
        with other:
            refused = failure(lambda: next(taken))
            assert (refused.code, refused.reason) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AUTHORIZED")
        info = client_as(secured, VIEWER)
        try:
            assert executor_id in [e.id for e in info.server_info().executors]
        finally:
            info.close()


def test_after_the_leader_is_killed_an_executor_id_stays_with_its_principal(
    broker: EmbeddedBroker, tmp_path: Path, unique: str
) -> None:
    """The binding of an executor id to its principal outlives the leader that saw it attach: the
    next leader reads it from the task statuses and, while it waits for that executor to come back,
    refuses the id to any other principal."""
    # A long executor session: the new leader's wait for returning executors lasts that long, and
    # the impostor must arrive within it.
    settings = {**auth_settings(tmp_path), "executor.session.timeout.ms": "60000"}
    security = TransportSecurity(token=ADMIN)
    leader = ControlPlaneProcess(broker, f"id{unique}", settings=settings, security=security).start()
    follower = ControlPlaneProcess(broker, f"id{unique}", settings=settings, security=security)
    follower.start(lead=False)
    executor_id = f"exec-{unique}"
    name = f"bound-{unique}"
    admin = client_as(follower, ADMIN)
    peer = ExecutorPeer(leader.address, executor_id, token=EXECUTOR_A)
    try:
        admin.create_connector(
            name, {"connector.class": "DataGenSource", "topic": name, "tasks.max": "2", "max.records": "1"}
        )
        tasks = {f"connectors/{name}/tasks/{n}" for n in range(2)}
        wait_for(lambda: peer.tasks() == tasks, what="both tasks assigned to the executor")
        for task in tasks:
            peer.report(task, common_pb2.STATE_RUNNING)
        wait_until(
            lambda: [t.status.state for t in admin.connector_status(name).tasks] == [State.RUNNING] * 2,
            what="both tasks recorded RUNNING",
        )
        statuses = [
            value
            for key, value in read_topic(broker.bootstrap_servers, leader.topics["status"])
            if key in {f"status-task-{name}-0", f"status-task-{name}-1"} and value is not None
        ]
        assert statuses and all(
            v["worker_principal"] == "exec-a" for v in statuses if v["state"] == "RUNNING"
        )

        leader.kill()
        follower.wait_until_leading(90)

        def refused() -> Any:
            channel, stream = attach(follower, EXECUTOR_B, executor_id)
            with channel:
                answer = failure(lambda: next(stream))
            return answer if answer.code != grpc.StatusCode.UNAVAILABLE else None

        impostor = wait_until(refused, timeout=30, what="the new leader answering an attach")
        assert (impostor.code, impostor.reason) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AUTHORIZED")
        assert impostor.metadata["executor_id"] == executor_id
        # The executor itself comes back and keeps its tasks.
        returning = ExecutorPeer(follower.address, executor_id, token=EXECUTOR_A, running=peer.running())
        try:
            welcome = wait_for(lambda: returning.welcome, what="the returning executor's welcome")
            assert set(welcome.adopted_tasks) == tasks
        finally:
            returning.close()
    finally:
        peer.close()
        admin.close()
        follower.stop()


def _exists(client: SluicewayClient, name: str) -> bool:
    try:
        return client.get_connector(name).name == name
    except NotFoundError:
        return False


def test_a_follower_forwards_with_the_callers_identity_and_the_leader_audits_once(
    secured: ControlPlaneProcess, tmp_path: Path, unique: str
) -> None:
    settings = {**secured.settings, "audit.log.file": str(tmp_path / "follower-audit.log")}
    follower = ControlPlaneProcess(
        secured.broker, secured.suffix, settings=settings, security=TransportSecurity(token=ADMIN)
    ).start(lead=False)
    name = f"forwarded-{unique}"
    admin, viewer = client_as(follower, ADMIN), client_as(follower, VIEWER)
    try:
        assert follower.server_info().leader.id == secured.server_info().this_replica.id
        # Refused where it arrives, before any forwarding.
        with pytest.raises(PermissionDeniedError) as denied:
            viewer.create_connector(name, {"connector.class": "DataGenSource"})
        assert denied.value.reason == "NOT_AUTHORIZED"
        admin.create_connector(
            name, {"connector.class": "DataGenSource", "topic": name}, initial_state="STOPPED"
        )
        # Followers answer reads from their own copy; the follower asks the leader for its
        # executors as a replica.
        wait_until(lambda: _exists(viewer, name), what="the follower's copy")
        viewer.server_info()
        admin.delete_connector(name)
    finally:
        admin.close()
        viewer.close()
        follower.stop()
    on_leader = [
        (x["principal"], x["via"], x["method"], x["outcome"])
        for x in audit_lines(secured)
        if x["connector"] == name
    ]
    assert on_leader == [
        ("alice", "forwarded", "CreateConnector", "OK"),
        ("alice", "forwarded", "DeleteConnector", "OK"),
    ]
    follower_lines = [json.loads(line) for line in (tmp_path / "follower-audit.log").read_text().splitlines()]
    assert [
        (x["principal"], x["method"], x["outcome"]) for x in follower_lines if x["connector"] == name
    ] == [("victor", "CreateConnector", "PERMISSION_DENIED")]


def test_a_caller_cannot_claim_another_identity(secured: ControlPlaneProcess, unique: str) -> None:
    """The forwarding metadata is believed from replicas only: an admin token naming another
    principal, or a viewer claiming the admin role, is refused."""
    with grpc.insecure_channel(secured.address) as channel:
        stub = connectors_pb2_grpc.ConnectorServiceStub(channel)
        request = connectors_pb2.DeleteConnectorRequest(name=f"connectors/claimed-{unique}")
        for token in (ADMIN, VIEWER):
            metadata = (
                ("authorization", f"Bearer {token}"),
                ("sluiceway-principal", "root"),
                ("sluiceway-role", "admin"),
                ("sluiceway-forwarded-by", "somewhere"),
            )
            refused = failure(functools.partial(stub.DeleteConnector, request, metadata=metadata, timeout=10))
            assert (refused.code, refused.reason) == (grpc.StatusCode.PERMISSION_DENIED, "NOT_AUTHORIZED")


def test_reflection_lists_the_public_services_only(secured: ControlPlaneProcess) -> None:
    with grpc.insecure_channel(secured.address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        metadata = (("authorization", f"Bearer {VIEWER}"),)
        answers = list(stub.ServerReflectionInfo(iter([request]), metadata=metadata, timeout=10))
        services = {s.name for s in answers[0].list_services_response.service}
        assert "sluiceway.api.v1.ConnectorService" in services
        assert "sluiceway.api.v1.ExecutorService" not in services
        # Reflection, like every call but health checks, needs credentials.
        refused = failure(lambda: list(stub.ServerReflectionInfo(iter([request]), timeout=10)))
        assert refused.code == grpc.StatusCode.UNAUTHENTICATED
