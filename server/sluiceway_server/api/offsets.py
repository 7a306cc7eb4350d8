"""OffsetService (KIP-875): translation only; the herder's OffsetManager does the work."""

from __future__ import annotations

from typing import Any

import grpc

from sluiceway.api.v1 import offsets_pb2, offsets_pb2_grpc
from sluiceway.common.offsets import offsets_from_proto, offsets_to_proto
from sluiceway_server.api.deadline import call_timeout
from sluiceway_server.api.errors import mapped
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.api.names import connector_name, format_connector
from sluiceway_server.herder.deadlines import with_deadline
from sluiceway_server.herder.offsets import OffsetManager

Context = grpc.aio.ServicerContext[Any, Any]


class OffsetServicer(offsets_pb2_grpc.OffsetServiceServicer):
    """OffsetService on the control plane.

    Owns only the deadline of calls that come without one (`request.timeout.ms`) and shares the
    connector service's `RequestIdCache`, so an alter or reset retried with the same `request_id`
    is answered once. Every method is a coroutine on the control plane's event loop; the work runs
    in the OffsetManager within the caller's remaining time, and DEADLINE_EXCEEDED names the stage
    it was in. An alter whose `offsets` have the wrong shape for the connector's type is refused
    INVALID_ARGUMENT with a field violation per problem (`offsets[2].partition.fields["kafka_topic"]`)
    before anything is asked of the connector or written.
    """

    def __init__(self, offsets: OffsetManager, request_ids: RequestIdCache, default_timeout: float) -> None:
        self.offsets = offsets
        self.request_ids = request_ids
        self.default_timeout = default_timeout

    @mapped
    async def GetConnectorOffsets(
        self, request: offsets_pb2.GetConnectorOffsetsRequest, context: Context
    ) -> offsets_pb2.ConnectorOffsets:
        name = connector_name(request.name)
        pairs = await with_deadline(self.offsets.get(name), call_timeout(context, self.default_timeout))
        return offsets_pb2.ConnectorOffsets(name=format_connector(name), offsets=offsets_to_proto(pairs))

    @mapped
    async def AlterConnectorOffsets(
        self, request: offsets_pb2.AlterConnectorOffsetsRequest, context: Context
    ) -> offsets_pb2.AlterConnectorOffsetsResponse:
        name = connector_name(request.name)
        pairs = offsets_from_proto(request.offsets)

        async def call() -> offsets_pb2.AlterConnectorOffsetsResponse:
            change = await with_deadline(
                self.offsets.alter(name, pairs), call_timeout(context, self.default_timeout)
            )
            return offsets_pb2.AlterConnectorOffsetsResponse(
                message=change.message, connector_acknowledged=change.acknowledged
            )

        return await self.request_ids.run("AlterConnectorOffsets", request, call)

    @mapped
    async def ResetConnectorOffsets(
        self, request: offsets_pb2.ResetConnectorOffsetsRequest, context: Context
    ) -> offsets_pb2.ResetConnectorOffsetsResponse:
        name = connector_name(request.name)

        async def call() -> offsets_pb2.ResetConnectorOffsetsResponse:
            change = await with_deadline(
                self.offsets.reset(name), call_timeout(context, self.default_timeout)
            )
            return offsets_pb2.ResetConnectorOffsetsResponse(
                message=change.message, connector_acknowledged=change.acknowledged
            )

        return await self.request_ids.run("ResetConnectorOffsets", request, call)
