"""What a newcomer meets first (issue 31), typed as a user types it, against the fake control plane:
an address nobody listens on, create and validate with or without NAME, the config errors table,
what a restart restarts, --validate-only, and `plugins config`."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2, plugins_pb2
from sluiceway.cli.connectors import _restart_summary
from sluiceway.cli.main import main
from sluiceway.cli.plugins import render_definition
from tests.unit.client.fake_control_plane import DATAGEN, Served, rich_status


class Cli:
    def __init__(self, served: Served, capsys: pytest.CaptureFixture[str]) -> None:
        self.served = served
        self.capsys = capsys
        self.err = ""

    def __call__(self, *argv: str, code: int = 0) -> str:
        result = main(["--server", self.served.target, *argv])
        captured = self.capsys.readouterr()
        self.err = captured.err
        assert result == code, captured.err
        return captured.out


@pytest.fixture
def cli(served: Served, capsys: pytest.CaptureFixture[str]) -> Cli:
    served.fake.add_connector("alpha", tasks=2, failed_task=1)
    return Cli(served, capsys)


def _body(tmp_path: Path, body: object, name: str = "body.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(body))
    return str(path)


# --- item 2: no server -------------------------------------------------------------------------


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_address_nobody_listens_on_fails_within_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    address = f"127.0.0.1:{_unused_port()}"
    started = time.monotonic()
    assert main(["--server", address, "connectors", "list"]) == 1
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.startswith("error: UNAVAILABLE: failed to connect to all addresses")
    assert f"  (is a Sluiceway server listening on {address}? Set --server or $SLUICEWAY_SERVER.)" in err


def test_a_server_answering_unavailable_is_waited_for(cli: Cli) -> None:
    # A replica electing a leader answers UNAVAILABLE with its RetryInfo: longer than the couple of
    # seconds an address that refuses connections gets, the CLI keeps trying.
    no_leader = rich_status(grpc.StatusCode.UNAVAILABLE, "no leader yet", "NO_LEADER", retry_delay=0.6)
    cli.served.fake.fail("ListConnectors", no_leader, times=4)
    started = time.monotonic()
    assert cli("connectors", "list") == "NAME\nalpha\n"
    assert time.monotonic() - started > 2.3
    assert len(cli.served.fake.attempts_of("ListConnectors")) == 5


# --- items 3 and 4: NAME, KEY=VALUE and --file ------------------------------------------------


def test_create_takes_the_name_from_a_kafka_connect_body(cli: Cli, tmp_path: Path) -> None:
    path = _body(tmp_path, {"name": "gen", "config": {"connector.class": DATAGEN, "topic": "t"}})
    out = cli("connectors", "create", "-f", path, "tasks.max=2")
    assert out.startswith("Created connector gen.\n")
    request = cli.served.fake.attempts_of("CreateConnector")[0].request
    assert request.connector_id == "gen"
    assert dict(request.connector.config) == {"connector.class": DATAGEN, "topic": "t", "tasks.max": "2"}
    # NAME may repeat the file's name, not contradict it.
    cli("connectors", "create", "gen", "-f", path, code=1)
    assert "CONNECTOR_ALREADY_EXISTS" in cli.err
    cli("connectors", "create", "other", "-f", path, code=2)
    assert """two different connector names: NAME is 'other', the file's "name" is 'gen'""" in cli.err


