"""TLS and mutual TLS over the real socket: the client library, the CLI and an executor running a
pipeline, each authenticated by its client certificate (or a token over TLS)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway.client import SluicewayClient
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import PermissionDeniedError, SluicewayError, UnauthenticatedError
from sluiceway_server.dev_certificates import DevCertificates, make_dev_certificates
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, free_port
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import attach_executor, committed_offsets
from tests.integration.rest_helpers import Http

VIEWER = "viewer-token-over-tls-00001"
# Service-mesh identities: certificates with an empty subject and a SPIFFE id as their URI SAN.
DEPLOYER = "spiffe://example.org/ns/prod/sa/deployer"
STRANGER = "spiffe://example.org/ns/prod/sa/stranger"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(
        tmp_path_factory.mktemp("certs"),
        clients=("admin", "executor", "intruder"),
        uri_clients={"deployer": DEPLOYER, "stranger": STRANGER},
    )


def mtls(certificates: DevCertificates, client: str | None, token: str | None = None) -> TransportSecurity:
    pair = certificates.client(client) if client else None
    return TransportSecurity(
        tls=True,
        ca_file=str(certificates.ca_file),
        cert_file=str(pair.certificate) if pair else None,
        key_file=str(pair.key) if pair else None,
        token=token,
    )


@pytest.fixture(scope="module")
def tls_plane(
    broker: EmbeddedBroker, certificates: DevCertificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlaneProcess]:
    tokens = tmp_path_factory.mktemp("tls-auth") / "tokens.txt"
    # Certificate-only principals for the admin, the executor, the replicas and a mesh workload (by
    # its SPIFFE id); a token for a viewer.
    tokens.write_text(
        f"admin - admin\nexecutor - executor\nreplica - sluiceway-replica\nviewer {VIEWER} victor\n"
        f"operator - {DEPLOYER}\n"
    )
    plane = ControlPlaneProcess(
        broker,
        uuid.uuid4().hex[:8],
        settings={
            "tls.certificate.file": str(certificates.server.certificate),
            "tls.key.file": str(certificates.server.key),
            "tls.client.ca.file": str(certificates.ca_file),
            "tls.client.auth": "required",
            "tls.ca.file": str(certificates.ca_file),
            "auth.tokens.file": str(tokens),
            # Kafka Connect's REST API over HTTPS with the same client certificates.
            "rest.listeners": f"https://127.0.0.1:{free_port()}",
        },
        security=mtls(certificates, "admin"),
    ).start()
    yield plane
    plane.stop()


def test_client_library_over_mutual_tls(
    tls_plane: ControlPlaneProcess, certificates: DevCertificates, unique: str
) -> None:
    name = f"tls-{unique}"
    with SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "admin")) as admin:
        admin.create_connector(
            name, {"connector.class": "DataGenSource", "topic": name}, initial_state="STOPPED"
        )
        assert admin.get_connector(name).name == name
    # A token decides who the caller is when it sends one; its certificate still opens the channel.
    with SluicewayClient(
        tls_plane.address, timeout=20, security=mtls(certificates, "intruder", VIEWER)
    ) as viewer:
        assert viewer.get_connector(name).name == name
    # A certificate from our CA whose subject is in no entry authenticates no one.
    with (
        SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "intruder")) as intruder,
        pytest.raises(UnauthenticatedError),
    ):
        list(intruder.list_connectors())
    # Without a client certificate the handshake itself fails; without TLS, too.
    for security in (mtls(certificates, None, VIEWER), TransportSecurity(token=VIEWER)):
        with SluicewayClient(tls_plane.address, timeout=3, security=security) as refused:
            with pytest.raises(SluicewayError) as raised:
                list(refused.list_connectors())
            assert raised.value.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def test_a_spiffe_id_is_a_principal(
    tls_plane: ControlPlaneProcess, certificates: DevCertificates, unique: str
) -> None:
    """A certificate whose only identity is a URI SAN gets the role of the `-` line naming that URI:
    operator calls pass, admin calls are refused; a SPIFFE id in no line authenticates no one."""
    name = f"spiffe-{unique}"
    with SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "admin")) as admin:
        admin.create_connector(
            name, {"connector.class": "DataGenSource", "topic": name}, initial_state="PAUSED"
        )
    with SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "deployer")) as deployer:
        deployer.stop_connector(name)
        assert deployer.get_connector(name).name == name
        with pytest.raises(PermissionDeniedError) as denied:
            deployer.create_connector(f"{name}-2", {"connector.class": "DataGenSource", "topic": name})
        assert DEPLOYER in str(denied.value) and "operator" in str(denied.value)
    with (
        SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "stranger")) as stranger,
        pytest.raises(UnauthenticatedError) as unknown,
    ):
        stranger.get_connector(name)
    assert STRANGER in str(unknown.value) and "empty subject" in str(unknown.value)
    with SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "admin")) as admin:
        admin.delete_connector(name)


def https(
    plane: ControlPlaneProcess, certificates: DevCertificates, client: str | None, token: str | None = None
) -> Http:
    """The REST listener of `plane`, reached with `client`'s certificate (or none) and a token."""
    context = ssl.create_default_context(cafile=str(certificates.ca_file))
    if client is not None:
        pair = certificates.client(client)
        context.load_cert_chain(str(pair.certificate), str(pair.key))
    return Http(plane.settings["rest.listeners"], token=token, context=context, timeout=20)


