"""Client certificates as principals: URI SAN (SPIFFE) lines of the tokens file, the lookup's
precedence, and getpeercert() turned into the subject gRPC reports, checked against a real gRPC
server and a real Python TLS handshake for the same certificates."""

from __future__ import annotations

import datetime
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ObjectIdentifier
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sluiceway_server.api.auth import Authenticator
from sluiceway_server.dev_certificates import DevCertificates, main, make_dev_certificates
from sluiceway_server.errors import UnauthenticatedError
from sluiceway_server.security.certificates import (
    describe_identity,
    peer_certificate_identity,
    rfc2253_subject,
)
from sluiceway_server.security.principals import (
    AmbiguousCertificateError,
    Principal,
    Role,
    TokensFile,
    TokensFileError,
)

DEPLOYER = "spiffe://example.org/ns/prod/sa/deployer"
READER = "spiffe://example.org/ns/prod/sa/reader"
TOKENS = f"""
operator  -  {DEPLOYER}
viewer    -  {READER}
admin     -  alice
viewer    -  CN=https://not-a-uri.example
"""
GET = "/sluiceway.api.v1.ConnectorService/GetConnector"


def _tokens() -> TokensFile:
    return TokensFile.parse(TOKENS.splitlines())


def test_uri_lines_name_uri_sans_and_the_subject_comes_second() -> None:
    tokens = _tokens()
    deployer = Principal(DEPLOYER, Role.OPERATOR, "certificate")
    assert tokens.by_certificate_identity("", [DEPLOYER]) == deployer
    assert tokens.by_certificate_identity(None, ["https://x.example/a", DEPLOYER]) == deployer
    # The URI SAN wins over a subject that names another principal.
    assert tokens.by_certificate_identity("CN=alice", [DEPLOYER]) == deployer
    # A URI SAN nobody is listed for leaves the subject to decide.
    assert tokens.by_certificate_identity("CN=alice", ["spiffe://example.org/other"]) == Principal(
        "alice", Role.ADMIN, "certificate"
    )
    assert tokens.by_certificate_identity("CN=https://not-a-uri.example", []) is not None
    assert tokens.by_certificate_identity("", []) is None
    assert tokens.by_certificate_identity(None, [DEPLOYER.upper()]) is None
    # The same URI twice is one principal, not two.
    assert tokens.by_certificate_identity(None, [DEPLOYER, DEPLOYER]) == deployer


def test_uri_sans_naming_two_principals_are_refused() -> None:
    with pytest.raises(AmbiguousCertificateError, match="several principals") as raised:
        _tokens().by_certificate_identity("CN=alice", [DEPLOYER, READER])
    assert DEPLOYER in str(raised.value) and READER in str(raised.value)


def test_a_uri_principal_with_a_space_is_a_bad_line() -> None:
    with pytest.raises(TokensFileError, match="line 1: the URI"):
        TokensFile.parse(["operator - spiffe://example.org/a b"])


class CertificateContext:
    def __init__(self, subject: str | None, uris: list[str]) -> None:
        self._auth: dict[str, list[bytes]] = {}
        if subject is not None:
            self._auth["x509_subject"] = [subject.encode()]
        if uris:
            self._auth["peer_uri"] = [uri.encode() for uri in uris]

    def peer(self) -> str:
        return "ipv4:10.0.0.7:5000"

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth


def _identify(subject: str | None, uris: list[str]) -> Principal:
    context: Any = CertificateContext(subject, uris)
    return Authenticator(_tokens()).identify(GET, (), context)


def test_authenticator_takes_the_uri_san_and_names_what_it_saw_when_refusing() -> None:
    assert _identify("", [DEPLOYER]).name == DEPLOYER
    with pytest.raises(UnauthenticatedError) as unknown:
        _identify("", ["spiffe://example.org/ns/prod/sa/stranger"])
    assert "an empty subject" in unknown.value.message
    assert "spiffe://example.org/ns/prod/sa/stranger" in unknown.value.message
    with pytest.raises(UnauthenticatedError) as unknown_subject:
        _identify("CN=mallory", [])
    assert "'CN=mallory'" in unknown_subject.value.message
    with pytest.raises(UnauthenticatedError, match="several principals"):
        _identify("", [DEPLOYER, READER])
    with pytest.raises(UnauthenticatedError, match="needs credentials"):
        _identify(None, [])


