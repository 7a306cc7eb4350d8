"""Replica lists: how a target is read (`sluiceway.common.targets`), how the client moves from a
replica that failed to the next, and that over TLS each replica is checked against its own name."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc
from sluiceway.client import RetryPolicy, SluicewayClient, TransportSecurity
from sluiceway.client._replicas import Replicas
from sluiceway.common.targets import parse_targets
from sluiceway.errors import SluicewayError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("localhost:8083", ("localhost:8083",)),
        # Without a comma, gRPC reads the target: its own schemes, a port left out.
        ("dns:///cp.example:8083", ("dns:///cp.example:8083",)),
        ("ipv4:10.0.0.1:8083,10.0.0.2:8083", ("ipv4:10.0.0.1:8083,10.0.0.2:8083",)),
        ("cp.example", ("cp.example",)),
        (
            " 10.0.0.1:8083 , cp-2.example.com:8084,[fd00::0003]:8085 ",
            ("10.0.0.1:8083", "cp-2.example.com:8084", "[fd00::3]:8085"),
        ),
        ("a:1,b:2,a:1", ("a:1", "b:2")),
    ],
)
def test_targets_are_read(text: str, expected: tuple[str, ...]) -> None:
    assert parse_targets(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "no control-plane address"),
        ("a:1,,b:2", "empty address"),
        ("a:1,b", "needs its port"),
        ("a:1,::1:8083", "brackets"),
        ("a:1,[::1]", "[ADDRESS]:PORT"),
        ("a:1,[10.0.0.1]:5", "not an IPv6 address"),
        ("a:1,10.0.0.256:5", "not an IPv4 address"),
        ("a:1,b_ad name:5", "neither an IPv4 address nor a host name"),
        ("a:1,b:0", "from 1 to 65535"),
        ("a:1,b:http", "from 1 to 65535"),
    ],
)
def test_malformed_lists_name_the_item(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        parse_targets(text)


def test_replicas_move_on_once_from_the_replica_that_failed() -> None:
    opened: list[str] = []

    def open_replica(address: str) -> str:
        opened.append(address)
        return address

    replicas = Replicas(("a:1", "b:2", "c:3"), open_replica)
    first = replicas.current()
    replicas.failed(first, grpc.StatusCode.NOT_FOUND)  # an answer: the replica is fine
    assert replicas.current().address == "a:1"
    replicas.failed(first, grpc.StatusCode.UNAVAILABLE)
    replicas.failed(first, grpc.StatusCode.UNAVAILABLE)  # the same failure seen by a second call
    assert replicas.current().address == "b:2"
    replicas.failed(replicas.current(), grpc.StatusCode.DEADLINE_EXCEEDED)
    replicas.failed(replicas.current(), grpc.StatusCode.UNAVAILABLE)
    assert replicas.current().address == "a:1"
    assert opened == ["a:1", "b:2", "c:3"]


# --- real servers: per-replica channels and TLS names ----------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class _Ca:
    def __init__(self, directory: Path) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            self._builder(_name("test CA"), self.key.public_key(), now)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.file = directory / "ca.pem"
        self.file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def _builder(
        self, subject: x509.Name, key: ec.EllipticCurvePublicKey, now: datetime.datetime
    ) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(_name("test CA"))
            .public_key(key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )

    def server_pair(self, name: x509.GeneralName) -> tuple[bytes, bytes]:
        """A server key and certificate valid for `name` only."""
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            self._builder(_name("replica"), key.public_key(), datetime.datetime.now(datetime.UTC))
            .add_extension(x509.SubjectAlternativeName([name]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        pem_key = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return pem_key, cert.public_bytes(serialization.Encoding.PEM)


class _Info(cluster_pb2_grpc.ClusterServiceServicer):
    def __init__(self, name: str) -> None:
        self.name = name

    # The log-level calls are not part of what these tests exercise.
    def ListLoggers(self, request: Any, context: Any) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def GetLogger(self, request: Any, context: Any) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def SetLoggerLevel(self, request: Any, context: Any) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def GetServerInfo(  # noqa: N802
        self, request: cluster_pb2.GetServerInfoRequest, context: grpc.ServicerContext
    ) -> cluster_pb2.ServerInfo:
        info = cluster_pb2.ServerInfo()
        info.this_replica.id = self.name
        return info


def _serve(name: str, credentials: grpc.ServerCredentials | None) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(_Info(name), server)
    port = (
        server.add_secure_port("127.0.0.1:0", credentials)
        if credentials is not None
        else server.add_insecure_port("127.0.0.1:0")
    )
    server.start()
    return server, port


@pytest.fixture
def tls_pair(tmp_path: Path) -> Iterator[tuple[TransportSecurity, grpc.Server, int, grpc.Server, int]]:
    """Two TLS servers: one with a certificate for 127.0.0.1 only, one for localhost only."""
    ca = _Ca(tmp_path)
    by_ip, ip_port = _serve(
        "by-ip",
        grpc.ssl_server_credentials([ca.server_pair(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))]),
    )
    by_name, name_port = _serve(
        "by-name", grpc.ssl_server_credentials([ca.server_pair(x509.DNSName("localhost"))])
    )
    yield TransportSecurity(ca_file=str(ca.file)), by_ip, ip_port, by_name, name_port
    by_ip.stop(None)
    by_name.stop(None)


def _fast_retries() -> RetryPolicy:
    return RetryPolicy(initial_backoff=0.01, max_backoff=0.05)


def test_a_call_moves_on_from_a_replica_that_is_gone() -> None:
    gone, gone_port = _serve("gone", None)
    gone.stop(None)
    alive, alive_port = _serve("alive", None)
    try:
        target = f"127.0.0.1:{gone_port},localhost:{alive_port}"
        with SluicewayClient(target, timeout=10, retry=_fast_retries()) as client:
            assert client.server_info().this_replica.id == "alive"
            assert client.replica_address == f"localhost:{alive_port}"
    finally:
        alive.stop(None)


def test_over_tls_each_replica_is_checked_against_its_own_name(
    tls_pair: tuple[TransportSecurity, grpc.Server, int, grpc.Server, int],
) -> None:
    security, by_ip, ip_port, _, name_port = tls_pair
    target = f"127.0.0.1:{ip_port},localhost:{name_port}"
    with SluicewayClient(target, timeout=10, security=security, retry=_fast_retries()) as client:
        assert client.server_info().this_replica.id == "by-ip"
        by_ip.stop(None)
        # The next replica's certificate names localhost only: it is accepted under that name.
        assert client.server_info().this_replica.id == "by-name"
    # A replica addressed by a name its certificate does not carry is refused (it is up).
    with (
        SluicewayClient(
            f"127.0.0.1:{name_port}", timeout=3, security=security, retry=_fast_retries()
        ) as client,
        pytest.raises(SluicewayError) as refused,
    ):
        client.server_info()
    assert refused.value.code == grpc.StatusCode.UNAVAILABLE
    assert "verification" in refused.value.message.lower(), refused.value.message
