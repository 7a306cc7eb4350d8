"""The private way in for the REST layer (rest/), so that an HTTP request meets the same
authentication, roles, forwarding and audit as a gRPC call.

The REST layer calls its own replica's gRPC API over a Unix socket in a directory only this
process's user can enter, and each call carries a secret made at start-up. What the HTTP caller
presented comes along: its bearer token as the usual `authorization` entry, or the identities of its
client certificate (subject, URI SANs) under the keys below, which api/auth.py then treats as if the
certificate had been shown on a gRPC connection. Those keys are believed only from a call on the
socket with the secret, and are never passed on to another replica."""

from __future__ import annotations

import hmac
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "GATEWAY_CERT_SUBJECT",
    "GATEWAY_CERT_URI",
    "GATEWAY_KEYS",
    "GATEWAY_PEER",
    "GATEWAY_SECRET",
    "GatewaySocket",
    "GatewayTrust",
]

GATEWAY_SECRET: Final = "sluiceway-gateway-secret"
# The HTTP caller's certificate subject (in the form gRPC reports `x509_subject`) and URI SANs.
GATEWAY_CERT_SUBJECT: Final = "sluiceway-gateway-cert-subject"
GATEWAY_CERT_URI: Final = "sluiceway-gateway-cert-uri"
# The HTTP caller's address, for the audit log.
GATEWAY_PEER: Final = "sluiceway-gateway-peer"
GATEWAY_KEYS: Final = frozenset({GATEWAY_SECRET, GATEWAY_CERT_SUBJECT, GATEWAY_CERT_URI, GATEWAY_PEER})


@dataclass
class GatewaySocket:
    """The socket's path (in a fresh 0700 directory) and the secret of this process's gateway."""

    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sluiceway-rest-")))
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))

    @property
    def path(self) -> Path:
        return self.directory / "grpc.sock"

    @property
    def target(self) -> str:
        return f"unix:{self.path}"

    def trust(self) -> GatewayTrust:
        return GatewayTrust(self.secret)

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def check_private(self) -> None:
        # mkdtemp makes the directory 0700; refuse to go on if something else made it wider.
        mode = os.stat(self.directory).st_mode & 0o077
        if mode:
            raise RuntimeError(f"{self.directory} is open to other users (mode {oct(mode)})")


@dataclass(frozen=True)
class GatewayTrust:
    """What api/auth.py needs to know a call from the REST layer: its secret."""

    secret: str

    def is_gateway(self, peer: str, metadata: Sequence[tuple[str, str | bytes]]) -> bool:
        """Whether the call came over the gateway's Unix socket with the secret."""
        if not peer.startswith("unix:"):
            return False
        sent = [str(v) for k, v in metadata if k == GATEWAY_SECRET]
        return len(sent) == 1 and hmac.compare_digest(sent[0].encode(), self.secret.encode())
