"""The CLI's TLS and token options (--tls, --tls-ca, --tls-cert, --tls-key, --token, --token-file and
their SLUICEWAY_* variables) against the fake control plane over mutual TLS, and how it reports
UNAUTHENTICATED, PERMISSION_DENIED and TLS connection failures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.cli.main import build_parser, main
from sluiceway_server.dev_certificates import DevCertificates, make_dev_certificates
from tests.unit.client.fake_control_plane import Served, rich_status, serve


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(tmp_path_factory.mktemp("cli-certs"), ("admin",))


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


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("TLS", "TLS_CA", "TLS_CERT", "TLS_KEY", "TOKEN", "TOKEN_FILE"):
        monkeypatch.delenv(f"SLUICEWAY_{name}", raising=False)
    return monkeypatch


def _mtls_flags(certs: DevCertificates) -> list[str]:
    admin = certs.client("admin")
    return [
        "--tls-ca",
        str(certs.ca.certificate),
        "--tls-cert",
        str(admin.certificate),
        "--tls-key",
        str(admin.key),
    ]


def _authorization(served: Served) -> list[str | None]:
    return [attempt.metadata.get("authorization") for attempt in served.fake.attempts_of("GetServerInfo")]


def test_flags_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--tls", "--tls-ca", "ca.pem", "--token-file", "t", "cluster", "info"])
    after = parser.parse_args(["cluster", "info", "--tls", "--tls-ca=ca.pem", "--token-file", "t"])
    for args in (before, after):
        assert (args.tls, args.tls_ca, args.token_file) == (True, "ca.pem", "t")
    defaults = parser.parse_args(["cluster", "info"])
    assert (defaults.tls, defaults.tls_ca, defaults.tls_cert, defaults.tls_key) == (False, None, None, None)
    assert (defaults.token, defaults.token_file) == (None, None)


def test_mutual_tls_and_token_file_from_flags(
    certs: DevCertificates, mtls_served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("cli-token\n")
    argv = [
        "--server",
        mtls_served.target,
        *_mtls_flags(certs),
        "--token-file",
        str(token_file),
        "cluster",
        "info",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    assert "Leader:" in capsys.readouterr().out
    assert _authorization(mtls_served) == ["Bearer cli-token"]


def test_environment_variables_and_flags_win(
    certs: DevCertificates,
    mtls_served: Served,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = certs.client("admin")
    clean_env.setenv("SLUICEWAY_SERVER", mtls_served.target)
    clean_env.setenv("SLUICEWAY_TLS_CA", str(certs.ca.certificate))
    clean_env.setenv("SLUICEWAY_TLS_CERT", str(admin.certificate))
    clean_env.setenv("SLUICEWAY_TLS_KEY", str(admin.key))
    clean_env.setenv("SLUICEWAY_TOKEN", "env-token")
    assert main(["cluster", "info"]) == 0, capsys.readouterr().err
    assert main(["cluster", "info", "--token", "flag-token"]) == 0, capsys.readouterr().err
    assert _authorization(mtls_served) == ["Bearer env-token", "Bearer flag-token"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--tls-ca", "/nonexistent/ca.pem"], "--tls-ca: PEM file '/nonexistent/ca.pem' does not exist"),
        (["--tls-key", "/nonexistent/k.key"], "--tls-key needs SLUICEWAY_TLS_CERT"),
        (["--token", "a b"], "--token: a token is one word"),
        (["--token", "a", "--token-file", "f"], "--token and --token-file both give the token"),
    ],
)
def test_bad_settings_are_usage_errors(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--server", "127.0.0.1:1", *flags, "cluster", "info"]) == 2
    err = capsys.readouterr().err
    assert "usage:" in err
    assert message in err


def test_bad_environment_names_the_variable(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("SLUICEWAY_TLS", "sometimes")
    assert main(["--server", "127.0.0.1:1", "cluster", "info"]) == 2
    assert "SLUICEWAY_TLS must be true or false" in capsys.readouterr().err


def test_unauthenticated_is_one_line(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    served.fake.fail(
        "GetServerInfo",
        rich_status(grpc.StatusCode.UNAUTHENTICATED, "The bearer token is not valid", "UNAUTHENTICATED"),
    )
    assert main(["--server", served.target, "--token", "wrong", "cluster", "info"]) == 1
    assert capsys.readouterr().err == "error: UNAUTHENTICATED: The bearer token is not valid\n"
    served.fake.fail(
        "GetServerInfo",
        rich_status(grpc.StatusCode.UNAUTHENTICATED, "This server needs credentials", "UNAUTHENTICATED"),
    )
    assert main(["--server", served.target, "cluster", "info"]) == 1
    assert capsys.readouterr().err == (
        "error: UNAUTHENTICATED: This server needs credentials "
        "(no credentials were sent: pass --token-file, --token or --tls-cert/--tls-key)\n"
    )


def test_permission_denied_is_one_line(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    served.fake.fail(
        "GetServerInfo",
        rich_status(
            grpc.StatusCode.PERMISSION_DENIED,
            "bob (role viewer) may not call GetServerInfo",
            "NOT_AUTHORIZED",
            metadata={"principal": "bob", "role": "viewer"},
        ),
    )
    assert main(["--server", served.target, "--token", "bob", "cluster", "info"]) == 1
    assert capsys.readouterr().err == (
        "error: PERMISSION_DENIED NOT_AUTHORIZED: bob (role viewer) may not call GetServerInfo\n"
    )


def test_plaintext_against_a_tls_server_suggests_tls(
    mtls_served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--server", mtls_served.target, "--timeout", "1", "cluster", "info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: UNAVAILABLE: ")
    assert "if the server uses TLS, pass --tls-ca or --tls" in err


def test_missing_client_certificate_is_suggested(
    certs: DevCertificates, mtls_served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--server", mtls_served.target, "--tls-ca", str(certs.ca.certificate), "--timeout", "1"]
    assert main([*argv, "cluster", "info"]) == 1
    assert "pass --tls-cert and --tls-key" in capsys.readouterr().err


def test_untrusted_server_certificate_is_explained(
    mtls_served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--server", mtls_served.target, "--tls", "--timeout", "1", "cluster", "info"]) == 1
    assert "the TLS handshake with" in capsys.readouterr().err


def test_tls_against_a_plaintext_server_is_explained(
    certs: DevCertificates, served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--server", served.target, "--tls-ca", str(certs.ca.certificate), "--timeout", "1"]
    assert main([*argv, "cluster", "info"]) == 1
    assert "does not answer over TLS" in capsys.readouterr().err


def test_delegated_commands_refuse_tls_flags_before_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--tls", "executor"]) == 2
    assert main(["--tls-ca=ca.pem", "dev"]) == 2
    assert "takes no sluiceway options before it" in capsys.readouterr().err
