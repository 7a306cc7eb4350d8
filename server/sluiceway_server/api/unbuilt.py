"""TopicService until its issue builds it (KIP-558 active topics): every method answers
UNIMPLEMENTED with an ErrorInfo, as every error of the API does, rather than gRPC's bare default."""

from __future__ import annotations

from typing import Any, NoReturn

import grpc

from sluiceway.api.v1 import topics_pb2_grpc
from sluiceway_server.api.errors import mapped
from sluiceway_server.herder.errors import UnimplementedError

Context = grpc.aio.ServicerContext[Any, Any]


def _not_built(method: str, feature: str) -> NoReturn:
    raise UnimplementedError(f"{method} is not built yet ({feature})", metadata={"method": method})


class UnbuiltTopicServicer(topics_pb2_grpc.TopicServiceServicer):
    """Answers every TopicService call UNIMPLEMENTED, with ErrorInfo."""

    @mapped
    async def GetActiveTopics(self, request: Any, context: Context) -> Any:
        _not_built("GetActiveTopics", "KIP-558 active topics")

    @mapped
    async def ResetActiveTopics(self, request: Any, context: Context) -> Any:
        _not_built("ResetActiveTopics", "KIP-558 active topics")
