"""TopicService (KIP-558): translation only; the herder's ActiveTopicTracker does the work."""

from __future__ import annotations

from typing import Any

import grpc

from sluiceway.api.v1 import topics_pb2, topics_pb2_grpc
from sluiceway_server.api.deadline import call_timeout
from sluiceway_server.api.errors import mapped
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.api.names import connector_name, format_connector
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.herder.deadlines import with_deadline

Context = grpc.aio.ServicerContext[Any, Any]


class TopicServicer(topics_pb2_grpc.TopicServiceServicer):
    """TopicService on the control plane. A reset retried with the same `request_id` is applied
    once (the connector service's `RequestIdCache`); it runs within the caller's remaining time, or
    `request.timeout.ms` for a call without a deadline."""

    def __init__(
        self, topics: ActiveTopicTracker, request_ids: RequestIdCache, default_timeout: float
    ) -> None:
        self.topics = topics
        self.request_ids = request_ids
        self.default_timeout = default_timeout

    @mapped
    async def GetActiveTopics(
        self, request: topics_pb2.GetActiveTopicsRequest, context: Context
    ) -> topics_pb2.ActiveTopics:
        view = self.topics.get(connector_name(request.name))
        return topics_pb2.ActiveTopics(
            name=format_connector(view.connector),
            topics=view.topics,
            connector_exists=view.connector_exists,
        )

    @mapped
    async def ResetActiveTopics(
        self, request: topics_pb2.ResetActiveTopicsRequest, context: Context
    ) -> topics_pb2.ResetActiveTopicsResponse:
        name = connector_name(request.name)

        async def call() -> topics_pb2.ResetActiveTopicsResponse:
            done = await with_deadline(self.topics.reset(name), call_timeout(context, self.default_timeout))
            return topics_pb2.ResetActiveTopicsResponse(
                name=format_connector(done.connector),
                removed_topics=sorted(done.removed),
                connector_exists=done.connector_exists,
            )

        return await self.request_ids.run("ResetActiveTopics", request, call)
