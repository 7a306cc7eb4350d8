"""The `sluiceway` CLI (as a real subprocess) and the async client against the real control plane."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluiceway.client import AsyncSluicewayClient, SluicewayClient, State
from sluiceway.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from tests.integration.api_helpers import wait_until

pytestmark = pytest.mark.integration


def cli(address: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sluiceway"), "--server", address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLUICEWAY_SERVER": ""},
        check=False,
    )
    if check:
        assert result.returncode == 0, result.stderr
    return result


def cli_json(address: str, *args: str) -> Any:
    return json.loads(cli(address, "-o", "json", *args).stdout)


def connector_state(address: str, name: str) -> tuple[str, int]:
    status = cli_json(address, "connectors", "status", name)
    return status["connector"]["state"], len(status.get("tasks", []))


def test_cli_lifecycle(control_plane: Any, unique: str, tmp_path: Path) -> None:
    address = control_plane.address
    name = f"cli-{unique}"
    created = cli(
        address,
        "connectors",
        "create",
        name,
        "connector.class=DataGenSource",
        f"topic=t-{unique}",
        "tasks.max=2",
    )
    assert name in created.stdout
    wait_until(lambda: connector_state(address, name) == ("STATE_RUNNING", 2), what="running with 2 tasks")

    listed = cli(address, "connectors", "list")
    assert name in listed.stdout
    assert any(
        c["name"] == f"connectors/{name}" for c in cli_json(address, "connectors", "list")["connectors"]
    )

    cli(address, "connectors", "pause", name)
    wait_until(lambda: connector_state(address, name) == ("STATE_PAUSED", 2), what="paused")
    cli(address, "connectors", "resume", name)
    wait_until(lambda: connector_state(address, name) == ("STATE_RUNNING", 2), what="resumed")
    cli(address, "connectors", "stop", name)
    wait_until(lambda: connector_state(address, name) == ("STATE_STOPPED", 0), what="stopped")
    cli(address, "connectors", "resume", name)
    wait_until(lambda: connector_state(address, name) == ("STATE_RUNNING", 2), what="running again")
    restarted = cli(address, "connectors", "restart", name, "--include-tasks")
    assert "RESTARTING" in restarted.stdout
    wait_until(lambda: connector_state(address, name) == ("STATE_RUNNING", 2), what="restarted")

    tasks = cli(address, "connectors", "tasks", name)
    assert "task.id" in tasks.stdout
    # config from a properties file: replace, then patch
    props = tmp_path / "c.properties"
    props.write_text(f"connector.class=DataGenSource\ntopic=t-{unique}\ntasks.max=3\n")
    cli(address, "connectors", "config", name, "--file", str(props))
    wait_until(lambda: connector_state(address, name) == ("STATE_RUNNING", 3), what="reconfigured")
    cli(address, "connectors", "patch", name, "records.per.sec=10", "--remove", "tasks.max")
    config = cli_json(address, "connectors", "config", name)
    shown = config.get("config", config)
    assert shown["records.per.sec"] == "10" and "tasks.max" not in shown

    cli(address, "connectors", "delete", name)
    missing = cli(address, "connectors", "get", name, check=False)
    assert missing.returncode == 1
    assert "NOT_FOUND" in missing.stderr and "CONNECTOR_NOT_FOUND" in missing.stderr


def test_cli_offsets_round_trip(control_plane: Any, unique: str, tmp_path: Path) -> None:
    address = control_plane.address
    name = f"cli-off-{unique}"
    cli(
        address,
        "connectors",
        "create",
        name,
        "connector.class=DataGenSource",
        f"topic=t-{unique}",
        "--initial-state",
        "stopped",
    )
    assert cli_json(address, "offsets", "get", name) == {"offsets": []}
    body = {"offsets": [{"partition": {"task": 0}, "offset": {"seq": 2**63 - 2}}]}
    edited = tmp_path / "offsets.json"
    edited.write_text(json.dumps(body))
    altered = cli(address, "offsets", "alter", name, "--file", str(edited))
    assert name in altered.stdout
    got = cli_json(address, "offsets", "get", name)
    assert got == body
    # get's output goes back in unchanged
    edited.write_text(json.dumps(got))
    cli(address, "offsets", "alter", name, "--file", str(edited))
    assert "reset" in cli(address, "offsets", "reset", name).stdout
    assert cli_json(address, "offsets", "get", name) == {"offsets": []}
    cli(address, "connectors", "resume", name)
    refused = cli(address, "offsets", "reset", name, check=False)
    assert refused.returncode == 1 and "CONNECTOR_NOT_STOPPED" in refused.stderr
    cli(address, "connectors", "delete", name, "--delete-offsets")
    assert cli(address, "connectors", "get", name, check=False).returncode == 1


def test_cli_reports_field_errors(control_plane: Any, unique: str) -> None:
    result = cli(
        control_plane.address,
        "connectors",
        "create",
        f"bad-{unique}",
        "connector.class=DataGenSource",
        "tasks.max=0",
        check=False,
    )
    assert result.returncode == 1
    assert "INVALID_ARGUMENT" in result.stderr and "tasks.max" in result.stderr and "topic" in result.stderr
    plugins = cli(control_plane.address, "plugins", "list")
    assert "DataGenSourceConnector" in plugins.stdout
    info = cli_json(control_plane.address, "cluster", "info")
    assert info["leader"]["advertised_address"] == control_plane.address


def test_sync_client_errors_are_typed(control_plane: Any, unique: str) -> None:
    with SluicewayClient(control_plane.address, timeout=20) as client:
        name = f"sync-{unique}"
        client.create_connector(name, {"connector.class": "DataGenSource", "topic": f"t-{unique}"})
        with pytest.raises(AlreadyExistsError):
            client.create_connector(name, {"connector.class": "DataGenSource", "topic": f"t-{unique}"})
        with pytest.raises(InvalidArgumentError) as info:
            client.create_connector(f"{name}-x", {"connector.class": "DataGenSource"})
        assert info.value.reason == "INVALID_CONFIG"
        assert [v.field for v in info.value.field_violations] == ['connector.config["topic"]']
        assert info.value.metadata["config_keys"] == "topic"
        with pytest.raises(NotFoundError):
            client.connector_status(f"nope-{unique}")
        wait_until(lambda: client.connector_status(name).connector.state == State.RUNNING)


def test_async_client_lifecycle_and_watch(control_plane: Any, unique: str) -> None:
    async def main() -> None:
        async with AsyncSluicewayClient(control_plane.address, timeout=20) as client:
            name = f"async-{unique}"
            await client.create_connector(
                name, {"connector.class": "DataGenSource", "topic": f"t-{unique}"}, initial_state="PAUSED"
            )
            events = client.watch_status(name, include_initial=True)
            first = await anext(aiter(events))
            assert (first.connector, first.task) == (name, None)
            await client.resume_connector(name)
            async for event in events:
                if event.task is None and event.status.state == State.RUNNING:
                    break
            names = [c.name async for c in client.list_connectors(page_size=1)]
            assert name in names
            await client.delete_connector(name)
            with pytest.raises(NotFoundError):
                await client.get_connector(name)

    asyncio.run(asyncio.wait_for(main(), 60))
