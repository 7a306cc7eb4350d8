"""A connector that writes each lifecycle call it gets to a file, for the KIP-883 tests: which of
start, stop and deleted ran, in which order and in which control-plane process."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from sluiceway.connect import (
    ConfigDef,
    ConfigType,
    Importance,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)

CALLS_FILE = "calls.file"
DELETED_BEHAVIOUR = "deleted.behaviour"
DELETED_DELAY_MS = "deleted.delay.ms"


class IdleSourceTask(SourceTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.1)
        return None

    def stop(self) -> None:
        pass


class RecordingSourceConnector(SourceConnector):
    """Appends `EVENT PID` lines to `calls.file`. `deleted.behaviour`: `ok`, `raise` or `hang`
    (sleeps 60 s); `deleted.delay.ms` sleeps between `deleted:begin` and `deleted:end`."""

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def version(self) -> str:
        return "1.0"

    def _note(self, event: str) -> None:
        with open(self.props[CALLS_FILE], "a", encoding="utf-8") as out:
            out.write(f"{event} {os.getpid()}\n")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self._note("start")

    def stop(self) -> None:
        self._note("stop")

    def deleted(self) -> None:
        self._note("deleted:begin")
        time.sleep(int(self.props.get(DELETED_DELAY_MS, "0")) / 1000)
        behaviour = self.props.get(DELETED_BEHAVIOUR, "ok")
        if behaviour == "raise":
            raise RuntimeError("cleanup refused on purpose")
        if behaviour == "hang":
            time.sleep(60)
        self._note("deleted:end")

    def task_class(self) -> type[Task]:
        return IdleSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(CALLS_FILE, ConfigType.STRING, importance=Importance.HIGH, documentation="where calls go")
            .define(DELETED_BEHAVIOUR, ConfigType.STRING, "ok", importance=Importance.LOW, documentation="")
            .define(DELETED_DELAY_MS, ConfigType.INT, 0, importance=Importance.LOW, documentation="")
        )
