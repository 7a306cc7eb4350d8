"""Each RPC says in the protos whether it reads or mutates and which role it needs (the
`method_policy` option of annotations.proto), and the server builds its sets from those options
(rpc_methods.py). The names written out below are the specification: an option changed in a proto
changes which calls are forwarded and who may make them, so it must change this file as well."""

from __future__ import annotations

import importlib
from pathlib import Path

from google.protobuf.descriptor import MethodDescriptor

from sluiceway.api.v1 import annotations_pb2
from sluiceway_server.api.forwarding import MUTATION_REQUESTS, MUTATION_RESPONSES
from sluiceway_server.rpc_methods import (
    ADMIN_CALLS,
    EXECUTOR_CALLS,
    LEADER_ONLY,
    METHODS,
    MUTATIONS,
    OPERATOR_CALLS,
    READS,
    REPLICA_LOCAL,
    VIEWER_CALLS,
    policy,
)
from sluiceway_server.security.access import ATTACH

PROTO_DIR = Path(__file__).resolve().parents[3] / "protos" / "sluiceway" / "api" / "v1"


def _protos_methods() -> dict[str, MethodDescriptor]:
    """Every method of every service in protos/, found from the .proto files themselves rather
    than from rpc_methods' own list of modules."""
    methods: dict[str, MethodDescriptor] = {}
    for proto in sorted(PROTO_DIR.glob("*.proto")):
        module = importlib.import_module(f"sluiceway.api.v1.{proto.stem}_pb2")
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                methods[f"/{service.full_name}/{method.name}"] = method
    return methods


def _paths(service: str, *names: str) -> set[str]:
    return {f"/sluiceway.api.v1.{service}/{name}" for name in names}


def test_every_rpc_states_its_kind_and_role() -> None:
    methods = _protos_methods()
    assert len(methods) > 20  # the walk found the services
    unclassified = sorted(
        path
        for path, method in methods.items()
        if policy(method).kind == annotations_pb2.METHOD_KIND_UNSPECIFIED
        or policy(method).role == annotations_pb2.ROLE_UNSPECIFIED
    )
    assert not unclassified, f"give these RPCs a (sluiceway.api.v1.method_policy) option: {unclassified}"


def test_the_server_classifies_every_rpc_of_the_protos() -> None:
    assert set(METHODS) == set(_protos_methods())
    kinds = (READS, MUTATIONS, LEADER_ONLY, REPLICA_LOCAL)
    assert sum(len(kind) for kind in kinds) == len(METHODS)
    assert set(METHODS) == READS | MUTATIONS | LEADER_ONLY | REPLICA_LOCAL
    assert _paths("ClusterService", "SetLoggerLevel") == REPLICA_LOCAL


def test_the_mutations() -> None:
    assert {
        *_paths(
            "ConnectorService",
            "CreateConnector",
            "ReplaceConnectorConfig",
            "PatchConnectorConfig",
            "DeleteConnector",
            "PauseConnector",
            "ResumeConnector",
            "StopConnector",
            "RestartConnector",
            "RestartTask",
        ),
        *_paths("OffsetService", "AlterConnectorOffsets", "ResetConnectorOffsets"),
        *_paths("TopicService", "ResetActiveTopics"),
    } == MUTATIONS
    assert set(MUTATION_REQUESTS) == MUTATIONS
    assert set(MUTATION_RESPONSES) == {path.rsplit("/", 1)[1] for path in MUTATIONS}


def test_the_reads() -> None:
    assert {
        *_paths(
            "ConnectorService",
            "GetConnector",
            "ListConnectors",
            "ListTasks",
            "GetConnectorStatus",
            "GetTaskStatus",
            "WatchStatus",
        ),
        *_paths("OffsetService", "GetConnectorOffsets"),
        *_paths("TopicService", "GetActiveTopics"),
        *_paths("PluginService", "ListPlugins", "GetPluginConfigDefinition", "ValidateConnectorConfig"),
        *_paths("ClusterService", "GetServerInfo", "ListLoggers", "GetLogger"),
    } == READS


def test_the_role_each_call_needs() -> None:
    assert VIEWER_CALLS == READS
    assert {
        *_paths(
            "ConnectorService",
            "PauseConnector",
            "ResumeConnector",
            "StopConnector",
            "RestartConnector",
            "RestartTask",
        ),
        *_paths("OffsetService", "AlterConnectorOffsets", "ResetConnectorOffsets"),
        *_paths("TopicService", "ResetActiveTopics"),
        *_paths("ClusterService", "SetLoggerLevel"),
    } == OPERATOR_CALLS
    admin = _paths(
        "ConnectorService",
        "CreateConnector",
        "ReplaceConnectorConfig",
        "PatchConnectorConfig",
        "DeleteConnector",
    )
    assert admin == ADMIN_CALLS
    assert ATTACH == "/sluiceway.api.v1.ExecutorService/Attach"
    assert EXECUTOR_CALLS == LEADER_ONLY == {ATTACH}