def test_describe_identity() -> None:
    assert describe_identity(None, []) == "an empty subject and no URI SAN"
    assert describe_identity("CN=a", ["s://x", "s://y"]) == "subject 'CN=a' and URI SANs s://x, s://y"


def test_rfc2253_subject_reverses_and_escapes() -> None:
    subject = (
        (("countryName", "DE"),),
        (("organizationName", "Example, Inc."),),
        (("commonName", "x"), ("organizationName", "y")),
    )
    assert rfc2253_subject(subject) == "O=y+CN=x,O=Example\\, Inc.,C=DE"
    assert rfc2253_subject(()) == ""
    assert rfc2253_subject(((("commonName", " #a\x01é "),),)) == "CN=\\ #a\\01\\C3\\A9\\ "
    assert rfc2253_subject(((("1.2.3.4", "abc"),),)) == "1.2.3.4=#0C03616263"
    assert peer_certificate_identity({}) == (None, [])
    assert peer_certificate_identity(
        {"subject": (), "subjectAltName": (("DNS", "a.example"), ("URI", DEPLOYER))}
    ) == ("", [DEPLOYER])


# ------------------------------------------------------------------ against real TLS stacks

A = x509.NameAttribute
SUBJECTS: dict[str, x509.Name] = {
    "empty": x509.Name([]),
    "plain": x509.Name([A(NameOID.COMMON_NAME, "x"), A(NameOID.ORGANIZATION_NAME, "y")]),
    "many": x509.Name(
        [
            A(NameOID.COUNTRY_NAME, "DE"),
            A(NameOID.STATE_OR_PROVINCE_NAME, "Berlin"),
            A(NameOID.LOCALITY_NAME, "Zürich 😀"),
            A(NameOID.ORGANIZATION_NAME, "Example, Inc."),
            A(NameOID.ORGANIZATIONAL_UNIT_NAME, "ops+dev"),
            A(NameOID.ORGANIZATIONAL_UNIT_NAME, "second"),
            A(NameOID.DOMAIN_COMPONENT, "example"),
            A(NameOID.USER_ID, "u1"),
            A(NameOID.SERIAL_NUMBER, "42"),
            A(NameOID.EMAIL_ADDRESS, "a@b.example"),
            A(NameOID.COMMON_NAME, 'x=y "q" <a>;b\\c'),
        ]
    ),
    "multi-valued": x509.Name(
        [
            x509.RelativeDistinguishedName([A(NameOID.COMMON_NAME, "x"), A(NameOID.ORGANIZATION_NAME, "y")]),
            x509.RelativeDistinguishedName([A(NameOID.LOCALITY_NAME, "z")]),
        ]
    ),
    "edges": x509.Name(
        [A(NameOID.ORGANIZATION_NAME, " sp#ace "), A(NameOID.COMMON_NAME, "#lead\x01\x7f\ttab")]
    ),
    "unnamed": x509.Name(
        [A(ObjectIdentifier("2.5.4.97"), "VATDE-1"), A(ObjectIdentifier("1.2.3.4.5"), "abc")]
    ),
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[DevCertificates, Path]:
    directory = tmp_path_factory.mktemp("identity-certs")
    certs = make_dev_certificates(directory, ["admin"])
    ca_cert = x509.load_pem_x509_certificate(certs.ca.certificate.read_bytes())
    ca_key: Any = serialization.load_pem_private_key(certs.ca.key.read_bytes(), None)
    now = datetime.datetime.now(datetime.UTC)
    for name, subject in SUBJECTS.items():
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.UniformResourceIdentifier(f"spiffe://example.org/ns/t/sa/{name}"),
                        x509.DNSName("dns.example"),
                        x509.UniformResourceIdentifier("https://second.example/id"),
                    ]
                ),
                critical=name == "empty",
            )
        )
        (directory / f"{name}.pem").write_bytes(
            builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        )
        (directory / f"{name}.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return certs, directory


class Recorder(health_pb2_grpc.HealthServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.seen: dict[str, tuple[str | None, list[str]]] = {}

    def Check(self, request: Any, context: Any) -> Any:  # noqa: N802
        auth = context.auth_context()
        subjects = auth.get("x509_subject") or []
        self.seen[request.service] = (
            subjects[0].decode() if subjects else None,
            [uri.decode() for uri in auth.get("peer_uri") or []],
        )
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


@pytest.fixture(scope="module")
def grpc_seen(made: tuple[DevCertificates, Path]) -> Iterator[dict[str, tuple[str | None, list[str]]]]:
    certs, directory = made
    recorder = Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(recorder, server)
    port = server.add_secure_port(
        "127.0.0.1:0",
        grpc.ssl_server_credentials(
            [(certs.server.key.read_bytes(), certs.server.certificate.read_bytes())],
            root_certificates=certs.ca.certificate.read_bytes(),
            require_client_auth=True,
        ),
    )
    server.start()
    try:
        for name in SUBJECTS:
            credentials = grpc.ssl_channel_credentials(
                certs.ca.certificate.read_bytes(),
                (directory / f"{name}.key").read_bytes(),
                (directory / f"{name}.pem").read_bytes(),
            )
            with grpc.secure_channel(f"localhost:{port}", credentials) as channel:
                health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=name), timeout=10
                )
        yield recorder.seen
    finally:
        server.stop(grace=None)


