"""The worker's policy over the real socket: no plugin from outside the installed ones and
plugin.path, no internal topic as a connector's topic or offsets topic, file connectors inside
connector.allowed.paths, client overrides only as connector.client.config.override.policy allows.
Every refusal leaves nothing behind; and a source task whose records go to an internal topic fails
on the executor without writing them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import connectors_pb2, plugins_pb2
from sluiceway.client import InstanceStatus, State
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import RpcFailure, Stubs, failure, read_topic
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor

pytestmark = pytest.mark.integration

ZEN = "Beautiful is better than ugly"
ROUTING = "testing_connectors.TopicRoutingSourceConnector"


@pytest.fixture(scope="module")
def allowed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="module")
def plane(broker: EmbeddedBroker, allowed_dir: Path) -> Iterator[ControlPlaneProcess]:
    settings = {
        **FAST_EXECUTOR_SESSION,
        "connector.allowed.paths": str(allowed_dir),
        "connector.client.config.override.policy": "None",
    }
    started = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=settings).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def stubs(plane: ControlPlaneProcess) -> Iterator[Stubs]:
    with grpc.insecure_channel(plane.address) as channel:
        yield Stubs.of(channel)


def _create(stubs: Stubs, name: str, config: dict[str, str]) -> connectors_pb2.Connector:
    return stubs.connectors.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=name,
            connector=connectors_pb2.Connector(config=config),
            initial_state=connectors_pb2.INITIAL_STATE_PAUSED,
        ),
        timeout=30,
    )


def _refused(
    stubs: Stubs, plane: ControlPlaneProcess, broker: EmbeddedBroker, config: dict[str, str], key: str
) -> RpcFailure:
    """Creates a connector that must be refused for `key`; checks nothing was written or created."""
    name = f"refused-{uuid.uuid4().hex[:10]}"
    result = failure(lambda: _create(stubs, name, config))
    assert (result.code, result.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG"), result
    assert f'connector.config["{key}"]' in result.violations, result.violations
    assert key in result.metadata["config_keys"].split(",")
    # The connector does not exist, and no record of it reached the config topic.
    missing = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=f"connectors/{name}"), timeout=10
        )
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND
    keys = {key for key, _ in read_topic(broker.bootstrap_servers, plane.topics["config"])}
    assert not {k for k in keys if k and k.endswith(name)}
    # Validation answers the same error for the same key.
    infos = stubs.plugins.ValidateConnectorConfig(
        plugins_pb2.ValidateConnectorConfigRequest(config=config), timeout=30
    )
    assert any(c.value.name == key and c.value.errors for c in infos.configs), infos
    return result


def _plane_log(plane: ControlPlaneProcess) -> str:
    assert plane.managed is not None
    return plane.managed.log_path.read_text(errors="replace")


def test_a_module_outside_the_plugin_sources_is_never_imported(
    stubs: Stubs, plane: ControlPlaneProcess, broker: EmbeddedBroker
) -> None:
    refused = _refused(stubs, plane, broker, {"connector.class": "this.Zen", "topic": "t"}, "connector.class")
    message = refused.violations['connector.config["connector.class"]'][0]
    assert "this.Zen is neither an installed connector plugin nor in plugin.path" in message
    unknown = failure(
        lambda: stubs.plugins.GetPluginConfigDefinition(
            plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/this.Zen"), timeout=10
        )
    )
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.NOT_FOUND, "PLUGIN_NOT_FOUND")
    assert ZEN not in _plane_log(plane)


def test_a_plugin_in_plugin_path_loads(stubs: Stubs) -> None:
    # The test control planes find tests/plugins through plugin.path alone (no PYTHONPATH).
    definition = stubs.plugins.GetPluginConfigDefinition(
        plugins_pb2.GetPluginConfigDefinitionRequest(name=f"plugins/{ROUTING}"), timeout=10
    )
    assert "routing.topics" in {key.name for key in definition.keys}


def test_internal_topics_are_refused(
    stubs: Stubs, plane: ControlPlaneProcess, broker: EmbeddedBroker
) -> None:
    configs_topic = plane.topics["config"]
    sink = {"connector.class": "FileStreamSink", "file": "/dev/null"}
    refused = _refused(stubs, plane, broker, {**sink, "topics": f"orders,{configs_topic}"}, "topics")
    assert f"{configs_topic} is an internal topic" in refused.message
    _refused(stubs, plane, broker, {**sink, "topics.regex": "configs-.*"}, "topics.regex")
    source = {"connector.class": "DataGenSource", "topic": "t"}
    _refused(
        stubs, plane, broker, {**source, "offsets.storage.topic": configs_topic}, "offsets.storage.topic"
    )
    _refused(
        stubs,
        plane,
        broker,
        {**source, "offsets.storage.topic": plane.topics["offset"]},
        "offsets.storage.topic",
    )


def test_file_connectors_stay_inside_the_allowed_paths(
    stubs: Stubs, plane: ControlPlaneProcess, broker: EmbeddedBroker, allowed_dir: Path
) -> None:
    source = {"connector.class": "FileStreamSource", "topic": f"lines-{uuid.uuid4().hex[:8]}"}
    refused = _refused(stubs, plane, broker, {**source, "file": "/etc/passwd"}, "file")
    assert "outside the directories connector.allowed.paths allows" in refused.message
    _refused(stubs, plane, broker, {**source, "file": f"{allowed_dir}/../passwd"}, "file")
    lake = {"connector.class": "SparkFileSink", "topics": "t", "path": "s3a://bucket/lake"}
    _refused(stubs, plane, broker, lake, "path")
    # Inside the allowed directory it is created.
    name = f"inside-{uuid.uuid4().hex[:10]}"
    _create(stubs, name, {**source, "file": str(allowed_dir / "in.txt")})
    stubs.connectors.DeleteConnector(
        connectors_pb2.DeleteConnectorRequest(name=f"connectors/{name}"), timeout=30
    )


def test_client_overrides_follow_the_override_policy(
    stubs: Stubs, plane: ControlPlaneProcess, broker: EmbeddedBroker
) -> None:
    config = {"connector.class": "DataGenSource", "topic": "t", "producer.override.linger.ms": "5"}
    refused = _refused(stubs, plane, broker, config, "producer.override.linger.ms")
    assert "connector.client.config.override.policy=None" in refused.message


@pytest.fixture(scope="module")
def stack(plane: ControlPlaneProcess, spark_connect: EmbeddedSparkConnect) -> Iterator[PipelineStack]:
    started = attach_executor(plane, spark_connect, "worker-policy")
    yield started
    started.close()


def test_source_records_for_an_internal_topic_fail_the_task_unwritten(
    stack: PipelineStack, plane: ControlPlaneProcess, broker: EmbeddedBroker
) -> None:
    # Validation cannot know where a task routes its records: the executor checks each batch.
    own = f"routed-{uuid.uuid4().hex[:10]}"
    name = f"routes-{uuid.uuid4().hex[:10]}"
    before = len(read_topic(broker.bootstrap_servers, plane.topics["config"]))
    stack.client.create_connector(
        name,
        {
            "connector.class": ROUTING,
            "tasks.max": "1",
            "routing.topics": f"{own},{plane.topics['config']}",
            "task.restart.enable": "false",  # the test reads the failure the task is left in
        },
    )
    try:

        def failed() -> InstanceStatus | None:
            tasks = stack.client.connector_status(name).tasks
            return next((t.status for t in tasks if t.status.state == State.FAILED), None)

        status = stack.wait_for(failed, "the task to fail")
        assert status is not None
        assert "internal topics" in status.trace and plane.topics["config"] in status.trace, status.trace
        # Nothing of the batch was written, to either topic: the routed records have no key and
        # a value {"n": ...}, unlike every record of the config topic.
        assert read_topic(broker.bootstrap_servers, own) == []
        written = read_topic(broker.bootstrap_servers, plane.topics["config"])[before:]
        assert not [
            (key, value)
            for key, value in written
            if key is None or (isinstance(value, dict) and "n" in value)
        ]
    finally:
        stack.client.delete_connector(name)
