"""PluginService, ClusterService, health, reflection and the not-yet-implemented services,
over the real socket."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from sluiceway.api.v1 import (
    cluster_pb2,
    executor_pb2,
    executor_pb2_grpc,
    plugins_pb2,
)
from tests.integration.api_helpers import Stubs, failure

pytestmark = pytest.mark.integration

BUILT_INS = {
    "DataGenSource": plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR,
    "FileStreamSource": plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR,
    "FileStreamSink": plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR,
    "SparkFileSink": plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR,
    "JdbcSource": plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR,
    "JdbcSink": plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR,
}


@pytest.fixture
def stubs(channel: grpc.Channel) -> Stubs:
    return Stubs.of(channel)


def test_list_plugins_has_every_built_in(stubs: Stubs) -> None:
    plugins = stubs.plugins.ListPlugins(plugins_pb2.ListPluginsRequest(), timeout=10).plugins
    by_alias = {alias: p for p in plugins for alias in p.aliases}
    for alias, kind in BUILT_INS.items():
        plugin = by_alias[alias]
        assert plugin.type == kind
        assert plugin.name == f"plugins/{plugin.class_name}"
        assert plugin.version
        assert f"{alias}Connector" in plugin.aliases


def test_all_types_lists_transforms_and_predicates_with_their_keys(stubs: Stubs) -> None:
    connectors = stubs.plugins.ListPlugins(plugins_pb2.ListPluginsRequest(), timeout=10).plugins
    everything = stubs.plugins.ListPlugins(
        plugins_pb2.ListPluginsRequest(include_all_types=True), timeout=10
    ).plugins
    by_alias = {alias: p for p in everything for alias in p.aliases}
    insert = by_alias["org.apache.kafka.connect.transforms.InsertField$Value"]
    assert insert.type == plugins_pb2.PLUGIN_TYPE_TRANSFORMATION and insert.version
    assert by_alias["Sql"].type == plugins_pb2.PLUGIN_TYPE_TRANSFORMATION
    tombstone = by_alias["org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"]
    assert tombstone.type == plugins_pb2.PLUGIN_TYPE_PREDICATE
    assert {p.class_name for p in connectors} < {p.class_name for p in everything}
    assert [p.class_name for p in everything] == sorted(p.class_name for p in everything)
    definition = stubs.plugins.GetPluginConfigDefinition(
        plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/InsertField$Value"), timeout=10
    )
    assert definition.plugin.type == plugins_pb2.PLUGIN_TYPE_TRANSFORMATION
    assert {"topic.field", "static.field", "static.value"} <= {k.name for k in definition.keys}
    matches = stubs.plugins.GetPluginConfigDefinition(
        plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/TopicNameMatches"), timeout=10
    )
    assert [k.name for k in matches.keys] == ["pattern"] and matches.keys[0].required


def test_plugin_config_definition(stubs: Stubs) -> None:
    definition = stubs.plugins.GetPluginConfigDefinition(
        plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/DataGenSource"), timeout=10
    )
    keys = {k.name: k for k in definition.keys}
    assert {"name", "connector.class", "tasks.max", "topic", "max.records", "records.per.sec"} <= set(keys)
    assert keys["tasks.max"].type == plugins_pb2.CONFIG_TYPE_INT and keys["tasks.max"].default_value == "1"
    assert keys["topic"].required and not keys["topic"].HasField("default_value")
    assert keys["topic"].documentation
    jdbc = stubs.plugins.GetPluginConfigDefinition(
        plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/JdbcSink"), timeout=10
    )
    assert {k.name: k.type for k in jdbc.keys}["connection.password"] == plugins_pb2.CONFIG_TYPE_PASSWORD

    missing = failure(
        lambda: stubs.plugins.GetPluginConfigDefinition(
            plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/NoSuchThing"), timeout=10
        )
    )
    assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "PLUGIN_NOT_FOUND")
    malformed = failure(
        lambda: stubs.plugins.GetPluginConfigDefinition(
            plugins_pb2.GetPluginConfigDefinitionRequest(name="x"), timeout=10
        )
    )
    assert malformed.code == grpc.StatusCode.INVALID_ARGUMENT and "name" in malformed.violations


def test_validate_reports_errors_per_field(stubs: Stubs) -> None:
    good = stubs.plugins.ValidateConnectorConfig(
        plugins_pb2.ValidateConnectorConfigRequest(
            config={"connector.class": "DataGenSource", "name": "v", "topic": "t"}
        ),
        timeout=10,
    )
    assert good.error_count == 0
    assert good.plugin_class_name.endswith("DataGenSourceConnector")

    bad = stubs.plugins.ValidateConnectorConfig(
        plugins_pb2.ValidateConnectorConfigRequest(
            plugin="plugins/JdbcSink",
            config={
                "name": "v",
                "tasks.max": "0",
                "connection.url": "postgres://x",
                "connection.password": "s3cret",
                "topics": "a",
            },
        ),
        timeout=10,
    )
    errors = {c.value.name: list(c.value.errors) for c in bad.configs if c.value.errors}
    assert "tasks.max" in errors and "connection.url" in errors
    assert bad.error_count == sum(len(v) for v in errors.values())
    password = next(c for c in bad.configs if c.value.name == "connection.password")
    assert password.value.value == "[hidden]"

    unknown = failure(
        lambda: stubs.plugins.ValidateConnectorConfig(
            plugins_pb2.ValidateConnectorConfigRequest(plugin="plugins/Nope", config={"name": "v"}),
            timeout=10,
        )
    )
    assert unknown.code == grpc.StatusCode.NOT_FOUND


def test_server_info(stubs: Stubs, control_plane: object) -> None:
    info = stubs.cluster.GetServerInfo(cluster_pb2.GetServerInfoRequest(), timeout=10)
    assert info.version
    assert info.kafka_cluster_id
    assert info.this_replica.advertised_address == control_plane.address  # type: ignore[attr-defined]
    assert info.leader.id == info.this_replica.id and info.leader.leader
    assert [m.id for m in info.members] == [info.this_replica.id]
    assert list(info.executors) == []


def test_health_and_reflection(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "sluiceway.api.v1.ConnectorService"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    reflect = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = reflect.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
    )
    names = {s.name for r in responses for s in r.list_services_response.service}
    assert {
        "sluiceway.api.v1.ConnectorService",
        "sluiceway.api.v1.PluginService",
        "sluiceway.api.v1.OffsetService",
        "sluiceway.api.v1.TopicService",
        "sluiceway.api.v1.ClusterService",
        "grpc.health.v1.Health",
    } <= names


def test_attach_must_start_with_hello(channel: grpc.Channel) -> None:
    stub = executor_pb2_grpc.ExecutorServiceStub(channel)
    heartbeat = executor_pb2.ExecutorMessage(heartbeat=executor_pb2.Heartbeat())
    result = failure(lambda: list(stub.Attach(iter([heartbeat]), timeout=5)))
    assert result.code == grpc.StatusCode.INVALID_ARGUMENT and "hello" in result.violations
