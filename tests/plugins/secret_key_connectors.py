"""A sink plugin whose own keys hold secrets without being typed PASSWORD (a token and a URL with
credentials), for the tests that check every read hides them. Loaded through plugin.path as
`secret_key_connectors.SecretKeysSinkConnector`; it writes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluiceway.connect import ConfigDef, ConfigType, Importance, SinkConnector, SinkRecord, SinkTask, Task


class SecretKeysSinkTask(SinkTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def put(self, records: Sequence[SinkRecord]) -> None:
        pass

    def stop(self) -> None:
        pass


class SecretKeysSinkConnector(SinkConnector):
    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("api.token", ConfigType.STRING, "", importance=Importance.LOW, documentation="a token")
            .define("connection.url", ConfigType.STRING, "", importance=Importance.LOW, documentation="a URL")
        )

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return SecretKeysSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass
