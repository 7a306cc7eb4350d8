"""ClusterService: who this replica is, who leads, which executors are attached."""

from __future__ import annotations

import time
from typing import Any

import grpc

import sluiceway
from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc
from sluiceway_server.api.convert import timestamp
from sluiceway_server.api.errors import mapped
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.herder.herder import Herder


class ClusterServicer(cluster_pb2_grpc.ClusterServiceServicer):
    """ClusterService on the control plane: `GetServerInfo`, which describes this process, the Kafka
    cluster it uses and the executors attached to it.

    Owns the facts fixed at start-up (Kafka cluster id, group id, advertised address); everything else
    is read from the Herder and the ExecutorCoordinator at each call.

    Threading: a coroutine on the control plane's event loop; it reads in-memory state only and never
    awaits, so each answer is one consistent reading of that state.

    Guarantees: leader election is not built, so this process always reports itself as the leader
    and the only member, with the Herder's generation as `leader_epoch`.
    """

    def __init__(
        self,
        herder: Herder,
        coordinator: ExecutorCoordinator,
        *,
        kafka_cluster_id: str,
        group_id: str,
        advertised_address: str,
    ) -> None:
        self.herder = herder
        self.coordinator = coordinator
        self.kafka_cluster_id = kafka_cluster_id
        self.group_id = group_id
        self.advertised_address = advertised_address

    @mapped
    async def GetServerInfo(
        self, request: cluster_pb2.GetServerInfoRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> cluster_pb2.ServerInfo:
        # Leader election is not built: the replica answering is the leader and the only member.
        me = cluster_pb2.Member(
            id=self.herder.worker_id,
            advertised_address=self.advertised_address,
            leader_epoch=self.herder.generation,
            leader=True,
        )
        return cluster_pb2.ServerInfo(
            version=sluiceway.__version__,
            kafka_cluster_id=self.kafka_cluster_id,
            group_id=self.group_id,
            this_replica=me,
            leader=me,
            members=[me],
            executors=[
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
                )
                for m in self.coordinator.executors()
            ],
            config_position=self.herder.snapshot().position,
        )
