"""KIP-875 on in-memory stores: pausing a STOPPED connector starts its plugin, publishes its task
configs and stops the plugin again, so its tasks exist, paused; a connector created PAUSED (KIP-980)
or paused while running is not started for it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sluiceway_server.model import State, TargetState
from sluiceway_server.storage import ConnectorStatusRecord
from tests.unit.server.test_herder_memory import CONTROLLABLE, Bed, run, settle


def _marks(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


def _config(marker: Path, **extra: str) -> dict[str, str]:
    return {
        "connector.class": CONTROLLABLE,
        "marker.file": str(marker),
        "task.count": "2",
        "tasks.max": "3",
        **extra,
    }


def _states(bed: Bed, name: str) -> list[str]:
    """Every state the status topic recorded for the connector, in order."""
    key = f"status-connector-{name}".encode()
    return [
        json.loads(r.value)["state"]
        for r in bed.logs["status"].records()
        if r.key == key and r.value is not None
    ]


def test_pausing_a_stopped_connector_publishes_its_tasks_paused_and_resume_runs_it(tmp_path: Path) -> None:
    marker = tmp_path / "marks"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", _config(marker), TargetState.STOPPED)
        await settle(bed, "c", State.STOPPED, tasks=0)
        assert _marks(marker) == []  # a stopped connector is not started

        await bed.herder.set_target_state("c", TargetState.PAUSED)
        await settle(bed, "c", State.PAUSED, tasks=2)
        # Started to generate the task configs, then stopped: a paused connector's plugin does not run.
        assert _marks(marker) == ["start", "stop"]
        assert [t.config["task.index"] for t in await bed.herder.task_configs("c")] == ["0", "1"]
        # It went from STOPPED to PAUSED without ever showing RUNNING.
        assert _states(bed, "c") == ["STOPPED", "PAUSED"]

        # Pausing again changes nothing: the tasks exist, the plugin is not started again.
        await bed.herder.set_target_state("c", TargetState.PAUSED)
        await settle(bed, "c", State.PAUSED, tasks=2)
        assert _marks(marker) == ["start", "stop"]

        await bed.herder.set_target_state("c", TargetState.STARTED)
        await settle(bed, "c", State.RUNNING, tasks=2)
        assert _marks(marker) == ["start", "stop", "start"]

    run(scenario)


def test_a_connector_created_paused_or_paused_while_running_is_not_started_for_it(tmp_path: Path) -> None:
    created, running = tmp_path / "created", tmp_path / "running"

    async def scenario(bed: Bed) -> None:
        # KIP-980 as in Kafka: created PAUSED, it is not started and has no tasks until resumed.
        await bed.herder.create_connector("created", _config(created), TargetState.PAUSED)
        await settle(bed, "created", State.PAUSED, tasks=0)
        await bed.herder.set_target_state("created", TargetState.PAUSED)
        await settle(bed, "created", State.PAUSED, tasks=0)
        assert _marks(created) == []
        await bed.herder.set_target_state("created", TargetState.STARTED)
        await settle(bed, "created", State.RUNNING, tasks=2)
        assert _marks(created) == ["start"]

        await bed.herder.create_connector("running", _config(running), TargetState.STARTED)
        await settle(bed, "running", State.RUNNING, tasks=2)
        await bed.herder.set_target_state("running", TargetState.PAUSED)
        await settle(bed, "running", State.PAUSED, tasks=2)
        assert _marks(running) == ["start", "stop"]

    run(scenario)


def test_a_failing_start_leaves_the_paused_connector_failed_until_it_can_start(tmp_path: Path) -> None:
    marker = tmp_path / "marks"

    async def scenario(bed: Bed) -> None:
        await bed.herder.create_connector("c", _config(marker, **{"fail.start": "true"}), TargetState.STOPPED)
        await settle(bed, "c", State.STOPPED, tasks=0)
        await bed.herder.set_target_state("c", TargetState.PAUSED)
        await settle(bed, "c", State.FAILED, tasks=0)
        status = bed.herder.connector_status("c").connector
        assert "start failed on purpose" in (status.trace or "")
        assert _marks(marker) == ["start"]
        assert "RUNNING" not in _states(bed, "c")
        # It stays FAILED, as a failed running connector does: pausing again does not start it...
        await bed.herder.set_target_state("c", TargetState.PAUSED)
        await settle(bed, "c", State.FAILED, tasks=0)
        assert _marks(marker) == ["start"]
        # ...a restart does.
        await bed.herder.restart_connector("c", include_tasks=False, only_failed=False)
        for _ in range(100):
            if len(_marks(marker)) == 2:
                break
            await asyncio.sleep(0.02)
        await settle(bed, "c", State.FAILED, tasks=0)
        assert _marks(marker) == ["start", "start"]

        # Fixed while paused: the pause's start is tried again and the tasks appear, paused.
        await bed.herder.patch_connector_config("c", {"fail.start": "false"}, [])
        await settle(bed, "c", State.PAUSED, tasks=2)
        assert _marks(marker) == ["start", "start", "start", "stop"]

        await bed.herder.set_target_state("c", TargetState.STARTED)
        await settle(bed, "c", State.RUNNING, tasks=2)

    run(scenario)


def test_a_resume_after_a_failed_pause_starts_the_connector_again(tmp_path: Path) -> None:
    marker = tmp_path / "marks"

    async def scenario(bed: Bed) -> None:
        config = _config(marker, **{"fail.start": "true"})
        await bed.herder.create_connector("c", config, TargetState.STOPPED)
        await bed.herder.set_target_state("c", TargetState.PAUSED)
        await settle(bed, "c", State.FAILED, tasks=0)
        assert _marks(marker) == ["start"]
        # The failed pause does not hold the resume back: it starts the plugin as any resume does.
        await bed.herder.set_target_state("c", TargetState.STARTED)
        for _ in range(100):
            if _marks(marker) == ["start", "start"]:
                break
            await asyncio.sleep(0.02)
        assert _marks(marker) == ["start", "start"]
        await settle(bed, "c", State.FAILED, tasks=0)
        await bed.herder.patch_connector_config("c", {"fail.start": "false"}, [])
        await settle(bed, "c", State.RUNNING, tasks=2)

    run(scenario)


def test_a_new_leader_finishes_a_pause_of_a_stopped_connector(tmp_path: Path) -> None:
    marker = tmp_path / "marks"

    async def scenario() -> None:
        bed = Bed()
        # What a leader that died right after writing the pause leaves: the connector PAUSED in the
        # config topic, without tasks, and still STOPPED in the status topic.
        bed.config_store.put_connector_config("c", {**_config(marker), "name": "c"}, TargetState.PAUSED)
        bed.status_store.put_connector(ConnectorStatusRecord("c", State.STOPPED, None, "old:1", 1))
        await bed.herder.start()
        try:
            await settle(bed, "c", State.PAUSED, tasks=2)
            assert _marks(marker) == ["start", "stop"]
        finally:
            await bed.herder.stop()

    asyncio.run(scenario())
