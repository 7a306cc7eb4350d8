"""The one place where a follower hands mutations to the leader: a server interceptor in front of
every servicer. A mutation that reaches a replica which does not lead is sent on, as the caller's
serialized bytes, to the leader with the caller's metadata, remaining deadline and a marker naming
this replica; the leader's answer (or status, with its details) goes back unchanged. Reads are
always answered where they arrive. Which calls are mutations is stated on each RPC in the protos
(rpc_methods.py reads it from there).

A call that carries the marker is never forwarded again: landing on a replica that does not lead
(the leader changed while it travelled) it fails UNAVAILABLE, and the caller's client retries.
With no leader known, mutations fail UNAVAILABLE with RetryInfo."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias

import grpc
from google.protobuf import message_factory
from google.protobuf.message import Message

from sluiceway.common.tracing import TRACE_CONTEXT_KEYS, inject_context
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import Reason
from sluiceway_server.api.errors import status_for
from sluiceway_server.errors import UnavailableError
from sluiceway_server.metrics import ControlPlaneMetrics
from sluiceway_server.rpc_methods import METHODS, MUTATIONS
from sluiceway_server.security.gateway import GATEWAY_KEYS
from sluiceway_server.security.principals import Principal, current_principal

log = logging.getLogger(__name__)

# Metadata that marks a forwarded call; its value is the forwarding replica's id.
FORWARDED_BY: Final = "sluiceway-forwarded-by"
# The principal and role of the caller a forwarded call came from (believed only from a replica).
FORWARDED_PRINCIPAL: Final = "sluiceway-principal"
FORWARDED_ROLE: Final = "sluiceway-role"
# Seconds a client is asked to wait before retrying while no leader is known.
NO_LEADER_RETRY_SECONDS: Final = 0.5


def _mutation_types(output: bool) -> dict[str, type[Message]]:
    types: dict[str, type[Message]] = {}
    for path in sorted(MUTATIONS):
        method = METHODS[path]
        if output:
            types[method.name] = message_factory.GetMessageClass(method.output_type)
        else:
            types[path] = message_factory.GetMessageClass(method.input_type)
    return types


# Each mutation's response class by method name, to read a recorded answer back (idempotency.py).
MUTATION_RESPONSES: Final = _mutation_types(output=True)
# Each mutation's request class by method path: a forwarded call is bytes, the audit log reads it.
MUTATION_REQUESTS: Final = _mutation_types(output=False)

# Metadata gRPC sets itself, which would confuse the next hop, and the caller's credentials and
# claimed identity: the forwarding replica authenticates as itself and states whom it authenticated.
# The REST gateway's keys (its secret above all) stay on this replica.
_NOT_PASSED_ON: Final = frozenset(
    {
        "user-agent",
        "grpc-accept-encoding",
        "grpc-encoding",
        "grpc-timeout",
        "authorization",
        FORWARDED_PRINCIPAL,
        FORWARDED_ROLE,
        *GATEWAY_KEYS,
    }
)


class LeaderDirectory(Protocol):
    """Who leads, as forwarding needs it (cluster/leadership.py)."""

    member_id: str

    @property
    def leading(self) -> bool: ...

    def leader_address(self) -> str | None: ...


class LeaderChannels(Protocol):
    def channel(self, address: str) -> grpc.aio.Channel: ...

    @property
    def credentials(self) -> tuple[tuple[str, str], ...]:
        """Metadata that authenticates this replica to another (empty without a token)."""
        ...


def is_forwarded(context: grpc.aio.ServicerContext[Any, Any]) -> bool:
    """Whether another replica passed this call on (it then carries FORWARDED_BY)."""
    return any(key == FORWARDED_BY for key, _ in (context.invocation_metadata() or ()))


def leader_query_metadata(channels: LeaderChannels, member_id: str) -> tuple[tuple[str, str], ...]:
    """The metadata of a read this replica sends the leader on its own behalf (a status's progress,
    the executors it holds): this replica's credentials, and the marker that keeps the leader from
    asking anyone in turn."""
    return (*channels.credentials, (FORWARDED_BY, member_id))


def forwarded_identity(principal: Principal) -> tuple[tuple[str, str], ...]:
    """What a forwarding replica adds to the call it passes on."""
    return ((FORWARDED_PRINCIPAL, principal.name), (FORWARDED_ROLE, principal.role.value))


def not_leader(message: str) -> UnavailableError:
    return UnavailableError(message, reason=Reason.NOT_LEADER, retry_after=NO_LEADER_RETRY_SECONDS)


def no_leader() -> UnavailableError:
    return UnavailableError(
        "No leader is known; the control-plane cluster is electing one. Retry shortly",
        reason=Reason.NO_LEADER,
        retry_after=NO_LEADER_RETRY_SECONDS,
    )


if TYPE_CHECKING:  # generic only in the stubs
    MethodHandler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
Handler = Callable[[bytes, grpc.aio.ServicerContext[Any, Any]], Awaitable[bytes]]


class ForwardingInterceptor(grpc.aio.ServerInterceptor):
    """Sends mutations received by a follower to the leader (module docstring).

    Decides at dispatch: whether this replica leads, and which replica does, are read once per call.
    The directory is given after construction (`use`), since the gRPC server needs its interceptors
    before the replica knows its own address; until then every mutation answers NO_LEADER.
    """

    def __init__(self, channels: LeaderChannels, metrics: ControlPlaneMetrics | None = None) -> None:
        self._directory: LeaderDirectory | None = None
        self._channels = channels
        self._metrics = metrics

    def use(self, directory: LeaderDirectory) -> None:
        self._directory = directory

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        method: str = details.method
        directory = self._directory
        if method not in MUTATIONS or (directory is not None and directory.leading):
            return await continuation(details)
        metadata = tuple(details.invocation_metadata or ())
        forwarded_by = next((str(v) for k, v in metadata if k == FORWARDED_BY), None)
        if forwarded_by is not None:
            return _failing(
                not_leader(f"This replica does not lead; {method} was forwarded by {forwarded_by}")
            )
        address = None if directory is None else directory.leader_address()
        if directory is None or address is None:
            return _failing(no_leader())
        kept = [(k, v) for k, v in metadata if k not in _NOT_PASSED_ON and not k.startswith(":")]
        passed_on = (*kept, *self._channels.credentials, (FORWARDED_BY, directory.member_id))
        return grpc.unary_unary_rpc_method_handler(self._forwarder(method, address, passed_on))

    def _forwarder(self, method: str, address: str, passed_on: tuple[tuple[str, Any], ...]) -> Handler:

        async def forward(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            call: grpc.aio.UnaryUnaryMultiCallable[bytes, bytes] = self._channels.channel(
                address
            ).unary_unary(method)
            # The authentication interceptor admitted the caller before this runs.
            identity = forwarded_identity(current_principal.get())
            metadata = (*passed_on, *identity)
            traced = inject_context()  # this replica's span of the call becomes the leader's parent
            if traced:
                metadata = (*(pair for pair in metadata if pair[0] not in TRACE_CONTEXT_KEYS), *traced)
            began = time.monotonic()
            try:
                response: bytes = await call(request, timeout=context.time_remaining(), metadata=metadata)
            except grpc.aio.AioRpcError as exc:
                self._measure(method, exc.code().name, began)
                if exc.code() == grpc.StatusCode.UNAVAILABLE and not exc.trailing_metadata():
                    # The leader did not answer at all: it may be going away.
                    log.info("forwarding %s to the leader at %s failed: %s", method, address, exc.details())
                    await context.abort_with_status(
                        status_for(not_leader(f"The leader at {address} could not be reached; retry shortly"))
                    )
                await context.abort(exc.code(), exc.details() or "", tuple(exc.trailing_metadata() or ()))
            self._measure(method, "OK", began)
            return response

        return forward

    def _measure(self, method: str, code: str, began: float) -> None:
        if self._metrics is not None:
            name = method.rsplit("/", 1)[-1]
            self._metrics.forwarded.labels(name, code).inc()
            self._metrics.forwarding_seconds.labels(name).observe(time.monotonic() - began)


def _failing(error: UnavailableError) -> MethodHandler:
    async def fail(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        await context.abort_with_status(status_for(error))
        raise AssertionError("abort_with_status returned")  # pragma: no cover

    return grpc.unary_unary_rpc_method_handler(fail)


class ChannelPool:
    """One channel per leader address, kept open: leaders are few, and a call in flight to an
    earlier leader must not lose its channel when the leader changes. `security` is how this
    replica reaches the others (TLS, its certificate, its token)."""

    def __init__(
        self, options: list[tuple[str, Any]] | None = None, security: TransportSecurity | None = None
    ) -> None:
        self._options = options or []
        self._security = security or TransportSecurity()
        self._channels: dict[str, grpc.aio.Channel] = {}

    @property
    def credentials(self) -> tuple[tuple[str, str], ...]:
        return self._security.metadata()

    def channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._security.aio_channel(address, self._options)
            self._channels[address] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
