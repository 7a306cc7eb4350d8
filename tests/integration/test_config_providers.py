"""Config providers and secret masking over the real server, executor, broker and Spark: a
FileStreamSink whose `file` comes from `${file:...}` and whose value converter comes from
`${env:...}` writes to the resolved file, while the config topic, GetConnector, ListTasks and
validation show only the references; secret-looking keys read `[hidden]`, credentials in URLs are
redacted, and a reference that stops resolving fails the connector and its task with traces that
name it and hold no resolved value."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluiceway.client import State
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8].upper()
SECRET_VARIABLE = f"SLUICEWAY_IT_API_PASSWORD_{SUFFIX}"
CONVERTER_VARIABLE = f"SLUICEWAY_IT_CONVERTER_{SUFFIX}"
SECRET = f"it-secret-{uuid.uuid4().hex}"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
URL = "jdbc:postgresql://app:url-password-1@db.example/orders"
REDACTED_URL = "jdbc:postgresql://app:[hidden]@db.example/orders"


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("provider-secrets")


@pytest.fixture(scope="module")
def stack(
    broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, secrets_dir: Path
) -> Iterator[PipelineStack]:
    """A control plane and an executor that both see the test's environment variables (child
    processes inherit this process's environment when they are spawned)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_VARIABLE, SECRET)
        patch.setenv(CONVERTER_VARIABLE, STRING_CONVERTER)
        settings = {
            **FAST_EXECUTOR_SESSION,
            "config.providers": "env,file",
            "config.providers.file.param.allowed.paths": str(secrets_dir),
        }
        plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=settings).start()
        try:
            started = attach_executor(plane, spark_connect, "providers")
        except BaseException:
            plane.stop()
            raise
    yield started
    started.close()
    started.plane.stop()


