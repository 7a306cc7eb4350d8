"""What each role may call. A role not listed for a method is refused it; methods missing from
every list (a service added without a decision here) are refused to everyone but the open ones."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from sluiceway.api.v1 import connectors_pb2, executor_pb2, offsets_pb2, topics_pb2
from sluiceway_server.api.forwarding import MUTATIONS, READS, method_path
from sluiceway_server.security.principals import Role

__all__ = ["ADMIN_CALLS", "ATTACH", "OPEN", "OPERATOR_CALLS", "REFLECTION", "allowed"]


# Answered to anyone, authenticated or not: load balancers and orchestrators probe them.
OPEN: Final = frozenset({"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"})
REFLECTION: Final = frozenset(
    {
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    }
)
ATTACH: Final = method_path(executor_pb2.DESCRIPTOR, "ExecutorService", "Attach")

# Running connectors: what an operator may do besides reading.
OPERATOR_CALLS: Final = frozenset(
    {
        *(
            method_path(connectors_pb2.DESCRIPTOR, "ConnectorService", name)
            for name in (
                "PauseConnector",
                "ResumeConnector",
                "StopConnector",
                "RestartConnector",
                "RestartTask",
            )
        ),
        method_path(offsets_pb2.DESCRIPTOR, "OffsetService", "AlterConnectorOffsets"),
        method_path(offsets_pb2.DESCRIPTOR, "OffsetService", "ResetConnectorOffsets"),
        method_path(topics_pb2.DESCRIPTOR, "TopicService", "ResetActiveTopics"),
    }
)
# Defining connectors: creating, changing configs, deleting.
ADMIN_CALLS: Final = MUTATIONS - OPERATOR_CALLS

_VIEWER: Final = READS | REFLECTION
_GRANTS: Final[Mapping[Role, frozenset[str]]] = MappingProxyType(
    {
        Role.VIEWER: _VIEWER,
        Role.OPERATOR: _VIEWER | OPERATOR_CALLS,
        Role.ADMIN: _VIEWER | OPERATOR_CALLS | ADMIN_CALLS,
        Role.EXECUTOR: frozenset({ATTACH}),
        # A replica reads from the leader (GetServerInfo) and passes mutations on; a forwarded
        # call is judged by the role of the caller it carries, not by this one.
        Role.REPLICA: _VIEWER,
    }
)


def allowed(role: Role, method: str) -> bool:
    return method in OPEN or method in _GRANTS[role]
