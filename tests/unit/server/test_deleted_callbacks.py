"""KIP-883 on in-memory stores: the deleted() callback after stop() on delete, never after a start()
made just for it, its record in the config topic, and the records a previous leader left behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sluiceway_server.herder.deleted_callbacks import DeletedOutcome
from sluiceway_server.model import State, TargetState
from tests.plugins.deletion_connectors import RecordingSinkConnector, RecordingSourceConnector
from tests.unit.server.test_herder_memory import Bed, run, settle

PLUGIN = "RecordingSource"
SINK = "RecordingSink"


PLUGIN_TIMEOUT = 1.0
PLUGINS = (RecordingSourceConnector, RecordingSinkConnector)


def _events(calls: Path) -> list[str]:
    return [line.split()[0] for line in calls.read_text().splitlines()] if calls.exists() else []


def _records(bed: Bed, name: str) -> list[object]:
    return [value for key, value in bed.config_records() if key == f"deleted-connector-{name}"]


def test_delete_calls_deleted_after_stop_and_clears_its_record(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    config = {"connector.class": PLUGIN, "calls.file": str(calls)}

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", config, TargetState.STARTED)
        await settle(bed, "c", State.RUNNING)
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.SUCCEEDED
        assert _events(calls) == ["start", "stop", "deleted:begin", "deleted:end"]
        for _ in range(100):
            if _records(bed, "c")[-1:] == [None]:
                break
            await asyncio.sleep(0.02)
        recorded = _records(bed, "c")
        # The record carried the config the connector had, and is a tombstone now.
        assert isinstance(recorded[0], dict)
        assert recorded[0]["properties"]["calls.file"] == str(calls)
        assert recorded[-1] is None
        assert bed.config_store.snapshot().pending_deleted_callbacks == {}

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)


def test_a_raising_deleted_is_reported_and_the_connector_is_gone(tmp_path: Path) -> None:
    config = {"connector.class": PLUGIN, "calls.file": str(tmp_path / "c"), "deleted.behaviour": "raise"}

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", config, TargetState.STARTED)
        await settle(bed, "c", State.RUNNING)
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.FAILED
        assert "cleanup refused on purpose" in result.error
        assert not bed.herder.snapshot().contains("c")

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)


def test_records_left_by_a_previous_leader_are_called_or_dropped(tmp_path: Path) -> None:
    gone, alive = tmp_path / "gone", tmp_path / "alive"

    async def scenario() -> None:
        bed = Bed(PLUGIN_TIMEOUT, PLUGINS)
        # What a control plane that died mid-callback leaves: a deleted connector with its record,
        # and a record whose connector still exists (its tombstone never made it).
        bed.config_store.remove_connector_config(
            "gone", deleted_callback={"connector.class": PLUGIN, "calls.file": str(gone)}
        )
        bed.config_store.put_connector_config("alive", {"connector.class": PLUGIN, "calls.file": str(alive)})
        bed.config_store.remove_connector_config("x", deleted_callback={"connector.class": PLUGIN})
        bed.config_store.put_connector_config("x", {"connector.class": PLUGIN, "calls.file": str(alive)})
        await bed.herder.start()
        try:
            result = await bed.herder.reconciler.deleted_callbacks.outcome("gone")
            for _ in range(100):
                if result.outcome is not DeletedOutcome.PENDING:
                    break
                await asyncio.sleep(0.02)
                result = await bed.herder.reconciler.deleted_callbacks.outcome("gone")
            assert result.outcome is DeletedOutcome.SUCCEEDED
            # A new object, never started: its context carried the recorded config.
            assert _events(gone) == ["deleted:begin", "deleted:end"]
            assert "x" not in bed.config_store.snapshot().pending_deleted_callbacks
            assert "deleted:begin" not in _events(alive)
        finally:
            await bed.herder.stop()

    asyncio.run(scenario())


def _config(calls: Path, plugin: str, **extra: str) -> dict[str, str]:
    topics = {"topics": "t"} if plugin == SINK else {}
    return {"connector.class": plugin, "calls.file": str(calls), **topics, **extra}


@pytest.mark.parametrize("plugin", [PLUGIN, SINK])
def test_a_running_connector_is_stopped_then_told(tmp_path: Path, plugin: str) -> None:
    calls = tmp_path / "calls"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", _config(calls, plugin), TargetState.STARTED)
        await settle(bed, "c", State.RUNNING, tasks=1)
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.SUCCEEDED
        assert _events(calls) == ["start", "stop", "deleted:begin", "deleted:end"]

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)


@pytest.mark.parametrize("plugin", [PLUGIN, SINK])
@pytest.mark.parametrize("initial", [TargetState.STOPPED, TargetState.PAUSED])
def test_a_connector_created_stopped_or_paused_is_told_without_being_started(
    tmp_path: Path, plugin: str, initial: TargetState
) -> None:
    calls = tmp_path / "calls"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", _config(calls, plugin), initial)
        await settle(bed, "c", State.STOPPED if initial is TargetState.STOPPED else State.PAUSED, tasks=0)
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.SUCCEEDED, result
        assert _events(calls) == ["deleted:begin", "deleted:end"]

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)


@pytest.mark.parametrize("then", [TargetState.STOPPED, TargetState.PAUSED])
def test_a_connector_stopped_or_paused_after_running_is_not_started_again(
    tmp_path: Path, then: TargetState
) -> None:
    calls = tmp_path / "calls"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", _config(calls, PLUGIN), TargetState.STARTED)
        await settle(bed, "c", State.RUNNING, tasks=1)
        await bed.herder.set_target_state("c", then)
        await settle(bed, "c", State.STOPPED if then is TargetState.STOPPED else State.PAUSED)
        assert _events(calls) == ["start", "stop"]
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.SUCCEEDED
        # No second start() and no second stop(): a new object gets deleted() alone.
        assert _events(calls) == ["start", "stop", "deleted:begin", "deleted:end"]

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)


def test_a_failed_connector_is_told_on_a_new_object(tmp_path: Path) -> None:
    calls = tmp_path / "calls"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector(
            "c", _config(calls, PLUGIN, **{"fail.start": "true"}), TargetState.STARTED
        )
        await settle(bed, "c", State.FAILED)
        result = await bed.herder.delete_connector("c", wait=True)
        assert result.outcome is DeletedOutcome.SUCCEEDED
        # The failed start() is the only one; stop() is not called on an object that never ran.
        assert _events(calls) == ["start", "deleted:begin", "deleted:end"]

    run(scenario, PLUGIN_TIMEOUT, PLUGINS)
