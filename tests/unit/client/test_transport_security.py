"""sluiceway.common.transport.TransportSecurity: settings from the environment and from flags, the errors
that name the bad setting, and real TLS / mutual TLS handshakes with the development certificates."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluiceway.common.transport import TransportSecurity, add_arguments
from sluiceway_server.dev_certificates import DevCertificates, make_dev_certificates

_METHOD = "/test.Echo/Whoami"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(tmp_path_factory.mktemp("certs"), ("admin", "viewer"))


def _identity(request: bytes, context: grpc.ServicerContext) -> bytes:
    """Answers with the caller's certificate CN and the authorization metadata it sent."""
    auth: dict[str, Any] = dict(context.auth_context())
    names = list(auth.get("x509_common_name") or [])
    cn = names[0].decode() if names else "-"
    metadata: dict[str, Any] = dict(context.invocation_metadata())
    return f"{cn}|{metadata.get('authorization', '-')}".encode()


def _start(certs: DevCertificates, *, client_auth: bool) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(_identity)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", {"Whoami": handler}),))
    credentials = grpc.ssl_server_credentials(
        [(certs.server.key.read_bytes(), certs.server.certificate.read_bytes())],
        root_certificates=certs.ca.certificate.read_bytes() if client_auth else None,
        require_client_auth=client_auth,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return server, port


@pytest.fixture
def tls_port(certs: DevCertificates) -> Iterator[int]:
    server, port = _start(certs, client_auth=False)
    yield port
    server.stop(grace=None)


@pytest.fixture
def mtls_port(certs: DevCertificates) -> Iterator[int]:
    server, port = _start(certs, client_auth=True)
    yield port
    server.stop(grace=None)


def _whoami(security: TransportSecurity, address: str) -> str:
    with security.channel(address) as channel:
        call: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(_METHOD)
        answer: bytes = call(b"", timeout=10, metadata=security.metadata())
        return answer.decode()


# --- settings ------------------------------------------------------------------------------------


def test_nothing_set_means_plaintext_without_a_token() -> None:
    security = TransportSecurity.from_env({})
    assert not security.uses_tls
    assert security.channel_credentials() is None
    assert security.metadata() == ()


def test_environment_variables(certs: DevCertificates, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t-token\n")
    security = TransportSecurity.from_env(
        {
            "SLUICEWAY_TLS_CA": str(certs.ca.certificate),
            "SLUICEWAY_TLS_CERT": str(certs.client("admin").certificate),
            "SLUICEWAY_TLS_KEY": str(certs.client("admin").key),
            "SLUICEWAY_TOKEN_FILE": str(token_file),
        }
    )
    assert security.uses_tls
    assert security.mutual_tls
    assert security.ca_file == str(certs.ca.certificate)
    assert security.metadata() == (("authorization", "Bearer s3cr3t-token"),)
    assert isinstance(security.channel_credentials(), grpc.ChannelCredentials)


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("FALSE", False), ("", False)])
def test_tls_flag_values(value: str, expected: bool) -> None:
    assert TransportSecurity.from_env({"SLUICEWAY_TLS": value}).uses_tls is expected


def test_bad_tls_flag_names_the_variable() -> None:
    with pytest.raises(ValueError, match="SLUICEWAY_TLS must be true or false"):
        TransportSecurity.from_env({"SLUICEWAY_TLS": "maybe"})


def test_explicit_values_win_over_the_environment(certs: DevCertificates, tmp_path: Path) -> None:
    env = {"SLUICEWAY_TLS_CA": str(tmp_path / "missing.pem"), "SLUICEWAY_TOKEN": "from-env"}
    security = TransportSecurity.from_env(env, ca_file=certs.ca.certificate, token="explicit")
    assert security.ca_file == str(certs.ca.certificate)
    assert security.metadata() == (("authorization", "Bearer explicit"),)
    token_file = tmp_path / "token"
    token_file.write_text("from-file")
    assert (
        TransportSecurity.from_env(env | {"SLUICEWAY_TLS_CA": ""}, token_file=token_file).token == "from-file"
    )


def test_missing_and_wrong_files_name_the_setting(certs: DevCertificates, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"SLUICEWAY_TLS_CA: PEM file .*missing.pem' does not exist"):
        TransportSecurity.from_env({"SLUICEWAY_TLS_CA": str(tmp_path / "missing.pem")})
    with pytest.raises(ValueError, match=r"ca_file: .* is a directory"):
        TransportSecurity.from_env({}, ca_file=tmp_path)
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("hello")
    with pytest.raises(ValueError, match=r"SLUICEWAY_TLS_KEY: .* is not a PEM file"):
        TransportSecurity.from_env(
            {"SLUICEWAY_TLS_CERT": str(certs.client("admin").certificate), "SLUICEWAY_TLS_KEY": str(not_pem)}
        )
    with pytest.raises(ValueError, match=r"SLUICEWAY_TOKEN_FILE: token file .* does not exist"):
        TransportSecurity.from_env({"SLUICEWAY_TOKEN_FILE": str(tmp_path / "nope")})


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_unreadable_file_names_the_setting(certs: DevCertificates, tmp_path: Path) -> None:
    locked = tmp_path / "ca.pem"
    locked.write_bytes(certs.ca.certificate.read_bytes())
    locked.chmod(0)
    with pytest.raises(ValueError, match=r"SLUICEWAY_TLS_CA: .* is not readable"):
        TransportSecurity.from_env({"SLUICEWAY_TLS_CA": str(locked)})


