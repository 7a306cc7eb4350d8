"""The herder with config providers and secret masking, over memory-backed stores: the config topic
keeps references, the plugin gets resolved values, reads mask secrets and URL credentials, and
failures name what did not resolve without any resolved value."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from confluent_kafka.admin import AdminClient

from sluiceway.common.logging_setup import JsonFormatter, RedactingFilter
from sluiceway.connect import (
    ConfigDef,
    ConfigType,
    Importance,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from sluiceway.connect.config_providers import ConfigProviders
from sluiceway.connect.plugins import PluginRegistry
from sluiceway_server.config import WorkerConfig, WorkerConfigError
from sluiceway_server.errors import InvalidArgumentError
from sluiceway_server.herder.herder import Herder
from sluiceway_server.model import State, TargetState
from sluiceway_server.storage import (
    ConfigStore,
    ConnectorOffsetStorage,
    LogRecord,
    MemoryLog,
    OffsetStore,
    OwnOffsetsTopic,
    RecordLog,
    StatusStore,
)

T = TypeVar("T")
PASSWORD = "hunter2-very-secret"
ALLOWLIST = "config.providers.env.param.allowlist.pattern"
ALLOWED_PATHS = "config.providers.file.param.allowed.paths"


class EchoTask(SourceTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class EchoSourceConnector(SourceConnector):
    """Remembers what start() got; its one task config repeats it; `fail` makes start() raise with
    the value of `api.password` in the message, as careless plugins do."""

    started: ClassVar[list[dict[str, str]]] = []

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return ConfigDef().define("db.secret", ConfigType.PASSWORD, "", importance=Importance.LOW)

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        EchoSourceConnector.started.append(self.props)
        if props.get("fail") == "true":
            raise RuntimeError(f"login refused for password {props.get('api.password')}")

    def task_class(self) -> type[Task]:
        return EchoTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


def _no_admin(settings: dict[str, Any]) -> AdminClient:
    raise AssertionError("no broker in these tests")


class Bed:
    def __init__(self, environ: dict[str, str]) -> None:
        self.logs: dict[str, MemoryLog] = {}
        self.config_store = ConfigStore(self._factory("configs"))
        self.status_store = StatusStore(self._factory("status"))
        offset_store = OffsetStore(self._factory("offsets"))
        for store in (self.config_store, self.status_store, offset_store):
            store.start(5)
        self.herder = Herder(
            worker_id="test:1",
            config_store=self.config_store,
            status_store=self.status_store,
            plugins=PluginRegistry.of(EchoSourceConnector),
            plugin_timeout=2.0,
            offset_storage=ConnectorOffsetStorage(
                worker_config={"bootstrap.servers": "memory", "offset.storage.topic": "offsets"},
                offset_store=offset_store,
                offset_store_factory=self._own_offsets,
                admin_factory=_no_admin,
            ),
            store_timeout=5,
            providers=ConfigProviders.from_worker_config({"config.providers": "env,file"}, environ),
        )

    def _own_offsets(self, own: OwnOffsetsTopic) -> OffsetStore:
        store = OffsetStore(self._factory(own.topic))
        store.start(5)
        return store

    def _factory(self, topic: str) -> Callable[[Callable[[LogRecord], None]], RecordLog]:
        def make(on_record: Callable[[LogRecord], None]) -> RecordLog:
            log = MemoryLog(topic, on_record)
            self.logs[topic] = log
            return log

        return make

    def topic_text(self, topic: str) -> str:
        return "\n".join(
            (r.key or b"").decode() + "=" + (r.value or b"").decode() for r in self.logs[topic].records()
        )


def run(environ: dict[str, str], test: Callable[[Bed], Awaitable[T]]) -> T:
    async def main() -> T:
        EchoSourceConnector.started.clear()
        bed = Bed(environ)
        await bed.herder.start()
        try:
            return await test(bed)
        finally:
            await bed.herder.stop()

    return asyncio.run(main())


async def settle(bed: Bed, name: str, state: State) -> None:
    for _ in range(200):
        if bed.herder.connector_status(name).connector.state is state:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} did not reach {state}: {bed.herder.connector_status(name)}")


def test_references_are_stored_and_resolved_only_for_the_plugin(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text(f"token.value={PASSWORD}-file\n", encoding="utf-8")
    config = {
        "connector.class": "EchoSourceConnector",
        "api.password": "${env:API_PASSWORD}",
        "target": "${env:TARGET}",
        "from.file": f"${{file:{secrets}:token.value}}",
        "connection.url": "jdbc:postgresql://app:plain-pw@db/x",
        "db.secret": "typed-password",
    }

    async def test(bed: Bed) -> None:
        info = await bed.herder.create_connector("echo", config, TargetState.STARTED)
        await settle(bed, "echo", State.RUNNING)
        # The plugin got resolved values.
        (started,) = EchoSourceConnector.started
        assert started["api.password"] == PASSWORD and started["target"] == "/data/out"
        assert started["from.file"] == f"{PASSWORD}-file"
        # The config topic holds only the references (URL and typed password as given: stored values
        # are not masked, the plugin needs them).
        for _ in range(100):
            if bed.herder.snapshot().tasks("echo"):
                break
            await asyncio.sleep(0.02)
        stored = bed.topic_text("configs")
        assert PASSWORD not in stored and "/data/out" not in stored
        assert "${env:API_PASSWORD}" in stored and "${env:TARGET}" in stored
        (task,) = bed.herder.snapshot().tasks("echo")
        assert task["api.password"] == "${env:API_PASSWORD}" and task["target"] == "${env:TARGET}"
        # Reads: secret-looking and PASSWORD keys hidden, references shown, URL credentials redacted.
        for shown in (info.config, (await bed.herder.connector_info("echo")).config):
            assert shown["api.password"] == "[hidden]"
            assert shown["db.secret"] == "[hidden]"
            assert shown["target"] == "${env:TARGET}"
            assert shown["connection.url"] == "jdbc:postgresql://app:[hidden]@db/x"
        (view,) = await bed.herder.task_configs("echo")
        assert view.config["api.password"] == "[hidden]" and view.config["db.secret"] == "[hidden]"
        assert view.config["connection.url"] == "jdbc:postgresql://app:[hidden]@db/x"
        assert view.config["target"] == "${env:TARGET}"

    run({"API_PASSWORD": PASSWORD, "TARGET": "/data/out"}, test)


def test_validation_resolves_but_answers_with_references() -> None:
    async def test(bed: Bed) -> None:
        infos = await bed.herder.validate(
            {
                "name": "v",
                "connector.class": "EchoSourceConnector",
                "tasks.max": "${env:TASKS}",
                "x": "${env:NOPE}",
            }
        )
        values = {info.value.name: info.value for info in infos.configs}
        assert values["tasks.max"].value == "${env:TASKS}" and not values["tasks.max"].errors
        assert infos.errors() == {"x": [infos.errors()["x"][0]]}
        assert "environment variable 'NOPE' is not set" in infos.errors()["x"][0]
        with pytest.raises(InvalidArgumentError) as caught:
            await bed.herder.create_connector(
                "bad", {"connector.class": "EchoSourceConnector", "x": "${env:NOPE}"}, TargetState.STARTED
            )
        assert caught.value.metadata["config_keys"] == "x"
        assert not bed.herder.snapshot().contains("bad")

    run({"TASKS": "1"}, test)


def test_start_fails_clearly_when_a_reference_no_longer_resolves(tmp_path: Path) -> None:
    secrets = tmp_path / "s.properties"
    secrets.write_text(f"pw={PASSWORD}\n", encoding="utf-8")

    async def test(bed: Bed) -> None:
        config = {"connector.class": "EchoSourceConnector", "api.password": f"${{file:{secrets}:pw}}"}
        await bed.herder.create_connector("gone", config, TargetState.STARTED)
        await settle(bed, "gone", State.RUNNING)
        secrets.unlink()
        await bed.herder.restart_connector("gone", include_tasks=False, only_failed=False)
        await settle(bed, "gone", State.FAILED)
        status = bed.herder.connector_status("gone").connector
        assert status.trace is not None
        assert "not started" in status.trace and "cannot read file" in status.trace
        assert str(secrets) in status.trace and PASSWORD not in status.trace

    run({}, test)


def test_plugin_failures_do_not_echo_resolved_values() -> None:
    async def test(bed: Bed) -> None:
        config = {
            "connector.class": "EchoSourceConnector",
            "api.password": "${env:API_PASSWORD}",
            "fail": "true",
        }
        await bed.herder.create_connector("leaky", config, TargetState.STARTED)
        await settle(bed, "leaky", State.FAILED)
        status = bed.herder.connector_status("leaky").connector
        assert status.trace is not None and "login refused for password ${env:API_PASSWORD}" in status.trace
        assert PASSWORD not in status.trace
        assert PASSWORD not in bed.topic_text("status")

    run({"API_PASSWORD": PASSWORD}, test)


def test_status_traces_have_url_credentials_redacted() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.status.put_connector(
            "c", State.FAILED, "cannot reach jdbc:mysql://root:toor@db/x", message="see http://u:p@h"
        )
        await bed.herder.status.put_task("c", 0, State.FAILED, "at mongodb://a:b@m/", "w", 1)
        text = bed.topic_text("status")
        assert "toor" not in text and ":p@" not in text and "a:b@" not in text
        assert "jdbc:mysql://root:[hidden]@db/x" in text and "mongodb://a:[hidden]@m/" in text

    run({}, test)


@pytest.mark.parametrize("json_format", [False, True])
def test_logs_have_url_credentials_redacted(json_format: bool) -> None:
    formatter = JsonFormatter() if json_format else logging.Formatter("%(levelname)s %(message)s")
    record = logging.LogRecord("t", logging.INFO, __file__, 1, "connecting to %s", ("http://u:pw@h",), None)
    try:
        raise ValueError("refused: jdbc:postgresql://app:pw2@db/x")
    except ValueError:
        error = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    extra = logging.LogRecord("t", logging.INFO, __file__, 1, "with extra", None, None)
    extra.dsn = "redis://:pw3@cache"
    rendered = []
    for item in (record, error, extra):
        assert RedactingFilter().filter(item)
        rendered.append(formatter.format(item))
    text = "\n".join(rendered)
    assert "pw@" not in text and "pw2@" not in text and "pw3@" not in text
    assert "http://u:[hidden]@h" in text and "jdbc:postgresql://app:[hidden]@db/x" in text
    if json_format:
        assert json.loads(rendered[2])["dsn"] == "redis://:[hidden]@cache"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"config.providers": "env,vault"}, "config.providers"),
        ({"config.providers": "file", "config.providers.file.class": "x.Y"}, "config.providers.file.class"),
        (
            {"config.providers.env.param.allowlist.pattern": "(("},
            "config.providers.env.param.allowlist.pattern",
        ),
        (
            {"config.providers.file.param.allowed.paths": "rel/dir"},
            "config.providers.file.param.allowed.paths",
        ),
    ],
)
def test_worker_config_refuses_bad_provider_keys(overrides: dict[str, str], key: str) -> None:
    with pytest.raises(WorkerConfigError) as caught:
        WorkerConfig.load(overrides=overrides, env={})
    assert caught.value.key == key
    assert WorkerConfig.load(overrides={"config.providers": "env, file"}, env={}).get("config.providers")
