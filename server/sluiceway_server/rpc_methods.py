"""Every RPC the control plane serves, sorted by the `method_policy` option each one carries in the
protos (protos/sluiceway/api/v1/annotations.proto): which calls are reads, which are mutations, and
which role a caller needs for each. These sets are built once, at import, from the generated
descriptors; nothing in the server lists RPCs by hand.

Forwarding (api/forwarding.py), the audit log (api/auth.py) and the role grants
(security/access.py) all take their sets from here. This module imports only generated code, so
api/ and security/ can both depend on it without depending on each other.

An RPC whose option is missing, or whose kind or role is unspecified, falls into none of the sets:
it is not forwarded, and with authentication on no role may call it.
tests/unit/server/test_rpc_methods.py fails for such an RPC."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor

from sluiceway.api.v1 import (
    annotations_pb2,
    cluster_pb2,
    connectors_pb2,
    executor_pb2,
    offsets_pb2,
    plugins_pb2,
    topics_pb2,
)

__all__ = [
    "ADMIN_CALLS",
    "AUDITED",
    "EXECUTOR_CALLS",
    "LEADER_ONLY",
    "METHODS",
    "MUTATIONS",
    "OPERATOR_CALLS",
    "READS",
    "REPLICA_LOCAL",
    "VIEWER_CALLS",
    "method_path",
    "policy",
]

# The generated modules that define services; the test checks that none is missing.
_SERVICE_MODULES: Final = (connectors_pb2, plugins_pb2, offsets_pb2, topics_pb2, cluster_pb2, executor_pb2)


def method_path(service: ServiceDescriptor, name: str) -> str:
    """`/package.Service/Method`: how gRPC names the method in a call."""
    return f"/{service.full_name}/{service.methods_by_name[name].name}"


def policy(method: MethodDescriptor) -> annotations_pb2.MethodPolicy:
    """The method's `method_policy` option; without one, a policy whose kind and role are both
    unspecified."""
    return method.GetOptions().Extensions[annotations_pb2.method_policy]


def _methods() -> dict[str, MethodDescriptor]:
    return {
        method_path(service, method.name): method
        for module in _SERVICE_MODULES
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }


# Each method's descriptor by its path.
METHODS: Final[Mapping[str, MethodDescriptor]] = MappingProxyType(_methods())


def _kind(kind: annotations_pb2.MethodKind.ValueType) -> frozenset[str]:
    return frozenset(path for path, method in METHODS.items() if policy(method).kind == kind)


def _role(role: annotations_pb2.Role.ValueType) -> frozenset[str]:
    return frozenset(path for path, method in METHODS.items() if policy(method).role == role)


# Answered by whichever replica receives the call.
READS: Final = _kind(annotations_pb2.METHOD_KIND_READ)
# Carried out by the leader; a replica that does not lead forwards them.
MUTATIONS: Final = _kind(annotations_pb2.METHOD_KIND_MUTATION)
# Served by the leader alone and never forwarded (the executors' attach stream).
LEADER_ONLY: Final = _kind(annotations_pb2.METHOD_KIND_LEADER_ONLY)
# Change only the replica that receives them (its log levels): never forwarded.
REPLICA_LOCAL: Final = _kind(annotations_pb2.METHOD_KIND_REPLICA_LOCAL)
# Every call that changes something, which the audit log records: mutations where they are
# carried out (the leader), replica-local changes where they arrive.
AUDITED: Final = MUTATIONS | REPLICA_LOCAL

# The calls that need exactly this role (the ranking of roles is security/access.py's business).
VIEWER_CALLS: Final = _role(annotations_pb2.ROLE_VIEWER)
OPERATOR_CALLS: Final = _role(annotations_pb2.ROLE_OPERATOR)
ADMIN_CALLS: Final = _role(annotations_pb2.ROLE_ADMIN)
EXECUTOR_CALLS: Final = _role(annotations_pb2.ROLE_EXECUTOR)