def _produce_lines(broker: EmbeddedBroker, topic: str, lines: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for line in lines:
        producer.produce(topic, line.encode())
    assert producer.flush(30) == 0


def _sink_config(secrets_file: Path, topic: str) -> dict[str, str]:
    return {
        "connector.class": "FileStreamSink",
        "topics": topic,
        "file": f"${{file:{secrets_file}:out.file}}",
        "value.converter": f"${{env:{CONVERTER_VARIABLE}}}",
        "api.password": f"${{env:{SECRET_VARIABLE}}}",
        "db.password": "plain-db-password",
        "connection.url": URL,
        "tasks.max": "1",
    }


def _config_topic_text(broker: EmbeddedBroker, plane: ControlPlaneProcess) -> str:
    return json.dumps(read_topic(broker.bootstrap_servers, plane.topics["config"]))


def test_references_resolve_where_used_and_are_all_that_is_stored(
    stack: PipelineStack, broker: EmbeddedBroker, secrets_dir: Path, tmp_path: Path
) -> None:
    name = f"providers-{uuid.uuid4().hex[:10]}"
    topic = f"provider-lines-{uuid.uuid4().hex[:10]}"
    out = tmp_path / "resolved-out.txt"
    secrets_file = secrets_dir / f"{name}.properties"
    secrets_file.write_text(f"out.file={out}\n", encoding="utf-8")
    lines = [f"line {i}" for i in range(20)]
    _produce_lines(broker, topic, lines)
    config = _sink_config(secrets_file, topic)
    client = stack.client

    created = client.create_connector(name, config)
    try:
        # The executor resolved both references: the file from the properties file, the converter
        # from its environment (unresolved, the class name would not load).
        stack.wait_for(
            lambda: out.exists() and out.read_text().splitlines() == lines, "the resolved sink file"
        )

        stored = _config_topic_text(broker, stack.plane)
        assert f"${{file:{secrets_file}:out.file}}" in stored and f"${{env:{SECRET_VARIABLE}}}" in stored
        assert SECRET not in stored and str(out) not in stored and STRING_CONVERTER not in stored

        for shown in (created.config, client.get_connector(name).config):
            assert shown["file"] == config["file"] and shown["value.converter"] == config["value.converter"]
            assert shown["api.password"] == "[hidden]" and shown["db.password"] == "[hidden]"
            assert shown["connection.url"] == REDACTED_URL
        listed = {c.name: c for c in client.list_connectors(view="INFO")}
        assert listed[name].config["api.password"] == "[hidden]"
        (task,) = client.list_tasks(name)
        assert (
            task.config["file"] == config["file"]
            and task.config["value.converter"] == config["value.converter"]
        )
        assert task.config["api.password"] == "[hidden]" and task.config["db.password"] == "[hidden]"
        assert task.config["connection.url"] == REDACTED_URL

        answer = client.validate_config({**config, "name": name})
        assert answer.error_count == 0, [(c.value.name, list(c.value.errors)) for c in answer.configs]
        values = {c.value.name: c.value.value for c in answer.configs}
        assert values["file"] == config["file"] and values["value.converter"] == config["value.converter"]
        assert SECRET not in str(answer) and str(out) not in str(answer)
    finally:
        client.delete_connector(name)


def test_validation_hides_secret_looking_plugin_keys(stack: PipelineStack) -> None:
    # The plugin types neither key PASSWORD: the token is hidden for its name, the URL's password
    # for its place in the URL, whether the value is given or comes from a provider.
    for token in ("plain-token-value", f"${{env:{SECRET_VARIABLE}}}"):
        answer = stack.client.validate_config(
            {"name": "v", "topics": "t", "api.token": token, "connection.url": URL},
            plugin="secret_key_connectors.SecretKeysSinkConnector",
        )
        assert answer.error_count == 0, [(c.value.name, list(c.value.errors)) for c in answer.configs]
        values = {c.value.name: c.value.value for c in answer.configs}
        assert values["api.token"] == "[hidden]" and values["connection.url"] == REDACTED_URL
        assert "plain-token-value" not in str(answer) and SECRET not in str(answer)


def test_a_reference_that_does_not_resolve(
    stack: PipelineStack, broker: EmbeddedBroker, secrets_dir: Path, tmp_path: Path
) -> None:
    client = stack.client
    # At validation: an error on the key, naming what is missing.
    answer = client.validate_config(
        {
            "connector.class": "FileStreamSink",
            "topics": "t",
            "file": "${env:SLUICEWAY_IT_NOT_SET}",
            "value.converter": "${file:/etc/hostname:k}",
        }
    )
    errors = {c.value.name: list(c.value.errors) for c in answer.configs if c.value.errors}
    assert "environment variable 'SLUICEWAY_IT_NOT_SET' is not set" in errors["file"][0]
    assert (
        "outside the directories of config.providers.file.param.allowed.paths" in errors["value.converter"][0]
    )

    # At run time: a file the references read is gone when the connector and its task restart.
    name = f"vanishing-{uuid.uuid4().hex[:10]}"
    topic = f"provider-gone-{uuid.uuid4().hex[:10]}"
    out = tmp_path / "out.txt"
    secrets_file = secrets_dir / f"{name}.properties"
    secrets_file.write_text(f"out.file={out}\n", encoding="utf-8")
    _produce_lines(broker, topic, ["one"])
    # Automatic restarts off: the test reads the failure the task is left in.
    client.create_connector(name, {**_sink_config(secrets_file, topic), "task.restart.enable": "false"})
    try:
        stack.wait_for(lambda: out.exists() and out.read_text().splitlines() == ["one"], "the first run")
        secrets_file.unlink()
        client.restart_connector(name, include_tasks=True)

        def failed() -> bool:
            status = client.connector_status(name)
            return status.connector.state == State.FAILED and any(
                t.status.state == State.FAILED for t in status.tasks
            )

        stack.wait_for(failed, "the connector and its task to fail")
        status = client.connector_status(name)
        traces = [status.connector.trace, *(t.status.trace for t in status.tasks)]
        for trace in traces:
            assert "not started" in trace and f"cannot read file {secrets_file}" in trace, trace
            assert SECRET not in trace and str(out) not in trace
        # Neither process logged the resolved secret, nor the URL's password.
        assert stack.plane.managed is not None
        for log_path in (stack.plane.managed.log_path, stack.executor.log_path):
            text = log_path.read_text(errors="replace")
            assert SECRET not in text and "url-password-1" not in text
    finally:
        client.delete_connector(name)
