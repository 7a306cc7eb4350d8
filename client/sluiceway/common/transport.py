"""How a gRPC client reaches a Sluiceway control plane securely: TLS, mutual TLS and a bearer token.

    security = TransportSecurity.from_env()  # $SLUICEWAY_TLS_CA, $SLUICEWAY_TOKEN, ...
    channel = security.channel("sluiceway.example:8083")
    stub.GetServerInfo(request, metadata=security.metadata())

The same settings serve the client library, the CLI, executors and control-plane replicas
talking to each other. Environment variables:

    SLUICEWAY_TLS         true: use TLS (trusting the system's CAs unless SLUICEWAY_TLS_CA is set)
    SLUICEWAY_TLS_CA      PEM file of the CA certificates that sign the server's certificate
    SLUICEWAY_TLS_CERT    PEM client certificate chain for mutual TLS (needs SLUICEWAY_TLS_KEY)
    SLUICEWAY_TLS_KEY     PEM private key of that certificate (needs SLUICEWAY_TLS_CERT)
    SLUICEWAY_TOKEN       bearer token sent as `authorization: Bearer <token>` on every call
    SLUICEWAY_TOKEN_FILE  a file holding that token (surrounding whitespace is ignored)

Setting any of the three file variables turns TLS on as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import grpc

__all__ = [
    "AUTHORIZATION_KEY",
    "CA_ENV",
    "CERT_ENV",
    "KEY_ENV",
    "TLS_ENV",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "TransportSecurity",
    "add_arguments",
    "own_connections",
]

TLS_ENV: Final = "SLUICEWAY_TLS"
CA_ENV: Final = "SLUICEWAY_TLS_CA"
CERT_ENV: Final = "SLUICEWAY_TLS_CERT"
KEY_ENV: Final = "SLUICEWAY_TLS_KEY"
TOKEN_ENV: Final = "SLUICEWAY_TOKEN"
TOKEN_FILE_ENV: Final = "SLUICEWAY_TOKEN_FILE"

AUTHORIZATION_KEY: Final = "authorization"
_TRUE: Final = frozenset({"true", "1", "yes", "on"})
_FALSE: Final = frozenset({"false", "0", "no", "off"})
# A token larger than this is certainly a wrong file (a certificate, a log...), not a token.
_MAX_TOKEN_BYTES: Final = 16 * 1024

# Which setting each field came from, for error messages: the parameter name by default.
_FIELD_LABELS: Final[Mapping[str, str]] = {
    "tls": "tls",
    "ca_file": "ca_file",
    "cert_file": "cert_file",
    "key_file": "key_file",
    "token": "token",
    "token_file": "token_file",
}
_ENV_NAMES: Final[Mapping[str, str]] = {
    "tls": TLS_ENV,
    "ca_file": CA_ENV,
    "cert_file": CERT_ENV,
    "key_file": KEY_ENV,
    "token": TOKEN_ENV,
    "token_file": TOKEN_FILE_ENV,
}
# The command-line flags add_arguments defines, named in errors about values they gave.
_FLAG_LABELS: Final[Mapping[str, str]] = {
    "tls": "--tls",
    "ca_file": "--tls-ca",
    "cert_file": "--tls-cert",
    "key_file": "--tls-key",
    "token": "--token",
    "token_file": "--token-file",
}


@dataclasses.dataclass(frozen=True)
class TransportSecurity:
    """TLS and bearer-token settings of a client channel.

    `tls` asks for TLS; it is also implied by any of the three files. `ca_file` holds the CA
    certificates trusted for the server's certificate (the system's CAs without it);
    `cert_file` and `key_file` are the client's own certificate chain and private key for
    mutual TLS and go together. `token` is sent as a bearer token on every call. The files
    are read each time credentials are built, so renewed certificates are picked up by new
    channels.
    """

    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    token: str | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file", "token"):
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)
        _check_pair(self.cert_file, self.key_file, _FIELD_LABELS)
        if self.token is not None:
            _check_token(self.token, "token")

    def __repr__(self) -> str:
        token = "'[hidden]'" if self.token is not None else "None"
        return (
            f"TransportSecurity(tls={self.tls}, ca_file={self.ca_file!r}, cert_file={self.cert_file!r}, "
            f"key_file={self.key_file!r}, token={token})"
        )

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        tls: bool | None = None,
        ca_file: str | os.PathLike[str] | None = None,
        cert_file: str | os.PathLike[str] | None = None,
        key_file: str | os.PathLike[str] | None = None,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
    ) -> TransportSecurity:
        """Settings from the SLUICEWAY_TLS* and SLUICEWAY_TOKEN* variables of `env`
        (default: the process environment), each overridden by the argument of the same
        meaning when that is not None. `token` and `token_file` are one setting: an explicit
        one of them replaces both variables. Files are checked now, so a wrong path fails
        here with a ValueError naming the setting rather than at the first call."""
        explicit: dict[str, object] = {
            "tls": tls,
            "ca_file": ca_file,
            "cert_file": cert_file,
            "key_file": key_file,
            "token": token,
            "token_file": token_file,
        }
        return _resolve(os.environ if env is None else env, explicit, _FIELD_LABELS)

    @classmethod
    def from_arguments(
        cls, args: argparse.Namespace, env: Mapping[str, str] | None = None
    ) -> TransportSecurity:
        """Settings from the flags `add_arguments` defined (which win) and the environment;
        errors name the flag or variable that gave the bad value."""
        explicit: dict[str, object] = {
            "tls": True if getattr(args, "tls", False) else None,
            "ca_file": getattr(args, "tls_ca", None),
            "cert_file": getattr(args, "tls_cert", None),
            "key_file": getattr(args, "tls_key", None),
            "token": getattr(args, "token", None),
            "token_file": getattr(args, "token_file", None),
        }
        return _resolve(os.environ if env is None else env, explicit, _FLAG_LABELS)

    @property
    def uses_tls(self) -> bool:
        """True when the channel is a TLS one: `tls` was asked for, or a CA, client
        certificate or key was given."""
        return self.tls or any(path is not None for path in (self.ca_file, self.cert_file, self.key_file))

    @property
    def mutual_tls(self) -> bool:
        """True when the client presents its own certificate."""
        return self.cert_file is not None

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """The TLS credentials of a channel (None for a plaintext one), read from the files now."""
        if not self.uses_tls:
            return None
        _check_pair(self.cert_file, self.key_file, _FIELD_LABELS)
        root = _read_pem(self.ca_file, "ca_file") if self.ca_file is not None else None
        key = _read_pem(self.key_file, "key_file") if self.key_file is not None else None
        chain = _read_pem(self.cert_file, "cert_file") if self.cert_file is not None else None
        return grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """The call metadata carrying the token: `authorization: Bearer <token>`, or nothing."""
        if self.token is None:
            return ()
        return ((AUTHORIZATION_KEY, f"Bearer {self.token}"),)

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A blocking channel to `address` (`host:port`), over TLS when `uses_tls`. The token is
        not attached by the channel: pass `metadata()` with each call."""
        credentials = self.channel_credentials()
        if credentials is None:
            return grpc.insecure_channel(address, options=list(options))
        return grpc.secure_channel(address, credentials, options=own_connections(options))

    def aio_channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
        """The asyncio counterpart of `channel`; create it inside the event loop that uses it."""
        credentials = self.channel_credentials()
        if credentials is None:
            return grpc.aio.insecure_channel(address, options=list(options))
        return grpc.aio.secure_channel(address, credentials, options=own_connections(options))


