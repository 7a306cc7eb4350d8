"""Every RPC of the public API is either a mutation (forwarded to the leader) or a read (answered
where it arrives): a new RPC cannot slip past the forwarding layer unclassified."""

from __future__ import annotations

from sluiceway.api.v1 import cluster_pb2, connectors_pb2, offsets_pb2, plugins_pb2, topics_pb2
from sluiceway_server.api.forwarding import MUTATIONS, READS


def test_every_public_rpc_is_a_mutation_or_a_read() -> None:
    methods = {
        f"/{service.full_name}/{method.name}"
        for module in (connectors_pb2, offsets_pb2, topics_pb2, plugins_pb2, cluster_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    assert not MUTATIONS & READS
    assert methods == MUTATIONS | READS


def test_the_mutations_are_the_methods_that_change_state() -> None:
    names = {method.rsplit("/", 1)[1] for method in MUTATIONS}
    assert names == {
        "CreateConnector",
        "ReplaceConnectorConfig",
        "PatchConnectorConfig",
        "DeleteConnector",
        "PauseConnector",
        "ResumeConnector",
        "StopConnector",
        "RestartConnector",
        "RestartTask",
        "AlterConnectorOffsets",
        "ResetConnectorOffsets",
        "ResetActiveTopics",
    }
