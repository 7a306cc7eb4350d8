"""Connector plugins that misbehave on request, loaded by the test control plane through
`connector.class` dotted paths (this directory is on its PYTHONPATH)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sluiceway.connect import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    ConnectException,
    Importance,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)

ALTER_OFFSETS = "alter.offsets"


def _answer_alter(config: Mapping[str, str], default: bool) -> bool:
    """What `alter.offsets` asks alter_offsets to do."""
    behaviour = config.get(ALTER_OFFSETS, "default")
    if behaviour == "ack":
        return True
    if behaviour == "unsupported":
        raise NotImplementedError("this connector keeps its offsets elsewhere")
    if behaviour == "fail":
        raise ConnectException("offsets refused on purpose")
    if behaviour == "hang":
        time.sleep(3)
    return default


class ControllableSourceTask(SourceTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.1)
        return None

    def stop(self) -> None:
        pass


class ControllableSourceConnector(SourceConnector):
    """`fail.start` / `fail.stop` raise; `start.delay.ms` sleeps in start(); `task.count` tasks;
    `marker.file` gets a line per callback so tests can see what ran and in which order."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "fail.start",
                ConfigType.BOOLEAN,
                False,
                importance=Importance.LOW,
                documentation="start() raises",
            )
            .define(
                "fail.stop",
                ConfigType.BOOLEAN,
                False,
                importance=Importance.LOW,
                documentation="stop() raises",
            )
            .define(
                "start.delay.ms", ConfigType.INT, 0, importance=Importance.LOW, documentation="start() sleeps"
            )
            .define(
                "task.count", ConfigType.INT, 1, importance=Importance.LOW, documentation="tasks to generate"
            )
            .define(
                "marker.file", ConfigType.STRING, "", importance=Importance.LOW, documentation="callback log"
            )
            .define(
                "secret", ConfigType.PASSWORD, "", importance=Importance.LOW, documentation="a password field"
            )
            .define(
                ALTER_OFFSETS,
                ConfigType.STRING,
                "default",
                importance=Importance.LOW,
                documentation="alter_offsets(): default (False), ack (True), unsupported, fail, hang",
            )
        )

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        return _answer_alter(connector_config, super().alter_offsets(connector_config, offsets))

    def _mark(self, event: str) -> None:
        marker = self.props.get("marker.file", "")
        if marker:
            with Path(marker).open("a") as out:
                out.write(event + "\n")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self._mark("start")
        delay = int(props.get("start.delay.ms", "0"))
        if delay:
            time.sleep(delay / 1000)
        if props.get("fail.start", "false").lower() == "true":
            raise RuntimeError("start failed on purpose")

    def task_class(self) -> type[Task]:
        return ControllableSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        count = int(self.props.get("task.count", "1"))
        return [{"task.index": str(i)} for i in range(min(count, max_tasks))]

    def stop(self) -> None:
        self._mark("stop")
        if self.props.get("fail.stop", "false").lower() == "true":
            raise RuntimeError("stop failed on purpose")


class SlowSourceConnector(ControllableSourceConnector):
    """Every plugin callback is slow: `config()` sleeps CONFIG_DELAY seconds on each call,
    `validate()` sleeps `validate.delay.ms` more, and `start()` honours `start.delay.ms`. The control
    plane must keep answering other calls meanwhile."""

    CONFIG_DELAY = 1.5

    def config(self) -> ConfigDef:
        time.sleep(self.CONFIG_DELAY)
        return (
            super()
            .config()
            .define(
                "validate.delay.ms",
                ConfigType.INT,
                0,
                importance=Importance.LOW,
                documentation="validate() sleeps",
            )
        )

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        delay = int(props.get("validate.delay.ms", "0"))
        if delay:
            time.sleep(delay / 1000)
        return super().validate(props)


class ControllableSinkTask(SinkTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def put(self, records: Sequence[SinkRecord]) -> None:
        pass

    def stop(self) -> None:
        pass


class ControllableSinkConnector(SinkConnector):
    """A sink that writes nothing; `alter.offsets` decides what alter_offsets does."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            ALTER_OFFSETS,
            ConfigType.STRING,
            "default",
            importance=Importance.LOW,
            documentation="alter_offsets(): default (False), ack (True), unsupported, fail, hang",
        )

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return ControllableSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        return _answer_alter(connector_config, super().alter_offsets(connector_config, offsets))
