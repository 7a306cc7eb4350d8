"""A newcomer's first commands (issue 31), run as the `sluiceway` console script against the real
control plane: no server at the address, create and validate from a Kafka Connect body, the config
errors table, --validate-only, what a restart restarts, and `plugins config`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_helpers import wait_until

pytestmark = pytest.mark.integration

DATAGEN_CLASS = "sluiceway_executor.connectors.datagen.DataGenSourceConnector"


def sluiceway(address: str, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    """`sluiceway --server ADDRESS ARGS...` as typed in a shell, its output going to a pipe."""
    result = subprocess.run(
        [str(Path(sys.executable).parent / "sluiceway"), "--server", address, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLUICEWAY_SERVER": "", "COLUMNS": "200"},
        check=False,
    )
    assert result.returncode == code, result.stderr
    return result


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_no_server_at_the_address_is_reported_within_seconds() -> None:
    address = f"127.0.0.1:{_unused_port()}"
    started = time.monotonic()
    result = sluiceway(address, "connectors", "list", code=1)
    assert time.monotonic() - started < 5
    assert result.stdout == ""
    assert result.stderr.startswith("error: UNAVAILABLE: failed to connect to all addresses")
    assert (
        f"(is a Sluiceway server listening on {address}? Set --server or $SLUICEWAY_SERVER.)" in result.stderr
    )


def test_create_and_validate_from_a_kafka_connect_body(
    control_plane: Any, unique: str, tmp_path: Path
) -> None:
    address = control_plane.address
    name = f"body-{unique}"
    body = tmp_path / "body.json"
    body.write_text(
        json.dumps({"name": name, "config": {"connector.class": "DataGenSource", "topic": f"t-{unique}"}})
    )

    validated = sluiceway(address, "connectors", "validate", "-f", str(body))
    assert validated.stdout == f"The config of connector {name} is valid for {DATAGEN_CLASS}.\n"
    # NAME goes into the config: the name check of the plugin's definition passes.
    typed = sluiceway(
        address, "connectors", "validate", name, "connector.class=DataGenSource", f"topic=t-{unique}"
    )
    assert typed.stdout == validated.stdout

    created = sluiceway(address, "connectors", "create", "-f", str(body))
    assert created.stdout.startswith(f"Created connector {name}.\n")
    shown = json.loads(sluiceway(address, "-o", "json", "connectors", "config", name).stdout)
    assert shown["name"] == name

    clash = sluiceway(address, "connectors", "create", "other", "-f", str(body), code=2)
    assert (
        f"""two different connector names: NAME is 'other', the file's "name" is '{name}'""" in clash.stderr
    )
    sluiceway(address, "connectors", "delete", name)


def test_config_errors_come_as_a_table(control_plane: Any, unique: str) -> None:
    name = f"bad-{unique}"
    result = sluiceway(
        control_plane.address,
        "connectors",
        "create",
        name,
        "connector.class=DataGenSource",
        "tasks.max=0",
        code=1,
    )
    head, blank, header, *rows = result.stderr.splitlines()
    assert head == f"error: INVALID_ARGUMENT INVALID_CONFIG: 2 errors in the config of connector {name}"
    assert (blank, header) == ("", "KEY        VALUE  ERROR")
    # One row per error, with the value that was sent (none for the missing topic); the server words
    # the errors themselves.
    assert len(rows) == 2
    assert rows[0].startswith("tasks.max  0      ") and "1" in rows[0][len("tasks.max  0      ") :]
    assert rows[1].startswith("topic             ") and rows[1][len("topic             ") :].strip()


def test_validate_only_prints_only_the_verdict(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    name = f"dry-{unique}"
    result = sluiceway(
        address,
        "connectors",
        "create",
        name,
        "connector.class=DataGenSource",
        f"topic=t-{unique}",
        "--validate-only",
    )
    assert result.stdout == f"The config is valid; connector {name} was not created.\n"
    missing = sluiceway(address, "connectors", "get", name, code=1)
    assert "CONNECTOR_NOT_FOUND" in missing.stderr


def test_restart_says_what_it_restarted(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    name = f"restart-{unique}"
    sluiceway(address, "connectors", "create", name, "connector.class=DataGenSource", f"topic=t-{unique}")

    def one_task() -> bool:
        status = json.loads(sluiceway(address, "-o", "json", "connectors", "status", name).stdout)
        return len(status.get("tasks", [])) == 1

    wait_until(one_task, what="the connector's task")
    nothing = sluiceway(address, "connectors", "restart", name, "--include-tasks", "--only-failed")
    assert nothing.stdout.startswith(
        f"Nothing restarted: neither connector {name} nor any of its tasks is FAILED.\n\n"
    )
    everything = sluiceway(address, "connectors", "restart", name, "--include-tasks")
    assert everything.stdout.startswith(f"Restarting connector {name} and its task 0.\n\n")
    sluiceway(address, "connectors", "delete", name)


def test_plugins_config_lists_the_plugins_own_keys_first_with_whole_descriptions(control_plane: Any) -> None:
    address = control_plane.address
    out = sluiceway(address, "plugins", "config", "DataGenSource").stdout
    definition = json.loads(sluiceway(address, "-o", "json", "plugins", "config", "DataGenSource").stdout)
    lines = out.splitlines()
    assert lines[0] == f"{DATAGEN_CLASS} (source 0.1.0)"
    assert lines[2] == "Keys of DataGenSourceConnector:"
    assert lines[3].split() == ["KEY", "TYPE", "REQUIRED", "DEFAULT", "IMPORTANCE", "DESCRIPTION"]
    assert lines[4].split()[0] == "topic"
    framework_at = lines.index("Keys every source connector has:")
    own = {line.split()[0] for line in lines[4:framework_at] if line and not line[0].isspace()}
    assert {"topic", "max.records", "records.per.sec"} <= own
    assert not own & {"name", "connector.class", "tasks.max"}
    assert lines[framework_at + 2].split()[0] == "name"
    # Every description is there whole: the wrapped lines of the output, joined, hold each one.
    assert "…" not in out
    joined = " ".join(out.split())
    for key in definition["keys"]:
        assert " ".join(key["documentation"].split()) in joined, key["name"]
