"""Authentication and authorization of every call, and the audit log of mutations: two server
interceptors. `AuthInterceptor` is the outermost: before any handler runs (forwarding included) it
finds the caller's principal and checks its role for the method. `AuditInterceptor` is the
innermost: it wraps only the servicers this replica runs itself, so a mutation is audited once, by
the replica that carries it out (the leader), with the principal the call came from.

A replica that forwards a call passes on the caller's principal and role in metadata
(`sluiceway-principal`, `sluiceway-role`) and authenticates as itself; those keys are believed only
from a caller with the `replica` role, and refused from anyone else."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import grpc
from google.protobuf.message import DecodeError

from sluiceway_server.api.errors import status_for
from sluiceway_server.api.forwarding import (
    FORWARDED_BY,
    FORWARDED_PRINCIPAL,
    FORWARDED_ROLE,
    MUTATION_REQUESTS,
)
from sluiceway_server.api.wrapping import call_outcome, wrap_handler
from sluiceway_server.errors import PermissionDeniedError, ServerError, UnauthenticatedError
from sluiceway_server.rpc_methods import AUDITED
from sluiceway_server.security.access import ATTACH, OPEN, allowed
from sluiceway_server.security.audit import AuditLog
from sluiceway_server.security.certificates import describe_identity
from sluiceway_server.security.gateway import (
    GATEWAY_CERT_SUBJECT,
    GATEWAY_CERT_URI,
    GATEWAY_PEER,
    GatewayTrust,
)
from sluiceway_server.security.principals import (
    ANONYMOUS,
    AmbiguousCertificateError,
    Principal,
    Role,
    TokensFile,
    current_principal,
)
from sluiceway_server.security.setup import is_loopback_host

log = logging.getLogger(__name__)

__all__ = [
    "AuditInterceptor",
    "AuthInterceptor",
    "Authenticator",
]

_BEARER: Final = "bearer "

if TYPE_CHECKING:  # generic only in the stubs
    MethodHandler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]


def _is_loopback(peer: str) -> bool:
    """Whether a gRPC peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`, `unix:…`) is local."""
    kind, _, rest = peer.partition(":")
    return kind == "unix" or is_loopback_host(rest.rsplit(":", 1)[0])


def _certificate_identity(
    context: Context, metadata: Metadata, from_gateway: bool
) -> tuple[str | None, list[str]]:
    """The client certificate's subject (None without a certificate) and URI SANs. `peer_uri` holds
    only the URI SANs; `x509_subject_alternative_name` mixes them with DNS names and addresses, and
    `peer_spiffe_id` is left out when a certificate has more than one URI SAN. A call from the REST
    layer carries those of the certificate its HTTP caller showed (security/gateway.py)."""
    if from_gateway:
        subject = next((str(v) for k, v in metadata if k == GATEWAY_CERT_SUBJECT), None)
        return subject, [str(v) for k, v in metadata if k == GATEWAY_CERT_URI]
    auth = context.auth_context()
    subjects = list(auth.get("x509_subject") or [])
    subject = subjects[0].decode("utf-8", errors="replace") if subjects else None
    return subject, [uri.decode("utf-8", errors="replace") for uri in auth.get("peer_uri") or []]


class Authenticator:
    """Finds and checks the principal of a call. Without a tokens file authentication is off:
    every caller is `anonymous` with every right, except that an executor may attach only from
    this host (an executor elsewhere must authenticate, as it receives connector configs)."""

    def __init__(self, tokens: TokensFile | None, gateway: GatewayTrust | None = None) -> None:
        self._tokens = tokens
        # Set when the REST API is on: how to know its calls (security/gateway.py).
        self._gateway = gateway

    @property
    def enabled(self) -> bool:
        return self._tokens is not None

    def identify(self, method: str, metadata: Metadata, context: Context) -> Principal:
        """Who the call comes from; raises UnauthenticatedError (or PermissionDeniedError for an
        unauthenticated executor on another host, or a caller passing on an identity it may not)."""
        if self._tokens is None:
            if method == ATTACH and not _is_loopback(context.peer()):
                raise PermissionDeniedError(
                    "Executors on other hosts must authenticate: set auth.tokens.file on the control "
                    "plane and give the executor a token with the executor role",
                    metadata={"method": method},
                )
            return ANONYMOUS
        from_gateway = self._gateway is not None and self._gateway.is_gateway(context.peer(), metadata)
        return self._forwarded(self._authenticate(self._tokens, metadata, context, from_gateway), metadata)

    def authorize(self, principal: Principal, method: str) -> None:
        """Raises PermissionDeniedError unless the principal's role may call `method`."""
        if self._tokens is not None and not allowed(principal.role, method):
            raise PermissionDeniedError(
                f"{principal.name} (role {principal.role.value}) may not call {method.rsplit('/', 1)[-1]}",
                metadata={"principal": principal.name, "role": principal.role.value, "method": method},
            )

    @staticmethod
    def _authenticate(
        tokens: TokensFile, metadata: Metadata, context: Context, from_gateway: bool = False
    ) -> Principal:
        authorization = [str(v) for k, v in metadata if k == "authorization"]
        if authorization:
            value = authorization[0]
            if len(authorization) > 1 or not value.lower().startswith(_BEARER):
                raise UnauthenticatedError("Send one `authorization: Bearer <token>` header")
            found = tokens.by_token(value[len(_BEARER) :].strip())
            if found is None:
                raise UnauthenticatedError("The bearer token is not valid")
            return found
        subject, uris = _certificate_identity(context, metadata, from_gateway)
        if subject is not None or uris:
            try:
                found = tokens.by_certificate_identity(subject, uris)
            except AmbiguousCertificateError as exc:
                raise UnauthenticatedError(str(exc), metadata={"uris": ",".join(uris)}) from None
            if found is None:
                raise UnauthenticatedError(
                    f"No principal in the tokens file for the client certificate with "
                    f"{describe_identity(subject, uris)}",
                    metadata={"subject": subject or "", "uris": ",".join(uris)},
                )
            return found
        raise UnauthenticatedError("This server needs credentials: a bearer token or a client certificate")

    @staticmethod
    def _forwarded(caller: Principal, metadata: Metadata) -> Principal:
        name = next((str(v) for k, v in metadata if k == FORWARDED_PRINCIPAL), None)
        role = next((str(v) for k, v in metadata if k == FORWARDED_ROLE), None)
        if name is None and role is None:
            return caller
        if caller.role is not Role.REPLICA or not any(k == FORWARDED_BY for k, _ in metadata):
            raise PermissionDeniedError(
                f"Only a replica may pass on another caller's identity; {caller.name} is not one",
                metadata={"principal": caller.name},
            )
        try:
            forwarded_role = Role(role or "")
        except ValueError:
            raise PermissionDeniedError(f"A forwarded call names an unknown role {role!r}") from None
        return Principal(name or "", forwarded_role, "forwarded")


def _ignore(*_: object) -> None:
    return None


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Admits each call (module docstring); the principal is in `current_principal` for the
    handler, the forwarding and the audit log. A refused mutation is audited here, as it never
    reaches the audit interceptor."""

    def __init__(self, authenticator: Authenticator, audit: AuditLog) -> None:
        self._authenticator = authenticator
        self._audit = audit

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method in OPEN:
            return handler
        metadata = tuple(details.invocation_metadata or ())
        authenticator = self._authenticator
        audit = self._audit

        async def admit(request: Any, context: Context) -> None:
            principal: Principal | None = None
            try:
                principal = authenticator.identify(method, metadata, context)
                authenticator.authorize(principal, method)
            except ServerError as exc:
                log.info("refused %s from %s: %s", method, _peer(context, metadata), exc.message)
                status = status_for(exc)
                if method in AUDITED:
                    audit.record(
                        principal,
                        method,
                        _connector_of(request, method),
                        status.code.name,
                        _peer(context, metadata),
                    )
                await context.abort_with_status(status)
                raise AssertionError("abort_with_status returned") from None  # pragma: no cover
            current_principal.set(principal)

        return wrap_handler(handler, admit, _ignore)


def _peer(context: Context, metadata: Metadata) -> str:
    """The caller's address for logs and the audit line: a REST caller's own, not the gateway's socket."""
    peer: str = context.peer()
    if peer.startswith("unix:"):
        return next((str(v) for k, v in metadata if k == GATEWAY_PEER), peer)
    return peer


def _connector_of(request: Any, method: str = "") -> str:
    """The connector a mutation's request names (`connectors/{c}`, `connectors/{c}/tasks/{t}` or a
    create's connector_id); empty when it names none. A call this replica forwards is still bytes."""
    if isinstance(request, bytes) and method in MUTATION_REQUESTS:
        try:
            request = MUTATION_REQUESTS[method].FromString(request)
        except DecodeError:
            return ""
    for field in ("name", "parent"):
        value = getattr(request, field, "")
        if isinstance(value, str) and value.startswith("connectors/"):
            return value.split("/")[1]
    connector_id = getattr(request, "connector_id", "")
    return connector_id if isinstance(connector_id, str) else ""


class AuditInterceptor(grpc.aio.ServerInterceptor):
    """Writes one audit line for each mutation this replica carries out itself."""

    def __init__(self, audit: AuditLog) -> None:
        self._audit = audit

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method not in AUDITED:
            return handler
        audit = self._audit
        metadata = tuple(details.invocation_metadata or ())

        async def nothing(request: Any, context: Context) -> None:
            return None

        def record(request: Any, context: Context, error: BaseException | None) -> None:
            outcome = call_outcome(context, error)
            audit.record(
                current_principal.get(), method, _connector_of(request), outcome, _peer(context, metadata)
            )

        return wrap_handler(handler, nothing, record)
