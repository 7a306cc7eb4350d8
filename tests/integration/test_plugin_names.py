"""Naming a connector plugin as a newcomer types it, through the `sluiceway` CLI (a real subprocess)
and the client against the real control plane: any case is accepted, a misspelt name gets the
nearest installed name, and the config errors a first connector meets read as one row each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sluiceway.client import SluicewayClient
from sluiceway.connect.validation import SINK_TOPICS_MISSING_MESSAGE
from sluiceway.errors import InvalidArgumentError, NotFoundError
from tests.integration.api_helpers import wait_until

pytestmark = pytest.mark.integration

INSTALLED = "Installed: DataGenSource, FileStreamSink, FileStreamSource, JdbcSink, JdbcSource, SparkFileSink"
TYPO_MESSAGE = f"'DataGenSorce' is not an installed connector plugin; did you mean DataGenSource? {INSTALLED}"


def cli(address: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`sluiceway --server ADDRESS ARGS...` as a user runs it, from this interpreter's bin directory."""
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


def _flat(text: str) -> str:
    """The text with every run of white space made one space (tables may wrap long cells)."""
    return " ".join(text.split())


def test_create_with_the_class_in_lower_case(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    name = f"lower-{unique}"
    cli(address, "connectors", "create", name, "connector.class=datagensource", f"topic=t-{unique}")
    try:
        # Stored as typed (as Kafka Connect stores it); the plugin is found when it is used.
        shown = cli_json(address, "connectors", "config", name)
        assert shown.get("config", shown)["connector.class"] == "datagensource"
        with SluicewayClient(address, timeout=20) as client:
            wait_until(
                lambda: client.connector_status(name).connector.state.name.endswith("RUNNING"),
                what="the connector running",
            )
            assert "SOURCE" in str(client.connector_status(name).type)
    finally:
        cli(address, "connectors", "delete", name)


def test_a_misspelt_class_gets_the_nearest_name(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    name = f"typo-{unique}"
    typed = cli(
        address,
        "connectors",
        "create",
        name,
        "connector.class=DataGenSorce",
        f"topic=t-{unique}",
        check=False,
    )
    assert typed.returncode != 0
    assert "did you mean DataGenSource?" in _flat(typed.stderr), typed.stderr
    assert INSTALLED in _flat(typed.stderr), typed.stderr
    with SluicewayClient(address, timeout=20) as client:
        with pytest.raises(InvalidArgumentError) as refused:
            client.create_connector(name, {"connector.class": "DataGenSorce", "topic": f"t-{unique}"})
        assert refused.value.reason == "INVALID_CONFIG"
        assert [(v.field, v.description) for v in refused.value.field_violations] == [
            ('connector.config["connector.class"]', TYPO_MESSAGE)
        ]
        # Nothing was created.
        with pytest.raises(NotFoundError):
            client.connector_status(name)
        answer = client.validate_config({"name": name, "connector.class": "DataGenSorce", "topic": "t"})
        errors = {c.value.name: list(c.value.errors) for c in answer.configs if c.value.errors}
        assert errors == {"connector.class": [TYPO_MESSAGE]}
        # Naming the plugin in the request: NOT_FOUND, with the same hint.
        with pytest.raises(NotFoundError) as unknown:
            client.validate_config({"name": name, "topic": "t"}, "DataGenSorce")
        assert unknown.value.reason == "PLUGIN_NOT_FOUND"
        assert TYPO_MESSAGE in str(unknown.value)


def test_plugins_config_in_any_case_and_misspelt(control_plane: Any) -> None:
    address = control_plane.address
    described = cli_json(address, "plugins", "config", "datagensource")
    assert json.dumps(described).count("DataGenSourceConnector") >= 1
    assert "topic" in cli(address, "plugins", "config", "DATAGENSOURCE").stdout
    missing = cli(address, "plugins", "config", "DataGenSorce", check=False)
    assert missing.returncode != 0
    assert "PLUGIN_NOT_FOUND" in missing.stderr
    assert TYPO_MESSAGE in _flat(missing.stderr), missing.stderr


def test_validate_a_sink_without_topics_shows_one_row(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    args = ("connectors", "validate", f"out-{unique}", "connector.class=FileStreamSink", "file=/tmp/out.txt")
    table = cli(address, *args, check=False)
    assert table.returncode == 1, table.stderr
    flat = _flat(table.stdout)
    assert flat.count("a sink connector needs topics or topics.regex") == 1, table.stdout
    assert SINK_TOPICS_MISSING_MESSAGE in flat, table.stdout
    assert "1 error in the config" in flat, table.stdout
    answer = json.loads(cli(address, "-o", "json", *args, check=False).stdout)
    errors = [(c["value"]["name"], e) for c in answer["configs"] for e in c["value"].get("errors", [])]
    assert errors == [("topics", SINK_TOPICS_MISSING_MESSAGE)]


def test_validate_a_missing_required_key_says_what_it_is_for(control_plane: Any, unique: str) -> None:
    address = control_plane.address
    table = cli(
        address, "connectors", "validate", f"gen-{unique}", "connector.class=DataGenSource", check=False
    )
    assert table.returncode == 1, table.stderr
    assert "required, and not set: The topic to write the generated records to." in _flat(table.stdout)
    no_class = cli(address, "connectors", "validate", f"gen-{unique}", f"topic=t-{unique}", check=False)
    assert no_class.returncode != 0
    assert "connector.class is required" in no_class.stderr and INSTALLED in _flat(no_class.stderr)