def test_create_takes_the_name_from_a_properties_name_entry(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "gen.properties"
    path.write_text(f"name=gen\nconnector.class={DATAGEN}\ntopic=t\n")
    assert cli("connectors", "create", "-f", str(path)).startswith("Created connector gen.\n")
    cli("connectors", "create", "x", "name=y", f"connector.class={DATAGEN}", code=2)
    assert "NAME is 'x', the config's name entry is 'y'" in cli.err


def test_create_without_any_name_says_how_to_give_one(cli: Cli) -> None:
    cli("connectors", "create", f"connector.class={DATAGEN}", "topic=t", code=2)
    assert 'error: no connector name: pass NAME, or a --file that names the connector (its "name")' in cli.err
    assert not cli.served.fake.attempts_of("CreateConnector")


def test_create_usage_shows_name_and_entries_as_optional(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["connectors", "create"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "usage: sluiceway connectors create [NAME] [KEY=VALUE ...] [-f FILE] "
        "[--initial-state {running,paused,stopped}]\n"
    )
    assert "required" not in err
    assert "no config given: pass KEY=VALUE arguments or --file" in err
    assert main(["connectors", "create", "--help"]) == 0
    assert "may be left out when the file names the connector" in capsys.readouterr().out


def test_validate_puts_the_name_into_the_config(cli: Cli, tmp_path: Path) -> None:
    out = cli("connectors", "validate", "gen", f"connector.class={DATAGEN}", "topic=t")
    assert out == f"The config of connector gen is valid for {DATAGEN}.\n"
    request = cli.served.fake.attempts_of("ValidateConnectorConfig")[0].request
    assert dict(request.config) == {"connector.class": DATAGEN, "topic": "t", "name": "gen"}

    path = _body(tmp_path, {"name": "from-file", "config": {"connector.class": DATAGEN}})
    out = cli("connectors", "validate", "-f", path, code=1)
    assert out.endswith(f"1 error in the config of connector from-file for {DATAGEN}.\n")
    assert cli.served.fake.attempts_of("ValidateConnectorConfig")[1].request.config["name"] == "from-file"


def test_validate_needs_a_name_as_create_does(cli: Cli) -> None:
    cli("connectors", "validate", f"connector.class={DATAGEN}", "topic=t", code=2)
    assert "usage: sluiceway connectors validate [NAME] [KEY=VALUE ...] [-f FILE]" in cli.err
    assert "no connector name" in cli.err
    assert not cli.served.fake.attempts_of("ValidateConnectorConfig")


# --- item 6: config errors as a table ---------------------------------------------------------


def test_config_errors_of_create_come_as_the_validate_table(cli: Cli) -> None:
    cli.served.fake.fail(
        "CreateConnector",
        rich_status(
            grpc.StatusCode.INVALID_ARGUMENT,
            "Config of connector 'gen' has 3 error(s): ...",
            "INVALID_CONFIG",
            metadata={"connector": "gen", "config_keys": "db.password,tasks.max,topic"},
            violations=[
                ('connector.config["tasks.max"]', "the lowest accepted value is 1 (got 0)"),
                ('connector.config["topic"]', "no value given, and this key has no default"),
                ('connector.config["db.password"]', "wrong"),
            ],
        ),
    )
    argv = ("connectors", "create", "gen", f"connector.class={DATAGEN}", "tasks.max=0", "db.password=s3cret")
    assert cli(*argv, code=1) == ""
    assert cli.err.splitlines() == [
        "error: INVALID_ARGUMENT INVALID_CONFIG: 3 errors in the config of connector gen",
        "",
        "KEY          VALUE     ERROR",
        "tasks.max    0         the lowest accepted value is 1 (got 0)",
        "topic                  no value given, and this key has no default",
        "db.password  [hidden]  wrong",
    ]


def test_a_patch_error_shows_the_value_it_set(cli: Cli) -> None:
    cli.served.fake.fail(
        "PatchConnectorConfig",
        rich_status(
            grpc.StatusCode.INVALID_ARGUMENT,
            "Config of connector 'alpha' has 1 error(s): ...",
            "INVALID_CONFIG",
            metadata={"connector": "alpha"},
            violations=[('set["tasks.max"]', "the lowest accepted value is 1 (got -3)")],
        ),
    )
    cli("connectors", "patch", "alpha", "tasks.max=-3", code=1)
    assert cli.err.splitlines()[2:] == [
        "KEY        VALUE  ERROR",
        "tasks.max  -3     the lowest accepted value is 1 (got -3)",
    ]


# --- item 11: --validate-only -----------------------------------------------------------------


def test_validate_only_prints_the_verdict_alone(cli: Cli) -> None:
    out = cli("connectors", "create", "gen", f"connector.class={DATAGEN}", "topic=t", "--validate-only")
    assert out == "The config is valid; connector gen was not created.\n"
    assert "gen" not in cli.served.fake.connectors
    cli("connectors", "create", "gen", f"connector.class={DATAGEN}", "--validate-only", code=1)
    assert cli.err.splitlines()[2:] == [
        "KEY    VALUE  ERROR",
        "topic         no value given, and this key has no default",
    ]


# --- item 7: what a restart restarts ----------------------------------------------------------


def test_restart_says_what_it_restarts(cli: Cli) -> None:
    cli.served.fake.add_connector("calm", tasks=2)
    first = cli("connectors", "restart", "calm", "--include-tasks", "--only-failed").splitlines()[0]
    assert first == "Nothing restarted: neither connector calm nor any of its tasks is FAILED."
    first = cli("connectors", "restart", "alpha", "--only-failed").splitlines()[0]
    assert first == (
        "Nothing restarted: connector alpha is not FAILED; its task 1 is, and --include-tasks restarts those."
    )
    assert cli("connectors", "restart", "alpha", "--include-tasks", "--only-failed").startswith(
        "Restarting task 1 of connector alpha.\n\n"
    )
    assert cli("connectors", "restart", "alpha", "--include-tasks").startswith(
        "Restarting connector alpha and its tasks 0, 1.\n\n"
    )
    assert cli("connectors", "restart", "alpha").startswith("Restarting connector alpha.\n\n")


def test_a_task_waiting_for_its_automatic_restart_is_not_one_the_request_restarts() -> None:
    waiting = connectors_pb2.InstanceStatus(state=common_pb2.STATE_RESTARTING, restart_attempt=3)
    restarted = connectors_pb2.InstanceStatus(state=common_pb2.STATE_RESTARTING)
    status = connectors_pb2.ConnectorStatus(
        connector=connectors_pb2.InstanceStatus(state=common_pb2.STATE_RUNNING),
        tasks=[
            connectors_pb2.TaskStatus(id=0, status=waiting),
            connectors_pb2.TaskStatus(id=1, status=restarted),
        ],
    )
    assert _restart_summary("gen", status) == "Restarting task 1 of connector gen."
    del status.tasks[1]
    assert _restart_summary("gen", status) == (
        "Nothing restarted: neither connector gen nor any of its tasks is FAILED."
    )


# --- item 5: plugins config -------------------------------------------------------------------

_LONG = (
    "Records each task generates before it idles; -1 generates without end. Once a task has "
    "generated this many, it stays RUNNING with nothing more to do."
)


def _definition() -> plugins_pb2.PluginConfigDefinition:
    def key(name: str, doc: str, group: str) -> plugins_pb2.ConfigKeyDefinition:
        return plugins_pb2.ConfigKeyDefinition(
            name=name, type=plugins_pb2.CONFIG_TYPE_STRING, documentation=doc, group=group
        )

    return plugins_pb2.PluginConfigDefinition(
        plugin=plugins_pb2.Plugin(class_name=DATAGEN, type=plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR),
        # As the server sends them: the framework's keys first.
        keys=[
            key("name", "The connector's name.", "Common"),
            key("tasks.max", "Upper limit on the tasks.", "Common"),
            key("topic.creation.default.partitions", "Partitions of created topics.", "Topic Creation"),
            key("topic", "The topic to write to.", "DataGen"),
            key("max.records", _LONG, "DataGen"),
        ],
    )


def _key_names(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line and not line.startswith(" ")]


def test_plugin_keys_come_before_the_framework_keys() -> None:
    text = render_definition(_definition(), "DataGenSource", wide=True, width=200)
    own, common = text.split("\n\n")[1:3]
    assert own.splitlines()[0] == "Keys of DataGenSourceConnector:"
    assert _key_names(own)[2:] == ["topic", "max.records"]
    assert common.splitlines()[0] == "Keys every source connector has:"
    assert _key_names(common)[2:] == ["name", "tasks.max", "topic.creation.default.partitions"]
    # Both parts share one alignment.
    assert len({line.index("TYPE") for line in text.splitlines() if line.startswith("KEY ")}) == 1


def test_whole_descriptions_are_wrapped_to_the_width() -> None:
    text = render_definition(_definition(), "DataGenSource", wide=True, width=130)
    lines = text.splitlines()
    assert all(len(line) <= 130 for line in lines)
    start = lines[3].index("DESCRIPTION")
    row = next(i for i, line in enumerate(lines) if line.startswith("max.records"))
    # The description continues in its own column on the next lines, and nothing is cut.
    assert lines[row + 1][:start].strip() == ""
    wrapped = " ".join(line[start:] for line in lines[row : row + 3] if line[start:])
    assert _LONG in wrapped
    assert "…" not in text


def test_too_narrow_a_terminal_puts_whole_descriptions_under_their_keys() -> None:
    text = render_definition(_definition(), "DataGenSource", wide=True, width=60)
    assert "DESCRIPTION" not in text
    lines = text.splitlines()
    row = lines.index(next(line for line in lines if line.startswith("max.records")))
    assert lines[row + 1].startswith("    Records each task generates")
    # The key's own columns cannot be narrowed; its description is wrapped to the width.
    assert all(len(line) <= 60 for line in lines if line.startswith("    "))
    assert " ".join(line.strip() for line in lines[row + 1 : row + 4]).startswith(_LONG)


def test_on_a_terminal_descriptions_are_cut_and_wide_is_pointed_to() -> None:
    text = render_definition(_definition(), "DataGenSource", wide=False, width=100)
    assert any(line.startswith("max.records") and line.endswith("…") for line in text.splitlines())
    assert all(len(line) <= 100 for line in text.splitlines())
    assert text.endswith("Descriptions are cut to the terminal's width: --wide shows them whole.\n")


def test_plugins_config_through_a_pipe_shows_whole_descriptions(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    out = cli("plugins", "config", "DataGenSource")
    # The fake's description has two lines; both are there, and no cut mark.
    assert "The topic to write to." in out and "Second line." in out
    assert "…" not in out
    assert cli("plugins", "config", "DataGenSource", "--wide") == out