def test_rest_over_mutual_tls_knows_certificates_as_grpc_does(
    tls_plane: ControlPlaneProcess, certificates: DevCertificates, unique: str
) -> None:
    """On an https:// REST listener the client certificate is the principal, by its subject or its
    SPIFFE id, with the roles the gRPC listener gives it; without one the handshake fails."""
    name = f"rest-tls-{unique}"
    admin = https(tls_plane, certificates, "admin")
    created = admin.post(
        "/connectors", {"name": name, "config": {"connector.class": "DataGenSource", "topic": name}}
    )
    assert created.status == 201, created.body
    deployer = https(tls_plane, certificates, "deployer")
    assert deployer.put(f"/connectors/{name}/stop").status == 204
    assert deployer.get(f"/connectors/{name}").body["name"] == name
    denied = deployer.delete(f"/connectors/{name}")
    assert denied.status == 403
    assert DEPLOYER in denied.body["message"]
    stranger = https(tls_plane, certificates, "stranger").get("/connectors")
    assert stranger.status == 401
    assert STRANGER in stranger.body["message"]
    assert https(tls_plane, certificates, "intruder").get("/connectors").status == 401
    # A token still decides who the caller is when one is sent, as on the gRPC listener.
    assert https(tls_plane, certificates, "intruder", VIEWER).get(f"/connectors/{name}").status == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        https(tls_plane, certificates, None, VIEWER).get("/connectors")
    assert admin.delete(f"/connectors/{name}").status == 204


def sluiceway_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "sluiceway"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLUICEWAY_SERVER": "", **(env or {})},
        check=False,
    )


def test_cli_over_mutual_tls_by_flags_and_by_environment(
    tls_plane: ControlPlaneProcess, certificates: DevCertificates, unique: str
) -> None:
    admin = certificates.client("admin")
    name = f"cli-tls-{unique}"
    flags = ("--server", tls_plane.address, "--tls-ca", str(certificates.ca_file))
    created = sluiceway_cli(
        *flags,
        "--tls-cert",
        str(admin.certificate),
        "--tls-key",
        str(admin.key),
        "connectors",
        "create",
        name,
        "connector.class=DataGenSource",
        f"topic={name}",
    )
    assert created.returncode == 0, created.stderr
    environment = {
        "SLUICEWAY_TLS_CA": str(certificates.ca_file),
        "SLUICEWAY_TLS_CERT": str(admin.certificate),
        "SLUICEWAY_TLS_KEY": str(admin.key),
    }
    listed = sluiceway_cli(
        "--server", tls_plane.address, "-o", "json", "connectors", "get", name, env=environment
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["name"] == f"connectors/{name}"
    # A token over TLS with a certificate that authenticates no one: the token's role decides.
    intruder = certificates.client("intruder")
    denied = sluiceway_cli(
        *flags,
        "--tls-cert",
        str(intruder.certificate),
        "--tls-key",
        str(intruder.key),
        "--token",
        VIEWER,
        "connectors",
        "delete",
        name,
    )
    assert denied.returncode != 0
    assert "PERMISSION_DENIED" in denied.stderr and "\n" not in denied.stderr.strip()


def test_an_executor_attaches_over_mutual_tls_and_runs_a_pipeline(
    tls_plane: ControlPlaneProcess,
    certificates: DevCertificates,
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    unique: str,
) -> None:
    executor = certificates.client("executor")
    stack = attach_executor(
        tls_plane,
        spark_connect,
        "tls",
        "--tls-ca",
        str(certificates.ca_file),
        "--tls-cert",
        str(executor.certificate),
        "--tls-key",
        str(executor.key),
    )
    name = f"tls-gen-{unique}"
    try:
        stack.client.create_connector(
            name, {"connector.class": "DataGenSource", "topic": name, "tasks.max": "1", "max.records": "50"}
        )
        stack.wait_for(
            lambda: committed_offsets(stack.client, name) == [({"task": 0}, {"seq": 49})],
            "50 records over mTLS",
        )
        assert len(read_topic(broker.bootstrap_servers, name)) == 50
    finally:
        stack.client.delete_connector(name)
        stack.close()


def test_a_follower_forwards_over_mutual_tls_as_a_replica(
    tls_plane: ControlPlaneProcess, certificates: DevCertificates, unique: str
) -> None:
    """The follower reaches the leader with its own certificate (CN=sluiceway-replica, role
    replica) and passes on the admin's identity."""
    # Its own REST port: the leader's is taken.
    settings = {**tls_plane.settings, "rest.listeners": f"https://127.0.0.1:{free_port()}"}
    follower = ControlPlaneProcess(
        tls_plane.broker, tls_plane.suffix, settings=settings, security=tls_plane.security
    ).start(lead=False)
    name = f"tls-forwarded-{unique}"
    try:
        with SluicewayClient(follower.address, timeout=30, security=mtls(certificates, "admin")) as admin:
            admin.create_connector(
                name, {"connector.class": "DataGenSource", "topic": name}, initial_state="STOPPED"
            )
            assert follower.server_info().leader.id == tls_plane.server_info().this_replica.id
        with SluicewayClient(tls_plane.address, timeout=20, security=mtls(certificates, "admin")) as leader:
            assert leader.get_connector(name).name == name
            leader.delete_connector(name)
    finally:
        follower.stop()
