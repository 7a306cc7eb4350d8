"""The client library over TLS and mutual TLS, with bearer tokens: explicit `security`, the
SLUICEWAY_TLS* / SLUICEWAY_TOKEN* environment, and how `credentials` and `metadata` combine with them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.client import AsyncSluicewayClient, SluicewayClient, TransportSecurity
from sluiceway.errors import UnavailableError
from sluiceway_server.dev_certificates import DevCertificates, make_dev_certificates
from tests.unit.client.fake_control_plane import Served, serve


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(tmp_path_factory.mktemp("client-certs"), ("admin",))


@pytest.fixture
def mtls_served(certs: DevCertificates) -> Iterator[Served]:
    credentials = grpc.ssl_server_credentials(
        [(certs.server.key.read_bytes(), certs.server.certificate.read_bytes())],
        root_certificates=certs.ca.certificate.read_bytes(),
        require_client_auth=True,
    )
    started = serve(credentials)
    yield started
    started.server.stop(grace=None)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("TLS", "TLS_CA", "TLS_CERT", "TLS_KEY", "TOKEN", "TOKEN_FILE"):
        monkeypatch.delenv(f"SLUICEWAY_{name}", raising=False)
    return monkeypatch


def _admin(certs: DevCertificates, token: str | None = "adm1n") -> TransportSecurity:
    pair = certs.client("admin")
    return TransportSecurity(
        ca_file=str(certs.ca.certificate),
        cert_file=str(pair.certificate),
        key_file=str(pair.key),
        token=token,
    )


def _authorization(served: Served) -> list[str | None]:
    return [attempt.metadata.get("authorization") for attempt in served.fake.attempts_of("GetServerInfo")]


def test_security_gives_mutual_tls_and_the_token(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch
) -> None:
    with SluicewayClient(mtls_served.target, security=_admin(certs)) as client:
        assert client.server_info().version == "0.1.0"
        assert client.security.mutual_tls
    assert _authorization(mtls_served) == ["Bearer adm1n"]


def test_environment_is_the_default(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    clean_env.setenv("SLUICEWAY_TLS_CA", str(certs.ca.certificate))
    clean_env.setenv("SLUICEWAY_TLS_CERT", str(certs.client("admin").certificate))
    clean_env.setenv("SLUICEWAY_TLS_KEY", str(certs.client("admin").key))
    clean_env.setenv("SLUICEWAY_TOKEN_FILE", str(token_file))
    with SluicewayClient(mtls_served.target, timeout=10) as client:
        client.server_info()
    assert _authorization(mtls_served) == ["Bearer from-file"]


def test_without_a_client_certificate_the_server_refuses(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch
) -> None:
    security = TransportSecurity(ca_file=str(certs.ca.certificate))
    with (
        SluicewayClient(mtls_served.target, security=security, timeout=2) as client,
        pytest.raises(UnavailableError),
    ):
        client.server_info()
    assert _authorization(mtls_served) == []


def test_explicit_authorization_metadata_replaces_the_token(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch
) -> None:
    metadata = [("authorization", "Bearer mine"), ("x-trace", "1")]
    with SluicewayClient(mtls_served.target, security=_admin(certs), metadata=metadata) as client:
        assert client._metadata == (("authorization", "Bearer mine"), ("x-trace", "1"))
        client.server_info()
    assert _authorization(mtls_served) == ["Bearer mine"]


def test_token_and_metadata_are_both_sent(clean_env: pytest.MonkeyPatch) -> None:
    client = SluicewayClient("127.0.0.1:1", security=TransportSecurity(token="t"), metadata=[("x-a", "b")])
    try:
        assert client._metadata == (("authorization", "Bearer t"), ("x-a", "b"))
    finally:
        client.close()


def test_credentials_still_work_and_exclude_a_tls_security(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch
) -> None:
    pair = certs.client("admin")
    credentials = grpc.ssl_channel_credentials(
        certs.ca.certificate.read_bytes(), pair.key.read_bytes(), pair.certificate.read_bytes()
    )
    # A token-only security may come with credentials: TLS from one, the token from the other.
    with SluicewayClient(
        mtls_served.target, credentials=credentials, security=TransportSecurity(token="tok")
    ) as client:
        client.server_info()
    assert _authorization(mtls_served) == ["Bearer tok"]
    with pytest.raises(ValueError, match="either credentials or a TLS security"):
        SluicewayClient(mtls_served.target, credentials=credentials, security=_admin(certs))


def test_bad_environment_fails_at_construction(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("SLUICEWAY_TLS_CA", str(tmp_path / "absent.pem"))
    with pytest.raises(ValueError, match="SLUICEWAY_TLS_CA"):
        SluicewayClient("127.0.0.1:1")


def test_async_client_over_mutual_tls(
    certs: DevCertificates, mtls_served: Served, clean_env: pytest.MonkeyPatch
) -> None:
    async def scenario() -> str:
        async with AsyncSluicewayClient(mtls_served.target, security=_admin(certs, "async")) as client:
            info = await client.server_info()
            return info.version

    assert asyncio.run(scenario()) == "0.1.0"
    assert _authorization(mtls_served) == ["Bearer async"]