def own_connections(options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """`options` plus the one that keeps a channel's connections to itself. gRPC otherwise shares
    connections between channels of one process to the same address, and a channel could send
    its calls over a connection another channel opened with a different client certificate,
    as that principal."""
    return [*options, ("grpc.use_local_subchannel_pool", 1)]


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, suppress: bool = False
) -> None:
    """Adds --tls, --tls-ca, --tls-cert, --tls-key, --token and --token-file, read back by
    `TransportSecurity.from_arguments`. With `suppress`, unset flags leave no attribute (for
    options repeated on subcommands)."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    parser.add_argument(
        "--tls",
        action="store_true",
        default=default(False),
        help=f"connect over TLS, trusting the system's CAs unless --tls-ca is given (env: {TLS_ENV}=true)",
    )
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        default=default(None),
        help=f"PEM CA certificates that sign the server's certificate; implies --tls (env: {CA_ENV})",
    )
    parser.add_argument(
        "--tls-cert",
        metavar="FILE",
        default=default(None),
        help=f"PEM client certificate for mutual TLS, with --tls-key (env: {CERT_ENV})",
    )
    parser.add_argument(
        "--tls-key",
        metavar="FILE",
        default=default(None),
        help=f"PEM private key of --tls-cert (env: {KEY_ENV})",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=default(None),
        help=f"bearer token sent with every call (env: {TOKEN_ENV}); "
        "other users can see command lines, so prefer --token-file",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        default=default(None),
        help=f"file holding the bearer token (env: {TOKEN_FILE_ENV})",
    )


def _resolve(
    env: Mapping[str, str], explicit: Mapping[str, object], labels: Mapping[str, str]
) -> TransportSecurity:
    def pick(name: str) -> tuple[str | None, str]:
        """A path setting's value and the name of the flag, argument or variable it came from."""
        given = _path(explicit[name])
        if given is not None:
            return given, labels[name]
        return env.get(_ENV_NAMES[name]) or None, _ENV_NAMES[name]

    explicit_tls = explicit["tls"]
    tls = bool(explicit_tls) if explicit_tls is not None else _parse_bool(env.get(TLS_ENV, ""), TLS_ENV)
    ca_file, ca_label = pick("ca_file")
    cert_file, cert_label = pick("cert_file")
    key_file, key_label = pick("key_file")
    _check_pair(cert_file, key_file, {"cert_file": cert_label, "key_file": key_label})
    for path, label in ((ca_file, ca_label), (cert_file, cert_label), (key_file, key_label)):
        if path is not None:
            _read_pem(path, label)
    token = _pick_token(env, explicit, labels)
    return TransportSecurity(tls=tls, ca_file=ca_file, cert_file=cert_file, key_file=key_file, token=token)


