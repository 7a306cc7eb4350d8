"""What each role may call. Each RPC names the role it needs in the protos (its `method_policy`
option, read by rpc_methods.py); this module ranks the roles. A viewer makes the viewer's calls, an
operator those and the operator's, an admin all three sets; an executor only attaches, and a
replica has the viewer's calls. A method in no set (its role unspecified) is refused to everyone
but the open ones."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from sluiceway.api.v1 import executor_pb2
from sluiceway_server.rpc_methods import (
    ADMIN_CALLS,
    EXECUTOR_CALLS,
    OPERATOR_CALLS,
    VIEWER_CALLS,
    method_path,
)
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
# Named on its own because authentication treats it apart (api/auth.py: loopback only when off).
ATTACH: Final = method_path(executor_pb2.DESCRIPTOR.services_by_name["ExecutorService"], "Attach")

_VIEWER: Final = VIEWER_CALLS | REFLECTION
_GRANTS: Final[Mapping[Role, frozenset[str]]] = MappingProxyType(
    {
        Role.VIEWER: _VIEWER,
        # Running connectors: pausing, resuming, stopping, restarting; offsets and active topics.
        Role.OPERATOR: _VIEWER | OPERATOR_CALLS,
        # Defining connectors: creating, changing configs, deleting.
        Role.ADMIN: _VIEWER | OPERATOR_CALLS | ADMIN_CALLS,
        Role.EXECUTOR: EXECUTOR_CALLS,
        # A replica reads from the leader (GetServerInfo) and passes mutations on; a forwarded
        # call is judged by the role of the caller it carries, not by this one.
        Role.REPLICA: _VIEWER,
    }
)


def allowed(role: Role, method: str) -> bool:
    return method in OPEN or method in _GRANTS[role]
