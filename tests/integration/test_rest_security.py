"""The REST API under authentication: the same tokens, roles and audit log as the gRPC API (every
route tried with every role), and a follower that carries a REST mutation to the leader."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import connectors_pb2, connectors_pb2_grpc
from sluiceway.common.transport import TransportSecurity
from sluiceway_server.embedded import EmbeddedBroker, free_port
from sluiceway_server.rest.openapi import openapi_document
from sluiceway_server.rest.routes import ROUTES, Route
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import wait_until
from tests.integration.rest_helpers import Answer, Http
from tests.integration.test_security_auth import ADMIN, OPERATOR, VIEWER, audit_lines, auth_settings

ROLES = {"viewer": VIEWER, "operator": OPERATOR, "admin": ADMIN}
RANK = {"none": 0, "viewer": 1, "operator": 2, "admin": 3}
GEN = {"connector.class": "DataGenSource", "topic": "rest-roles"}


def rest_settings(directory: Path) -> dict[str, str]:
    return {**auth_settings(directory), "rest.listeners": f"http://127.0.0.1:{free_port()}"}


def rest_of(plane: ControlPlaneProcess, token: str | None = None) -> Http:
    return Http(plane.settings["rest.listeners"], token=token)


@pytest.fixture(scope="module")
def secured_rest(
    broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlaneProcess]:
    plane = ControlPlaneProcess(
        broker,
        uuid.uuid4().hex[:8],
        settings=rest_settings(tmp_path_factory.mktemp("rest-auth")),
        security=TransportSecurity(token=ADMIN),
    ).start()
    yield plane
    plane.stop()


def _call(http: Http, route: Route, connector: str) -> Answer:
    path = route.path.replace("{connector}", connector).replace("{task}", "0")
    path = path.replace("{plugin}", "DataGenSourceConnector").replace("{logger}", "sluiceway_server.rest")
    bodies: dict[str, object] = {
        "CreateConnectorRequest": {
            "name": f"{connector}-new",
            "config": GEN,
        },
        "Config": {"connector.class": "DataGenSource", "topic": "x"},
        "ConfigPatch": {"topic": "y"},
        "ConnectorOffsets": {"offsets": [{"partition": {"task": 0}, "offset": None}]},
        "LoggerLevel": {"level": "INFO"},
    }
    return http.request(route.method, path, bodies.get(route.request or "") if route.request else None)


def test_credentials_are_checked_and_open_routes_stay_open(secured_rest: ControlPlaneProcess) -> None:
    anonymous = rest_of(secured_rest)
    refused = anonymous.get("/connectors")
    assert refused.status == 401
    assert refused.body["error_code"] == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert rest_of(secured_rest, "not-a-token-of-ours-at-all").get("/connectors").status == 401
    assert anonymous.get("/health").status == 200
    assert anonymous.get("/openapi.json").status == 200


@pytest.mark.parametrize("role", ["viewer", "operator", "admin"])
def test_every_route_needs_the_role_its_grpc_calls_need(
    secured_rest: ControlPlaneProcess, unique: str, role: str
) -> None:
    """What a role may do over REST is what it may do over gRPC: each route is refused (403) exactly
    when the gRPC calls it makes need a higher role (the document's x-sluiceway-role)."""
    admin = rest_of(secured_rest, ADMIN)
    http = rest_of(secured_rest, ROLES[role])
    document = openapi_document()["paths"]
    for route in ROUTES:
        if route.open:
            continue
        connector = f"roles-{role}-{unique}-{uuid.uuid4().hex[:4]}"
        assert admin.post("/connectors", {"name": connector, "config": GEN}).status == 201
        needed = document[route.path][route.method.lower()]["x-sluiceway-role"]
        answer = _call(http, route, connector)
        if RANK[needed] > RANK[role]:
            assert answer.status == 403, (route.method, route.path, answer)
            assert answer.body["reason"] == "NOT_AUTHORIZED"
        else:
            assert answer.status not in (401, 403), (route.method, route.path, answer)
        admin.delete(f"/connectors/{connector}")
        admin.delete(f"/connectors/{connector}-new")


def test_a_rest_mutation_is_audited_with_its_principal(
    secured_rest: ControlPlaneProcess, unique: str
) -> None:
    name = f"audited-rest-{unique}"
    assert rest_of(secured_rest, ADMIN).post("/connectors", {"name": name, "config": GEN}).status == 201
    assert rest_of(secured_rest, VIEWER).delete(f"/connectors/{name}").status == 403
    lines = [line for line in audit_lines(secured_rest) if line["connector"] == name]
    assert [(line["principal"], line["method"], line["outcome"]) for line in lines] == [
        ("alice", "CreateConnector", "OK"),
        ("victor", "DeleteConnector", "PERMISSION_DENIED"),
    ]
    assert all(line["peer"].startswith("http:127.0.0.1") for line in lines)


def test_a_follower_carries_a_rest_mutation_to_the_leader(
    broker: EmbeddedBroker, tmp_path: Path, unique: str
) -> None:
    suffix = uuid.uuid4().hex[:8]
    (tmp_path / "leader").mkdir()
    (tmp_path / "follower").mkdir()
    leader = ControlPlaneProcess(
        broker, suffix, settings=auth_settings(tmp_path / "leader"), security=TransportSecurity(token=ADMIN)
    ).start()
    follower = ControlPlaneProcess(
        broker, suffix, settings=rest_settings(tmp_path / "follower"), security=TransportSecurity(token=ADMIN)
    )
    try:
        follower.start(lead=False)
        info = follower.server_info()
        assert info.leader.id and info.leader.id != info.this_replica.id
        http = rest_of(follower, ADMIN)
        name = f"forwarded-{unique}"
        created = http.post("/connectors", {"name": name, "config": {**GEN, "topic": "f"}})
        assert created.status == 201, created.body
        # The follower reads its own write at once (it waits for the position the leader answered with).
        assert http.get(f"/connectors/{name}").status == 200
        with grpc.insecure_channel(leader.address) as channel:
            stub = connectors_pb2_grpc.ConnectorServiceStub(channel)
            found = stub.GetConnector(
                connectors_pb2.GetConnectorRequest(name=f"connectors/{name}"),
                metadata=(("authorization", f"Bearer {ADMIN}"),),
                timeout=10,
            )
        assert found.config["topic"] == "f"
        # Carried out, and audited, by the leader with the REST caller's principal.
        wait_until(lambda: [line for line in audit_lines(leader) if line["connector"] == name], timeout=10)
        lines = [line for line in audit_lines(leader) if line["connector"] == name]
        assert [(line["principal"], line["method"], line["outcome"]) for line in lines] == [
            ("alice", "CreateConnector", "OK")
        ]
        assert rest_of(follower, VIEWER).put(f"/connectors/{name}/pause").status == 403
        assert http.delete(f"/connectors/{name}").status == 204
    finally:
        follower.stop()
        leader.stop()
