"""Principals, their roles, and the tokens file that maps credentials to them.

The tokens file has one entry per line, `role token principal`, with `#` comments and blank lines
ignored. The token is the bearer token as the caller sends it, or `sha256:` and the hex SHA-256 of
it (so the file need not hold the token itself), or `-` for a principal that authenticates only by
its client certificate (mTLS). The principal is the rest of the line and may hold spaces.

A `-` principal names a certificate in one of two ways:

- a URI (a scheme followed by `://`, e.g. `spiffe://example.org/ns/prod/sa/deployer`): a
  certificate carrying that URI subject alternative name, compared exactly. Service meshes (Istio,
  Linkerd, SPIRE) issue such certificates, often with an empty subject;
- anything else: the certificate's subject, written as gRPC reports it (`CN=executor-1,O=Example`,
  see certificates.py); a name without `=` stands for `CN=name`.

Precedence: the URI SANs are looked up first, the subject only when none of them is listed. A
certificate whose URI SANs name two different principals is refused (AmbiguousCertificateError)
rather than given one of them, since the order of SANs in a certificate means nothing.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = [
    "ANONYMOUS",
    "MIN_TOKEN_LENGTH",
    "AmbiguousCertificateError",
    "Principal",
    "Role",
    "TokensFile",
    "TokensFileError",
    "current_principal",
    "is_uri_principal",
    "token_digest",
]

# A literal token shorter than this is refused: it could be guessed.
MIN_TOKEN_LENGTH: Final = 16
_SHA256_PREFIX: Final = "sha256:"
CERTIFICATE_ONLY: Final = "-"
# A principal name that starts with a URI scheme and `://` names a URI SAN (RFC 3986 scheme syntax).
_URI_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class Role(enum.Enum):
    """What a principal may do (security/access.py lists the calls of each)."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"
    EXECUTOR = "executor"
    REPLICA = "replica"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. `via` says how: `token`, `certificate`, `forwarded` (a replica
    passed on the call of a caller it authenticated) or `none` (authentication is off)."""

    name: str
    role: Role
    via: str


# Every caller while authentication is off.
ANONYMOUS: Final = Principal("anonymous", Role.ADMIN, "none")


class TokensFileError(ValueError):
    """The tokens file cannot be read or has a bad line; the message names the line."""


class AmbiguousCertificateError(ValueError):
    """A client certificate's URI SANs name more than one principal; the message names them."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _subject(name: str) -> str:
    return name if "=" in name else f"CN={name}"


def is_uri_principal(name: str) -> bool:
    """Whether a `-` principal names a URI SAN rather than a subject."""
    return _URI_SCHEME.match(name) is not None


@dataclass(frozen=True)
class TokensFile:
    """The parsed tokens file: token digests, certificate subjects and certificate URI SANs, each to
    its principal. Read once at start; immutable."""

    by_digest: dict[str, Principal]
    by_subject: dict[str, Principal]
    by_uri: dict[str, Principal] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> TokensFile:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokensFileError(f"cannot read the tokens file {path}: {exc}") from exc
        return cls.parse(text.splitlines(), str(path))

    @classmethod
    def parse(cls, lines: Iterable[str], source: str = "tokens file") -> TokensFile:
        by_digest: dict[str, Principal] = {}
        by_subject: dict[str, Principal] = {}
        by_uri: dict[str, Principal] = {}
        roles: dict[str, Role] = {}
        for number, raw in enumerate(lines, start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            where = f"{source} line {number}"
            if len(parts) != 3:
                raise TokensFileError(f"{where}: expected `role token principal`")
            role_name, token, name = parts
            try:
                role = Role(role_name.lower())
            except ValueError:
                allowed = ", ".join(r.value for r in Role)
                raise TokensFileError(f"{where}: unknown role {role_name!r} (one of {allowed})") from None
            if roles.setdefault(name, role) is not role:
                raise TokensFileError(f"{where}: principal {name!r} is listed with two roles")
            if token == CERTIFICATE_ONLY:
                principal = Principal(name, role, "certificate")
                if not is_uri_principal(name):
                    by_subject[_subject(name)] = principal
                elif any(c.isspace() for c in name):
                    raise TokensFileError(f"{where}: the URI {name!r} holds a space")
                else:
                    by_uri[name] = principal
                continue
            if token.startswith(_SHA256_PREFIX):
                digest = token[len(_SHA256_PREFIX) :].lower()
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    raise TokensFileError(f"{where}: a sha256: token needs 64 hex digits")
            elif len(token) < MIN_TOKEN_LENGTH:
                raise TokensFileError(f"{where}: a token needs at least {MIN_TOKEN_LENGTH} characters")
            else:
                digest = token_digest(token)
            if digest in by_digest:
                raise TokensFileError(f"{where}: the same token is listed twice")
            by_digest[digest] = Principal(name, role, "token")
        return cls(by_digest, by_subject, by_uri)

    def by_token(self, token: str) -> Principal | None:
        # Looked up by digest: what the lookup's timing could reveal is about the digest, not the token.
        return self.by_digest.get(token_digest(token))

    def by_certificate(self, subject: str) -> Principal | None:
        return self.by_subject.get(subject)

    def by_certificate_identity(self, subject: str | None, uris: Sequence[str]) -> Principal | None:
        """The principal of a client certificate with this subject (as gRPC writes it; None or ""
        for none) and these URI SANs: by URI SAN first, then by subject (module docstring); None
        when neither is listed. Raises AmbiguousCertificateError when the URI SANs name two
        principals. For gRPC calls and, through certificates.peer_certificate_identity, for other
        TLS listeners."""
        found = list(dict.fromkeys(p for uri in uris if (p := self.by_uri.get(uri)) is not None))
        if len(found) > 1:
            raise AmbiguousCertificateError(
                "The client certificate's URI SANs name several principals: "
                + ", ".join(p.name for p in found)
            )
        if found:
            return found[0]
        return self.by_subject.get(subject) if subject else None


# The caller of the call being served, set by the authentication interceptor (api/auth.py) before
# any handler runs; forwarding and the audit log read it.
current_principal: ContextVar[Principal] = ContextVar("sluiceway_principal", default=ANONYMOUS)
