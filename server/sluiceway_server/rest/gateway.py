"""How the REST layer calls the gRPC API: over its replica's private gateway socket
(security/gateway.py), with the HTTP caller's credentials, each mutation under a fresh request id
that its retries share, and retried on UNAVAILABLE (between leaders) by the client library's own
retry policy.

A script talking to one replica reads its own writes: the gateway remembers the highest config
position an answer has carried and asks reads that take one (`min_config_position`) to wait until
this replica has applied it, so a GET right after a POST finds the connector it created."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc
from google.protobuf.message import Message

from sluiceway.api.v1 import (
    cluster_pb2_grpc,
    connectors_pb2_grpc,
    offsets_pb2_grpc,
    plugins_pb2_grpc,
    topics_pb2_grpc,
)
from sluiceway.client._retry import Retrier, RetryPolicy
from sluiceway.common.limits import SERVER_MAX_RECEIVE_BYTES
from sluiceway.common.transport import AUTHORIZATION_KEY
from sluiceway_server.security.gateway import (
    GATEWAY_CERT_SUBJECT,
    GATEWAY_CERT_URI,
    GATEWAY_PEER,
    GATEWAY_SECRET,
    GatewaySocket,
)

__all__ = ["Caller", "GrpcGateway"]

_Resp = TypeVar("_Resp", bound=Message)
_MAX_PAGE: Final = 1000


@dataclass(frozen=True)
class Caller:
    """What the HTTP caller presented: an Authorization header, and the identities of its client
    certificate when the listener asked for one; `peer` is its address."""

    peer: str
    authorization: str | None = None
    cert_subject: str | None = None
    cert_uris: tuple[str, ...] = ()

    def metadata(self, secret: str) -> tuple[tuple[str, str], ...]:
        entries = [(GATEWAY_SECRET, secret), (GATEWAY_PEER, self.peer)]
        if self.authorization is not None:
            entries.append((AUTHORIZATION_KEY, self.authorization))
        if self.cert_subject is not None:
            entries.append((GATEWAY_CERT_SUBJECT, self.cert_subject))
        entries.extend((GATEWAY_CERT_URI, uri) for uri in self.cert_uris)
        return tuple(entries)


class GrpcGateway:
    """Typed stubs of the public services on the gateway channel, and `call` to use them.

    Threading: coroutines on the control plane's event loop; the remembered config position is a
    plain int changed only there."""

    def __init__(self, socket: GatewaySocket, timeout: float) -> None:
        self._secret = socket.secret
        self._timeout = timeout
        self._channel = grpc.aio.insecure_channel(
            socket.target, options=[("grpc.max_receive_message_length", SERVER_MAX_RECEIVE_BYTES)]
        )
        self.connectors = connectors_pb2_grpc.ConnectorServiceStub(self._channel)
        self.plugins = plugins_pb2_grpc.PluginServiceStub(self._channel)
        self.offsets = offsets_pb2_grpc.OffsetServiceStub(self._channel)
        self.topics = topics_pb2_grpc.TopicServiceStub(self._channel)
        self.cluster = cluster_pb2_grpc.ClusterServiceStub(self._channel)
        self._retrier = Retrier(RetryPolicy())
        self._position = 0

    async def close(self) -> None:
        await self._channel.close()

    async def call(
        self, method: grpc.aio.UnaryUnaryMultiCallable[Any, _Resp], request: Message, caller: Caller
    ) -> _Resp:
        """One call, retried within `request.timeout.ms`; raises SluicewayError."""
        fields = request.DESCRIPTOR.fields_by_name
        settable: Any = request
        if "request_id" in fields and not settable.request_id:
            # The id every retry of this request shares, so the leader acts on it once.
            settable.request_id = str(uuid.uuid4())
        if "min_config_position" in fields:
            settable.min_config_position = self._position
        metadata = caller.metadata(self._secret)

        async def invoke(attempt_timeout: float | None) -> _Resp:
            return await method(request, timeout=attempt_timeout, metadata=metadata)

        response = await self._retrier.call_async(self._timeout, invoke)
        self._note_position(response)
        return response

    async def pages(
        self,
        method: grpc.aio.UnaryUnaryMultiCallable[Any, _Resp],
        request: Message,
        caller: Caller,
        items: Callable[[_Resp], list[Any]],
    ) -> AsyncIterator[Any]:
        """Every item of a List call, page after page."""
        paged: Any = request
        paged.page_size = _MAX_PAGE
        while True:
            page = await self.call(method, paged, caller)
            for item in items(page):
                yield item
            token = getattr(page, "next_page_token", "")
            if not token:
                return
            paged.page_token = token

    def _note_position(self, response: Message) -> None:
        position = getattr(response, "config_position", 0)
        connector = getattr(response, "connector", None)
        if isinstance(connector, Message):
            position = max(position, getattr(connector, "config_position", 0))
        if isinstance(position, int) and position > self._position:
            self._position = position
