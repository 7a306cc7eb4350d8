"""sluiceway_server.dev_certificates: the files it writes, the chain and usages cryptography's own
verifier accepts, and a real mutual-TLS handshake with a gRPC health server."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import stat
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sluiceway_server.dev_certificates import DEFAULT_CLIENTS, DevCertificates, main, make_dev_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(tmp_path_factory.mktemp("dev-certs"))


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _common_name(certificate: x509.Certificate) -> str:
    (attribute,) = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attribute.value)


def test_files_and_permissions(certs: DevCertificates) -> None:
    names = sorted(path.name for path in certs.directory.iterdir())
    stems = ["ca", "server", *DEFAULT_CLIENTS]
    assert names == sorted([f"{stem}.pem" for stem in stems] + [f"{stem}.key" for stem in stems])
    for path in certs.directory.glob("*.key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert list(certs.clients) == list(DEFAULT_CLIENTS)
    assert certs.ca_file == certs.directory / "ca.pem"


def test_server_certificate(certs: DevCertificates) -> None:
    ca = _load(certs.ca.certificate)
    server = _load(certs.server.certificate)
    assert _common_name(server) == "sluiceway-replica"
    server.verify_directly_issued_by(ca)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", socket.gethostname().lower()} <= set(names.get_values_for_type(x509.DNSName))
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    }
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    # cryptography's own path validation, as a TLS client would do it.
    now = datetime.datetime.now(datetime.UTC)
    verifier = PolicyBuilder().store(Store([ca])).time(now).build_server_verifier(x509.DNSName("localhost"))
    chain = verifier.verify(server, [])
    assert chain[-1] == ca
    ip_verifier = (
        PolicyBuilder()
        .store(Store([ca]))
        .time(now)
        .build_server_verifier(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    )
    ip_verifier.verify(server, [])


def test_client_certificates(certs: DevCertificates) -> None:
    ca = _load(certs.ca.certificate)
    for name in DEFAULT_CLIENTS:
        client = _load(certs.client(name).certificate)
        assert _common_name(client) == name
        assert client.subject.rfc4514_string() == f"CN={name}"
        client.verify_directly_issued_by(ca)
        usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        assert not client.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    with pytest.raises(KeyError, match="no client certificate named 'nobody'"):
        certs.client("nobody")


def test_chosen_clients_and_hosts(tmp_path: Path) -> None:
    made = make_dev_certificates(
        tmp_path / "new" / "dir", ["ops", "ops", "ci-bot"], hosts=["cp-0", "10.1.2.3"]
    )
    assert list(made.clients) == ["ops", "ci-bot"]
    assert {"cp-0", "10.1.2.3"} <= set(made.server_names)
    server = _load(made.server.certificate)
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "cp-0" in names.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("10.1.2.3") in names.get_values_for_type(x509.IPAddress)


@pytest.mark.parametrize("name", ["ca", "server", "", "has space", "../escape", "x" * 65])
def test_bad_client_names(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="client name"):
        make_dev_certificates(tmp_path, [name])


def test_bad_host(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="neither an IP address nor a DNS name"):
        make_dev_certificates(tmp_path, ["a"], hosts=["not a host"])


def test_regenerating_replaces_the_files(tmp_path: Path) -> None:
    first = make_dev_certificates(tmp_path, ["a"])
    old = first.ca.certificate.read_bytes()
    first.ca.key.chmod(0o644)
    second = make_dev_certificates(tmp_path, ["a"])
    assert second.ca.certificate.read_bytes() != old
    assert stat.S_IMODE(second.ca.key.stat().st_mode) == 0o600


def test_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path), "--client", "alice", "--host", "cp-1"]) == 0
    out = capsys.readouterr().out
    assert "CN=sluiceway-replica" in out
    assert "cp-1" in out
    assert "alice.pem (key alice.key), CN=alice" in out
    assert (tmp_path / "alice.key").exists()
    assert main([str(tmp_path), "--client", "ca"]) == 1
    assert "client name 'ca'" in capsys.readouterr().err


# ------------------------------------------------------------------ a real handshake


@pytest.fixture
def health_port(certs: DevCertificates) -> Iterator[int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    credentials = grpc.ssl_server_credentials(
        [(certs.server.key.read_bytes(), certs.server.certificate.read_bytes())],
        root_certificates=certs.ca.certificate.read_bytes(),
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    yield port
    server.stop(grace=None)


def _check(address: str, credentials: grpc.ChannelCredentials) -> int:
    with grpc.secure_channel(address, credentials) as channel:
        answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        status: int = answer.status
        return status


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
def test_mutual_tls_handshake(certs: DevCertificates, health_port: int, host: str) -> None:
    admin = certs.client("admin")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certs.ca.certificate.read_bytes(),
        private_key=admin.key.read_bytes(),
        certificate_chain=admin.certificate.read_bytes(),
    )
    assert _check(f"{host}:{health_port}", credentials) == health_pb2.HealthCheckResponse.SERVING


def test_handshake_without_a_client_certificate_fails(certs: DevCertificates, health_port: int) -> None:
    credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.certificate.read_bytes())
    with pytest.raises(grpc.RpcError) as failure:
        _check(f"localhost:{health_port}", credentials)
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_handshake_with_a_certificate_from_another_ca_fails(
    certs: DevCertificates, health_port: int, tmp_path: Path
) -> None:
    stranger = make_dev_certificates(tmp_path, ["admin"]).client("admin")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=certs.ca.certificate.read_bytes(),
        private_key=stranger.key.read_bytes(),
        certificate_chain=stranger.certificate.read_bytes(),
    )
    with pytest.raises(grpc.RpcError):
        _check(f"localhost:{health_port}", credentials)
