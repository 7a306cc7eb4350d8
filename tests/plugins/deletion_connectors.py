"""Connectors, a source and a sink, that write each lifecycle call they get to a file, for the
KIP-883 tests: which of start, stop and deleted ran, in which order and in which control-plane
process. deleted() reads its settings from the context, since it may run on an object that was
never started."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

from sluiceway.connect import (
    ConfigDef,
    ConfigType,
    Connector,
    Importance,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)

CALLS_FILE = "calls.file"
DELETED_BEHAVIOUR = "deleted.behaviour"
DELETED_DELAY_MS = "deleted.delay.ms"
FAIL_START = "fail.start"


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


class IdleSinkTask(SinkTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def put(self, records: Sequence[SinkRecord]) -> None:
        pass

    def stop(self) -> None:
        pass


class _Recording(Connector):
    """Appends `EVENT PID` lines to `calls.file`. `deleted.behaviour`: `ok`, `raise` or `hang`
    (sleeps 60 s); `deleted.delay.ms` sleeps between `deleted:begin` and `deleted:end`;
    `fail.start=true` makes start() raise after noting it."""

    def version(self) -> str:
        return "1.0"

    def _note(self, event: str) -> None:
        # The context's config: what start() got, or the last config on a never-started object.
        with open(self.context.config()[CALLS_FILE], "a", encoding="utf-8") as out:
            out.write(f"{event} {os.getpid()}\n")

    def start(self, props: Mapping[str, str]) -> None:
        self._note("start")
        if props.get(FAIL_START, "false").lower() == "true":
            raise RuntimeError("start failed on purpose")

    def stop(self) -> None:
        self._note("stop")

    def deleted(self) -> None:
        settings = self.context.config()
        self._note("deleted:begin")
        time.sleep(int(settings.get(DELETED_DELAY_MS, "0")) / 1000)
        behaviour = settings.get(DELETED_BEHAVIOUR, "ok")
        if behaviour == "raise":
            raise RuntimeError("cleanup refused on purpose")
        if behaviour == "hang":
            time.sleep(60)
        self._note("deleted:end")

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(CALLS_FILE, ConfigType.STRING, importance=Importance.HIGH, documentation="where calls go")
            .define(DELETED_BEHAVIOUR, ConfigType.STRING, "ok", importance=Importance.LOW, documentation="")
            .define(DELETED_DELAY_MS, ConfigType.INT, 0, importance=Importance.LOW, documentation="")
            .define(FAIL_START, ConfigType.BOOLEAN, False, importance=Importance.LOW, documentation="")
        )


class RecordingSourceConnector(_Recording, SourceConnector):
    def task_class(self) -> type[Task]:
        return IdleSourceTask


class RecordingSinkConnector(_Recording, SinkConnector):
    def task_class(self) -> type[Task]:
        return IdleSinkTask