def _python_peercert(certs: DevCertificates, directory: Path, name: str) -> dict[str, Any]:
    """The getpeercert() a Python TLS server gets from this client certificate."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certs.server.certificate, certs.server.key)
    server_context.load_verify_locations(certs.ca.certificate)
    server_context.verify_mode = ssl.CERT_REQUIRED
    client_context = ssl.create_default_context(cafile=str(certs.ca.certificate))
    client_context.load_cert_chain(directory / f"{name}.pem", directory / f"{name}.key")
    server_side, client_side = socket.socketpair()
    result: dict[str, Any] = {}

    def accept() -> None:
        with server_context.wrap_socket(server_side, server_side=True) as tls:
            result["peercert"] = tls.getpeercert()

    thread = threading.Thread(target=accept)
    thread.start()
    with client_context.wrap_socket(client_side, server_hostname="localhost"):
        thread.join(10)
    peercert: dict[str, Any] = result["peercert"]
    return peercert


@pytest.mark.parametrize("name", list(SUBJECTS))
def test_peercert_identity_is_what_grpc_reports(
    made: tuple[DevCertificates, Path], grpc_seen: dict[str, tuple[str | None, list[str]]], name: str
) -> None:
    certs, directory = made
    subject, uris = peer_certificate_identity(_python_peercert(certs, directory, name))
    assert (subject, uris) == grpc_seen[name]
    assert uris == [f"spiffe://example.org/ns/t/sa/{name}", "https://second.example/id"]


def test_dev_certificates_make_uri_only_clients(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    certs = make_dev_certificates(tmp_path, ["admin"], uri_clients={"deployer": DEPLOYER})
    made = x509.load_pem_x509_certificate(certs.client("deployer").certificate.read_bytes())
    assert len(made.subject) == 0
    san = made.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert san.critical
    assert san.value.get_values_for_type(x509.UniformResourceIdentifier) == [DEPLOYER]
    with pytest.raises(ValueError, match="not a URI"):
        make_dev_certificates(tmp_path, [], uri_clients={"bad": "no-scheme"})
    with pytest.raises(ValueError, match="twice"):
        make_dev_certificates(tmp_path, ["admin"], uri_clients={"admin": DEPLOYER})
    assert main([str(tmp_path / "cli"), "--uri", f"deployer={DEPLOYER}"]) == 0
    out = capsys.readouterr().out
    assert f"URI {DEPLOYER}, empty subject" in out and "CN=admin" not in out