def test_certificate_and_key_go_together(certs: DevCertificates) -> None:
    admin = certs.client("admin")
    with pytest.raises(ValueError, match="SLUICEWAY_TLS_CERT needs SLUICEWAY_TLS_KEY"):
        TransportSecurity.from_env({"SLUICEWAY_TLS_CERT": str(admin.certificate)})
    with pytest.raises(ValueError, match="key_file needs SLUICEWAY_TLS_CERT"):
        TransportSecurity.from_env({}, key_file=admin.key)
    with pytest.raises(ValueError, match="cert_file needs key_file"):
        TransportSecurity(cert_file=str(admin.certificate))


def test_token_checks(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match=r"token file .* is empty"):
        TransportSecurity.from_env({"SLUICEWAY_TOKEN_FILE": str(empty)})
    with pytest.raises(ValueError, match="SLUICEWAY_TOKEN: a token is one word"):
        TransportSecurity.from_env({"SLUICEWAY_TOKEN": "two words"})
    with pytest.raises(ValueError, match="SLUICEWAY_TOKEN and SLUICEWAY_TOKEN_FILE are both set"):
        TransportSecurity.from_env({"SLUICEWAY_TOKEN": "a", "SLUICEWAY_TOKEN_FILE": str(empty)})
    with pytest.raises(ValueError, match="token and token_file both give the token"):
        TransportSecurity.from_env({}, token="a", token_file=empty)


def test_repr_hides_the_token() -> None:
    text = repr(TransportSecurity(token="very-secret"))
    assert "very-secret" not in text
    assert "[hidden]" in text


def test_flags_win_and_errors_name_the_flag(certs: DevCertificates, tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--tls-ca", str(certs.ca.certificate), "--token", "flag-token"])
    security = TransportSecurity.from_arguments(
        args, {"SLUICEWAY_TOKEN": "env-token", "SLUICEWAY_TLS": "false"}
    )
    assert security.uses_tls
    assert security.token == "flag-token"
    # No --tls flag leaves SLUICEWAY_TLS in charge.
    assert TransportSecurity.from_arguments(parser.parse_args([]), {"SLUICEWAY_TLS": "true"}).tls
    bad = parser.parse_args(["--tls-cert", str(certs.client("admin").certificate)])
    with pytest.raises(ValueError, match="--tls-cert needs SLUICEWAY_TLS_KEY"):
        TransportSecurity.from_arguments(bad, {})
    missing = parser.parse_args(["--token-file", str(tmp_path / "none")])
    with pytest.raises(ValueError, match="--token-file: token file"):
        TransportSecurity.from_arguments(missing, {})


# --- handshakes ----------------------------------------------------------------------------------


def test_tls_channel_trusting_the_dev_ca(certs: DevCertificates, tls_port: int) -> None:
    security = TransportSecurity(ca_file=str(certs.ca.certificate), token="t0k")
    assert _whoami(security, f"localhost:{tls_port}") == "-|Bearer t0k"
    assert _whoami(security, f"127.0.0.1:{tls_port}") == "-|Bearer t0k"


def test_tls_channel_without_the_ca_is_refused(tls_port: int) -> None:
    # The system's CAs do not know the development CA.
    with pytest.raises(grpc.RpcError) as failure:
        _whoami(TransportSecurity(tls=True), f"localhost:{tls_port}")
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_plaintext_channel_cannot_talk_to_a_tls_server(tls_port: int) -> None:
    with pytest.raises(grpc.RpcError):
        _whoami(TransportSecurity(), f"localhost:{tls_port}")


def test_mutual_tls_presents_the_client_certificate(certs: DevCertificates, mtls_port: int) -> None:
    viewer = certs.client("viewer")
    security = TransportSecurity(
        ca_file=str(certs.ca.certificate), cert_file=str(viewer.certificate), key_file=str(viewer.key)
    )
    assert _whoami(security, f"localhost:{mtls_port}") == "viewer|-"


def test_mutual_tls_without_a_client_certificate_is_refused(certs: DevCertificates, mtls_port: int) -> None:
    with pytest.raises(grpc.RpcError) as failure:
        _whoami(TransportSecurity(ca_file=str(certs.ca.certificate)), f"localhost:{mtls_port}")
    assert failure.value.code() == grpc.StatusCode.UNAVAILABLE


def test_replicas_present_the_server_certificate_to_each_other(
    certs: DevCertificates, mtls_port: int
) -> None:
    security = TransportSecurity(
        ca_file=str(certs.ca.certificate),
        cert_file=str(certs.server.certificate),
        key_file=str(certs.server.key),
    )
    assert _whoami(security, f"127.0.0.1:{mtls_port}") == "sluiceway-replica|-"


def test_aio_channel(certs: DevCertificates, mtls_port: int) -> None:
    admin = certs.client("admin")
    security = TransportSecurity(
        ca_file=str(certs.ca.certificate),
        cert_file=str(admin.certificate),
        key_file=str(admin.key),
        token="a",
    )

    async def scenario() -> Any:
        async with security.aio_channel(f"localhost:{mtls_port}") as channel:
            call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary(_METHOD)
            return await call(b"", timeout=10, metadata=security.metadata())

    assert asyncio.run(scenario()) == b"admin|Bearer a"