def _pick_token(
    env: Mapping[str, str], explicit: Mapping[str, object], labels: Mapping[str, str]
) -> str | None:
    token = explicit["token"]
    token_file = _path(explicit["token_file"])
    if token and token_file:
        raise ValueError(
            f"{labels['token']} and {labels['token_file']} both give the token: pass one of them"
        )
    if token:
        return _check_token(str(token), labels["token"])
    if token_file is not None:
        return _read_token(token_file, labels["token_file"])
    env_token = env.get(TOKEN_ENV) or None
    env_file = env.get(TOKEN_FILE_ENV) or None
    if env_token is not None and env_file is not None:
        raise ValueError(f"{TOKEN_ENV} and {TOKEN_FILE_ENV} are both set: set one of them")
    if env_token is not None:
        return _check_token(env_token, TOKEN_ENV)
    if env_file is not None:
        return _read_token(env_file, TOKEN_FILE_ENV)
    return None


def _path(value: object) -> str | None:
    """An explicit path argument as a string; None or an empty string means "not given"."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        return os.fspath(value) or None
    raise TypeError(f"expected a path, got {type(value).__name__}")


def _parse_bool(text: str, label: str) -> bool:
    value = text.strip().lower()
    if not value or value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise ValueError(f"{label} must be true or false, got {text!r}")


def _check_pair(cert_file: str | None, key_file: str | None, labels: Mapping[str, str]) -> None:
    if cert_file is not None and key_file is None:
        raise ValueError(
            f"{labels['cert_file']} needs {labels['key_file']}: "
            "a client certificate is useless without its private key"
        )
    if key_file is not None and cert_file is None:
        raise ValueError(
            f"{labels['key_file']} needs {labels['cert_file']}: a private key alone proves nothing"
        )


def _read_file(path: str, label: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{label}: {what} {path!r} does not exist") from None
    except IsADirectoryError:
        raise ValueError(f"{label}: {what} {path!r} is a directory, not a file") from None
    except PermissionError:
        raise ValueError(f"{label}: {what} {path!r} is not readable by this user") from None
    except OSError as exc:
        raise ValueError(f"{label}: cannot read {what} {path!r}: {exc.strerror or exc}") from None


def _read_pem(path: str, label: str) -> bytes:
    data = _read_file(path, label, "PEM file")
    if b"-----BEGIN " not in data:
        raise ValueError(f"{label}: {path!r} is not a PEM file (no '-----BEGIN' line)")
    return data


def _read_token(path: str, label: str) -> str:
    data = _read_file(path, label, "token file")
    if len(data) > _MAX_TOKEN_BYTES:
        raise ValueError(f"{label}: token file {path!r} is {len(data)} bytes; a token is one short line")
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise ValueError(f"{label}: token file {path!r} holds non-ASCII bytes") from None
    if not text:
        raise ValueError(f"{label}: token file {path!r} is empty")
    return _check_token(text, f"{label} ({path})")


def _check_token(token: str, label: str) -> str:
    # HTTP/2 header values: visible ASCII; a space or newline means a wrong value or file.
    if not token:
        raise ValueError(f"{label}: the token is empty")
    if not all("!" <= char <= "~" for char in token):
        raise ValueError(
            f"{label}: a token is one word of visible ASCII characters (no spaces or line breaks)"
        )
    return token
