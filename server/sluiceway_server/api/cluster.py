"""ClusterService: who this replica is, who leads, the members, the leader's executors, and this
replica's log levels."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import grpc

import sluiceway
from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc
from sluiceway.errors import FieldViolation, Reason
from sluiceway_server.api.convert import timestamp
from sluiceway_server.api.errors import mapped
from sluiceway_server.api.forwarding import LeaderChannels, is_forwarded, leader_query_metadata
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.cluster.leadership import Leadership
from sluiceway_server.errors import InvalidArgumentError, NotFoundError
from sluiceway_server.herder.herder import Herder
from sluiceway_server.log_levels import LoggerLevel, LogLevelError, LogLevels, UnknownLoggerError

log = logging.getLogger(__name__)

# A follower asks the leader for its executors within this time, else answers without them.
_LEADER_QUERY_SECONDS = 2.0


class ClusterServicer(cluster_pb2_grpc.ClusterServiceServicer):
    """ClusterService on a control-plane replica: `GetServerInfo`, and the log levels of this
    replica's own loggers (`ListLoggers`, `GetLogger`, `SetLoggerLevel`: log_levels.py).

    Owns the facts fixed at start-up (Kafka cluster id, group id); the rest is read at each call:
    the leader from this replica's Leadership, the members from the cluster topic (replicas whose
    record is fresher than `member_max_age_ms`, and always this one), the executors from the
    leader's coordinator. A follower asks the leader for them with a short deadline (marked as
    forwarded); if the leader cannot answer, the list is empty.

    Threading: a coroutine on the control plane's event loop.
    """

    def __init__(
        self,
        herder: Herder,
        leadership: Leadership,
        coordinator: Callable[[], ExecutorCoordinator | None],
        channels: LeaderChannels,
        *,
        kafka_cluster_id: str,
        group_id: str,
        member_max_age_ms: int,
    ) -> None:
        self.herder = herder
        self.leadership = leadership
        self._coordinator = coordinator
        self._channels = channels
        self.kafka_cluster_id = kafka_cluster_id
        self.group_id = group_id
        self.member_max_age_ms = member_max_age_ms
        self.log_levels = LogLevels()

    @mapped
    async def GetServerInfo(
        self, request: cluster_pb2.GetServerInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.ServerInfo:
        leadership = self.leadership
        leader = leadership.leader()
        me = cluster_pb2.Member(id=leadership.member_id, advertised_address=leadership.address)
        members = {
            m.id: cluster_pb2.Member(id=m.id, advertised_address=m.address)
            for m in leadership.members(self.member_max_age_ms)
        }
        members[me.id] = me
        leader_member: cluster_pb2.Member | None = None
        if leader is not None:
            leader_member = members.setdefault(
                leader.id, cluster_pb2.Member(id=leader.id, advertised_address=leader.address)
            )
            leader_member.leader = True
            leader_member.leader_epoch = leader.epoch
        info = cluster_pb2.ServerInfo(
            version=sluiceway.__version__,
            kafka_cluster_id=self.kafka_cluster_id,
            group_id=self.group_id,
            this_replica=me,
            members=[members[k] for k in sorted(members)],
            config_position=self.herder.snapshot().position,
        )
        if leader_member is not None:
            info.leader.CopyFrom(leader_member)
        coordinator = self._coordinator()
        if coordinator is not None:
            info.executors.extend(self._executors(coordinator))
        elif leader is not None and not is_forwarded(context):
            info.executors.extend(await self._leader_executors(leader.address))
        return info

    @mapped
    async def ListLoggers(
        self, request: cluster_pb2.ListLoggersRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.ListLoggersResponse:
        return cluster_pb2.ListLoggersResponse(loggers=[_logger(e) for e in self.log_levels.all()])

    @mapped
    async def GetLogger(
        self, request: cluster_pb2.GetLoggerRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.Logger:
        try:
            return _logger(self.log_levels.get(request.name))
        except UnknownLoggerError as exc:
            raise NotFoundError(
                str(exc), reason=Reason.LOGGER_NOT_FOUND, metadata={"logger": request.name}
            ) from None

    @mapped
    async def SetLoggerLevel(
        self, request: cluster_pb2.SetLoggerLevelRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.SetLoggerLevelResponse:
        try:
            changed = self.log_levels.set(request.name, request.level)
        except LogLevelError as exc:
            field = "level" if request.name and request.name == request.name.strip() else "name"
            raise InvalidArgumentError(
                str(exc), reason=Reason.INVALID_REQUEST, violations=[FieldViolation(field, str(exc))]
            ) from None
        log.info("log level of %s set to %s (%s)", request.name, request.level.upper(), ", ".join(changed))
        return cluster_pb2.SetLoggerLevelResponse(loggers=changed)

    @staticmethod
    def _executors(coordinator: ExecutorCoordinator) -> list[cluster_pb2.ExecutorInfo]:
        return [
            cluster_pb2.ExecutorInfo(
                id=m.id,
                host=m.host,
                spark_remote=m.spark_remote,
                version=m.version,
                attach_time=timestamp(int(m.attach_time * 1000)),
                last_heartbeat_time=timestamp(
                    int((time.time() - (time.monotonic() - m.last_heartbeat)) * 1000)
                ),
                tasks=sorted(t.name for t in m.owned),
                metrics_url=m.metrics_url,
            )
            for m in coordinator.executors()
        ]

    async def _leader_executors(self, address: str) -> list[cluster_pb2.ExecutorInfo]:
        stub = cluster_pb2_grpc.ClusterServiceStub(self._channels.channel(address))
        try:
            answer: cluster_pb2.ServerInfo = await stub.GetServerInfo(
                cluster_pb2.GetServerInfoRequest(),
                timeout=_LEADER_QUERY_SECONDS,
                metadata=leader_query_metadata(self._channels, self.leadership.member_id),
            )
        except grpc.aio.AioRpcError as exc:
            log.info("the leader at %s did not list its executors: %s", address, exc.code().name)
            return []
        return list(answer.executors)


def _logger(entry: LoggerLevel) -> cluster_pb2.Logger:
    logger = cluster_pb2.Logger(name=entry.name, level=entry.level)
    if entry.last_modified_ms is not None:
        logger.last_modified.CopyFrom(timestamp(entry.last_modified_ms))
    return logger
