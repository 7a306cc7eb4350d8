"""The herder over memory-backed stores: lifecycle, validation, isolation and deadlines,
without Kafka (the same flows run against the real broker in tests/integration)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
from confluent_kafka.admin import AdminClient

from sluiceway.connect import Connector
from sluiceway.connect.plugins import PluginRegistry
from sluiceway_executor.connectors.datagen import DataGenSourceConnector
from sluiceway_server.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    RequestTimeoutError,
)
from sluiceway_server.herder.deadlines import with_deadline
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
from tests.plugins.testing_connectors import ControllableSourceConnector

T = TypeVar("T")
CONTROLLABLE = "ControllableSource"  # the alias; the class is registered explicitly below


def _no_admin(settings: dict[str, Any]) -> AdminClient:
    raise AssertionError("sink offsets need a broker: tests/integration covers them")


class Bed:
    def __init__(self, plugin_timeout: float = 2.0, plugins: Sequence[type[Connector]] = ()) -> None:
        self.logs: dict[str, MemoryLog] = {}
        self.config_store = ConfigStore(self._factory("configs"))
        self.status_store = StatusStore(self._factory("status"))
        self.offset_store = OffsetStore(self._factory("offsets"))
        self.config_store.start(5)
        self.status_store.start(5)
        self.offset_store.start(5)
        self.offset_storage = ConnectorOffsetStorage(
            worker_config={"bootstrap.servers": "memory", "offset.storage.topic": "offsets"},
            offset_store=self.offset_store,
            offset_store_factory=self._own_offsets,
            admin_factory=_no_admin,
        )
        self.herder = Herder(
            worker_id="test:1",
            config_store=self.config_store,
            status_store=self.status_store,
            plugins=PluginRegistry.of(DataGenSourceConnector, ControllableSourceConnector, *plugins),
            plugin_timeout=plugin_timeout,
            offset_storage=self.offset_storage,
            store_timeout=5,
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

    def config_records(self) -> list[tuple[str, Any]]:
        return [
            (r.key.decode() if r.key else "", json.loads(r.value) if r.value is not None else None)
            for r in self.logs["configs"].records()
        ]


def run(
    test: Callable[[Bed], Awaitable[T]], plugin_timeout: float = 2.0, plugins: Sequence[type[Connector]] = ()
) -> T:
    async def main() -> T:
        bed = Bed(plugin_timeout, plugins)
        await bed.herder.start()
        try:
            return await test(bed)
        finally:
            await bed.herder.stop()

    return asyncio.run(main())


async def settle(bed: Bed, name: str, state: State, tasks: int | None = None) -> None:
    for _ in range(200):
        status = bed.herder.connector_status(name)
        if status.connector.state is state and (tasks is None or len(status.tasks) == tasks):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(
        f"{name} did not reach {state} with {tasks} tasks: {bed.herder.connector_status(name)}"
    )


DATAGEN = {"connector.class": "DataGenSource", "topic": "t", "tasks.max": "3"}


def test_create_publishes_tasks_after_config() -> None:
    async def test(bed: Bed) -> None:
        info = await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED)
        assert info.config["name"] == "dg"
        await settle(bed, "dg", State.RUNNING, tasks=3)
        keys = [k for k, _ in bed.config_records()]
        assert keys == ["connector-dg", "task-dg-0", "task-dg-1", "task-dg-2", "commit-dg"]
        tasks = await bed.herder.task_configs("dg")
        assert all(t.config["task.class"].endswith("DataGenBatchTask") for t in tasks)
        with pytest.raises(AlreadyExistsError):
            await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED)

    run(test)


def test_invalid_config_writes_nothing() -> None:
    async def test(bed: Bed) -> None:
        for config, field in [
            ({"topic": "t"}, "connector.class"),
            ({**DATAGEN, "tasks.max": "0"}, "tasks.max"),
            ({**DATAGEN, "records.per.sec": "-1"}, "records.per.sec"),
        ]:
            with pytest.raises(InvalidArgumentError) as info:
                await bed.herder.create_connector("bad", config, TargetState.STARTED)
            assert info.value.reason == "INVALID_CONFIG"
            # BadRequest names the request field (AIP-193); ErrorInfo keeps the config key.
            assert f'connector.config["{field}"]' in {v.field for v in info.value.violations}
            assert field in info.value.metadata["config_keys"].split(",")
        assert bed.config_records() == []

    run(test)


def test_stop_writes_empty_tasks_then_state_and_hides_failed() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.create_connector(
            "f", {"connector.class": CONTROLLABLE, "fail.start": "true"}, TargetState.STARTED
        )
        await settle(bed, "f", State.FAILED)
        await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED)
        await settle(bed, "dg", State.RUNNING, tasks=3)
        await bed.herder.set_target_state("dg", TargetState.STOPPED)
        await settle(bed, "dg", State.STOPPED, tasks=0)
        tail = [(k, v) for k, v in bed.config_records() if k.endswith("-dg")][-2:]
        assert tail == [
            ("commit-dg", {"tasks": 0}),
            ("target-state-dg", {"state": "PAUSED", "state.v2": "STOPPED"}),
        ]
        await bed.herder.set_target_state("f", TargetState.STOPPED)
        await settle(bed, "f", State.STOPPED, tasks=0)
        assert bed.herder.connector_status("f").connector.recent_errors

    run(test)


def test_hung_plugin_fails_alone() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.create_connector("ok", DATAGEN, TargetState.PAUSED)
        hung = asyncio.ensure_future(
            bed.herder.create_connector(
                "hung", {"connector.class": CONTROLLABLE, "start.delay.ms": "2000"}, TargetState.STARTED
            )
        )
        await asyncio.sleep(0.05)
        # another connector's lifecycle is not blocked by the hung start()
        await asyncio.wait_for(bed.herder.set_target_state("ok", TargetState.STARTED), 1.0)
        await settle(bed, "ok", State.RUNNING, tasks=3)
        await hung
        await settle(bed, "hung", State.FAILED)
        assert "did not return within" in (bed.herder.connector_status("hung").connector.trace or "")

    run(test, plugin_timeout=0.3)


def test_deadline_names_the_stage_and_the_work_finishes() -> None:
    async def test(bed: Bed) -> None:
        # start() takes 1.5 s, so a deadline of 1 s falls inside it, with room for validation to
        # be slow on a busy machine (with a deadline of 0.15 s it once ran out during validation).
        slow = {"connector.class": CONTROLLABLE, "start.delay.ms": "1500"}
        with pytest.raises(RequestTimeoutError) as info:
            await with_deadline(bed.herder.create_connector("slow", slow, TargetState.STARTED), 1.0)
        assert info.value.stage == "starting the connector"
        await settle(bed, "slow", State.RUNNING, tasks=1)

    run(test, plugin_timeout=5.0)


def test_restart_plans_and_not_found() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.create_connector("dg", DATAGEN, TargetState.STARTED)
        await settle(bed, "dg", State.RUNNING, tasks=3)
        plan = bed.herder.restart_plan("dg", include_tasks=True, only_failed=True)
        assert (plan.restart_connector, plan.tasks) == (False, ())
        plan = bed.herder.restart_plan("dg", include_tasks=True, only_failed=False)
        assert (plan.restart_connector, plan.tasks) == (True, (0, 1, 2))
        view = await bed.herder.restart_connector("dg", include_tasks=False, only_failed=False)
        assert view.connector.state is State.RESTARTING
        await settle(bed, "dg", State.RUNNING, tasks=3)
        with pytest.raises(NotFoundError):
            await bed.herder.connector_info("nope")
        for call in (
            lambda: bed.herder.connector_status("nope"),
            lambda: bed.herder.task_status("dg", 9),
        ):
            with pytest.raises(NotFoundError):
                call()

    run(test)


def test_password_values_are_masked() -> None:
    async def test(bed: Bed) -> None:
        info = await bed.herder.create_connector(
            "pw", {"connector.class": CONTROLLABLE, "secret": "hunter2"}, TargetState.STARTED
        )
        assert info.config["secret"] == "[hidden]"
        # the stored config keeps the real value: the connector needs it
        assert bed.herder.snapshot().connector_config("pw")["secret"] == "hunter2"  # type: ignore[index]

    run(test)
