"""Where a replica finds its tasks' progress (rate and lag) for GetConnectorStatus and GetTaskStatus.

Executors report it to the leader with each heartbeat, and the leader alone holds it (in memory:
it is a measurement, not state, and is never written to the status topic). A follower asks the
leader for the connector's status with a short deadline, marked as forwarded so the leader does not
ask on in turn, and takes the progress from the answer; when the leader cannot answer in time the
status goes out without progress rather than late.

Threading: coroutines on the control plane's event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Final

import grpc

from sluiceway.api.v1 import common_pb2, connectors_pb2, connectors_pb2_grpc
from sluiceway_server.api.forwarding import LeaderChannels, is_forwarded, leader_query_metadata
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.cluster.leadership import Leadership
from sluiceway_server.cluster.members import task_progress

__all__ = ["ProgressSource", "with_progress"]

log = logging.getLogger(__name__)

# A status read waits this long at most for the leader's part.
_LEADER_QUERY_SECONDS: Final = 1.0


class ProgressSource:
    """The progress of a connector's tasks, by task name, as this replica can learn it now."""

    def __init__(
        self,
        leadership: Leadership,
        coordinator: Callable[[], ExecutorCoordinator | None],
        channels: LeaderChannels,
    ) -> None:
        self._leadership = leadership
        self._coordinator = coordinator
        self._channels = channels

    async def of(
        self, connector: str, context: grpc.aio.ServicerContext[Any, Any]
    ) -> dict[str, common_pb2.TaskProgress]:
        coordinator = self._coordinator()
        if coordinator is not None:
            return task_progress(coordinator.executors(), connector)
        leader = self._leadership.leader()
        if leader is None or is_forwarded(context):
            return {}
        stub = connectors_pb2_grpc.ConnectorServiceStub(self._channels.channel(leader.address))
        try:
            answer: connectors_pb2.ConnectorStatus = await stub.GetConnectorStatus(
                connectors_pb2.GetConnectorStatusRequest(name=f"connectors/{connector}"),
                timeout=_LEADER_QUERY_SECONDS,
                metadata=leader_query_metadata(self._channels, self._leadership.member_id),
            )
        except grpc.aio.AioRpcError as exc:
            log.info(
                "the leader at %s did not give %s's progress: %s", leader.address, connector, exc.code().name
            )
            return {}
        return {task.name: task.progress for task in answer.tasks if task.HasField("progress")}


def with_progress(
    tasks: Iterable[connectors_pb2.TaskStatus], progress: dict[str, common_pb2.TaskProgress]
) -> None:
    """Sets each of ``tasks`` (TaskStatus messages) its progress, where there is one."""
    for task in tasks:
        found = progress.get(task.name)
        if found is not None:
            task.progress.CopyFrom(found)
