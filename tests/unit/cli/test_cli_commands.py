"""CLI commands against the fake control plane: what they send, the tables people read, the
JSON scripts read, and the error format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.cli.connectors import _status_rows
from tests.unit.client.fake_control_plane import DATAGEN, FAILED_TASK_TRACE, FILESINK, Served, rich_status


class Cli:
    def __init__(self, served: Served, capsys: pytest.CaptureFixture[str]) -> None:
        self.served = served
        self.capsys = capsys
        self.err = ""

    def __call__(self, *argv: str, code: int = 0) -> str:
        from sluiceway.cli.main import main

        result = main(["--server", self.served.target, *argv])
        captured = self.capsys.readouterr()
        self.err = captured.err
        assert result == code, captured.err
        return captured.out

    def json(self, *argv: str, code: int = 0) -> Any:
        return json.loads(self("--output", "json", *argv, code=code))


@pytest.fixture
def cli(served: Served, capsys: pytest.CaptureFixture[str]) -> Cli:
    served.fake.add_connector("alpha", tasks=2, failed_task=1)
    served.fake.add_connector("beta", {"connector.class": FILESINK, "topics": "t", "tasks.max": "1"})
    return Cli(served, capsys)


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_list_views(cli: Cli) -> None:
    assert cli("connectors", "list") == "NAME\nalpha\nbeta\n"
    status = cli("connectors", "list", "--view", "status")
    assert status.splitlines()[0].split() == ["NAME", "TYPE", "STATE", "WORKER", "TASKS"]
    assert "alpha  source  RUNNING  replica-1  1 FAILED, 1 RUNNING" in status
    info = _lines(cli("connectors", "list", "--view", "info"))
    assert info[1] == ["alpha", "source", DATAGEN, "RUNNING", "2"]
    assert info[2] == ["beta", "sink", FILESINK, "RUNNING", "1"]
    full = cli("connectors", "list", "--view", "full")
    assert full.splitlines()[0].split() == ["NAME", "TYPE", "CLASS", "TARGET", "STATE", "TASKS"]
    # Columns are aligned: every row's second column starts at the same offset.
    rows = full.splitlines()
    assert len({row.index(row.split()[1], len(row.split()[0])) for row in rows}) == 1
    assert all(row == row.rstrip() for row in rows)


def test_list_json_uses_proto_field_names(cli: Cli) -> None:
    data = cli.json("connectors", "list", "--view", "info")
    assert [c["name"] for c in data["connectors"]] == ["connectors/alpha", "connectors/beta"]
    first = data["connectors"][0]
    assert first["target_state"] == "TARGET_STATE_RUNNING"
    assert first["type"] == "CONNECTOR_TYPE_SOURCE"
    assert "config_position" in first
    assert first["config"]["topic"] == "alpha-topic"


def test_empty_list(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    cli = Cli(served, capsys)
    assert cli("connectors", "list") == "No connectors.\n"
    assert cli.json("connectors", "list") == {"connectors": []}


def test_create_from_arguments(cli: Cli) -> None:
    out = cli(
        "connectors", "create", "gen", f"connector.class={DATAGEN}", "topic=t", "--initial-state", "PAUSED"
    )
    assert out.startswith("Created connector gen.\n")
    assert "Target state:  PAUSED" in out
    request = cli.served.fake.attempts_of("CreateConnector")[0].request
    assert request.initial_state == connectors_pb2.INITIAL_STATE_PAUSED
    assert dict(request.connector.config) == {"connector.class": DATAGEN, "topic": "t"}


def test_create_from_a_kafka_connect_body(cli: Cli, tmp_path: Path) -> None:
    body = {
        "name": "gen",
        "config": {"connector.class": DATAGEN, "topic": "t", "tasks.max": 3},
        "initial_state": "STOPPED",
    }
    path = tmp_path / "gen.json"
    path.write_text(json.dumps(body))
    created = cli.json("connectors", "create", "gen", "--file", str(path), "topic=override")
    assert created["config"] == {"connector.class": DATAGEN, "topic": "override", "tasks.max": "3"}
    assert created["target_state"] == "TARGET_STATE_STOPPED"
    cli("connectors", "create", "other", "--file", str(path), code=2)
    assert """NAME is 'other', the file's "name" is 'gen'""" in cli.err


def test_create_from_properties_and_validate_only(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "gen.properties"
    path.write_text(f"# generator\nconnector.class = {DATAGEN}\ntopic: t\n")
    out = cli("connectors", "create", "gen", "-f", str(path), "--validate-only")
    assert out == "The config is valid; connector gen was not created.\n"
    assert cli.served.fake.attempts_of("CreateConnector")[0].request.validate_only
    assert "gen" not in cli.served.fake.connectors


def test_create_rejects_nulls_and_reports_field_violations(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"connector.class": "X", "topic": null}')
    cli("connectors", "create", "gen", "-f", str(path), code=1)
    assert "only meaningful for a patch" in cli.err

    cli("connectors", "create", "gen", "connector.class=DataGenSource", code=1)
    assert cli.err.splitlines() == [
        "error: INVALID_ARGUMENT INVALID_CONFIG: 1 error in the config of connector gen",
        "",
        "KEY    VALUE  ERROR",
        "topic         no value given, and this key has no default",
    ]


# The fake's failed task in a status table, up to its ERROR: no RATE or LAG while it is not running.
FAILED_TASK_CELLS = ["task", "1", "FAILED", "-", "-", "executor-1", "2.2", "2023-11-14T22:13:20Z"]


def test_get_shows_config_and_status(cli: Cli) -> None:
    out = cli("connectors", "get", "alpha")
    assert "Name:          alpha\n" in out
    assert "State:         RUNNING on replica-1\n" in out
    assert _lines(out.split("\n\n")[1])[0] == ["KEY", "VALUE"]
    task_1 = next(line for line in out.splitlines() if line.startswith("task 1 "))
    assert task_1.split()[:8] == FAILED_TASK_CELLS
    assert "KafkaDeliveryError: deliv" in task_1
    data = cli.json("connectors", "get", "connectors/alpha", "--view", "info")
    assert data["name"] == "connectors/alpha"
    assert data["tasks"] == ["connectors/alpha/tasks/0", "connectors/alpha/tasks/1"]


def test_errors_go_to_stderr_with_exit_1(cli: Cli) -> None:
    out = cli("connectors", "get", "nope", code=1)
    assert out == ""
    assert cli.err == "error: NOT_FOUND CONNECTOR_NOT_FOUND: Connector nope not found\n"
    cli("connectors", "get", "a/b", code=1)
    assert cli.err.startswith("error: INVALID_ARGUMENT INVALID_REQUEST: ")


def test_config_show_and_replace(cli: Cli, tmp_path: Path) -> None:
    assert _lines(cli("connectors", "config", "beta")) == [
        ["KEY", "VALUE"],
        ["connector.class", FILESINK],
        ["tasks.max", "1"],
        ["topics", "t"],
    ]
    assert cli.json("connectors", "config", "beta") == {
        "connector.class": FILESINK,
        "topics": "t",
        "tasks.max": "1",
    }

    out = cli("connectors", "config", "beta", f"connector.class={FILESINK}", "topics=u")
    assert out.startswith("Replaced the config of beta.")
    assert dict(cli.served.fake.connectors["beta"].config) == {"connector.class": FILESINK, "topics": "u"}

    path = tmp_path / "new.properties"
    path.write_text(f"connector.class={DATAGEN}\ntopic=n\n")
    data = cli.json("connectors", "config", "gamma", "--file", str(path))
    assert data["created"] is True
    assert data["connector"]["config"]["topic"] == "n"


def test_patch(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "patch.json"
    path.write_text('{"config": {"topics": null, "file.from": "yes", "tasks.max": 4}}')
    out = cli("connectors", "patch", "beta", "-f", str(path), "extra=1", "--remove", "nothing")
    assert out.startswith("Patched connector beta.")
    request = cli.served.fake.attempts_of("PatchConnectorConfig")[0].request
    assert dict(request.set) == {"file.from": "yes", "tasks.max": "4", "extra": "1"}
    assert list(request.remove) == ["topics", "nothing"]
    assert "topics" not in cli.served.fake.connectors["beta"].config


def test_lifecycle_commands(cli: Cli) -> None:
    assert cli("connectors", "stop", "alpha") == "Stopped connector alpha.\n"
    assert cli.served.fake.connectors["alpha"].target == common_pb2.TARGET_STATE_STOPPED
    assert cli("connectors", "pause", "alpha") == "Paused connector alpha.\n"
    assert cli.json("connectors", "resume", "alpha")["target_state"] == "TARGET_STATE_RUNNING"
    assert (
        cli("connectors", "delete", "beta", "--delete-offsets", "--wait")
        == "Deleted connector beta and its offsets.\nIts deleted() callback: SUCCEEDED.\n"
    )
    request = cli.served.fake.attempts_of("DeleteConnector")[0].request
    assert (request.delete_offsets, request.wait) == (True, True)
    assert cli.json("connectors", "delete", "alpha") == {
        "deleted_callback": {"error": "", "outcome": "OUTCOME_PENDING"}
    }


def test_restart(cli: Cli) -> None:
    out = cli("connectors", "restart", "alpha", "--include-tasks", "--only-failed")
    assert out.startswith("Restarting task 1 of connector alpha.\n")
    rows = {row[0] + " " + row[1]: row for row in _lines(out)[3:] if row[0] == "task"}
    assert rows["task 1"][2] == "RESTARTING"
    assert rows["task 0"][2] == "RUNNING"
    assert cli("connectors", "restart", "alpha", "--task", "1") == "Restarting task 1 of connector alpha.\n"
    assert cli.served.fake.attempts_of("RestartTask")[0].request.name == "connectors/alpha/tasks/1"
    cli("connectors", "restart", "alpha", "--task", "9", code=1)
    assert "TASK_NOT_FOUND" in cli.err


def test_status_table_is_readable(cli: Cli) -> None:
    out = cli("connectors", "status", "alpha")
    header, *rows = out.splitlines()[2:]
    assert header.split() == ["INSTANCE", "STATE", "RATE", "LAG", "WORKER", "GENERATION", "UPDATED", "ERROR"]
    # The error is the exception closest to the cause, type and message; the generation reads as
    # leader epoch . assignment; UPDATED is the time of the last change.
    assert rows[0].split() == ["connector", "RUNNING", "replica-1", "2", "2023-11-14T22:13:20Z"]
    # RATE is records per second over the last minute, LAG a sink's records not yet committed.
    assert rows[1].split() == [
        "task",
        "0",
        "RUNNING",
        "1,234/s",
        "25,000",
        "executor-1",
        "2.1",
        "2023-11-14T22:13:20Z",
    ]
    assert rows[2].split(maxsplit=8) == [
        *FAILED_TASK_CELLS,
        "KafkaDeliveryError: delivery to topic orders failed: Broker: Leader not available",
    ]
    assert cli.json("connectors", "status", "alpha")["tasks"][1]["status"]["trace"] == FAILED_TASK_TRACE


def test_status_and_tasks(cli: Cli) -> None:
    out = cli("connectors", "status", "alpha")
    assert out.startswith("Connector alpha (source)\n\n")
    assert "Task 1 trace" not in out
    assert "Traceback" not in out
    traced = cli("connectors", "status", "alpha", "--verbose")
    assert "Task 1 trace:\n" + FAILED_TASK_TRACE in traced
    assert cli("connectors", "status", "alpha", "--trace") == traced
    data = cli.json("connectors", "status", "alpha")
    assert data["tasks"][1]["status"]["state"] == "STATE_FAILED"
    assert data["connector"]["worker_id"] == "replica-1"

    tasks = _lines(cli("connectors", "tasks", "alpha"))
    assert tasks[0] == ["TASK", "KEY", "VALUE"]
    assert ["1", "task.id", "1"] in tasks
    assert [t["name"] for t in cli.json("connectors", "tasks", "alpha")["tasks"]] == [
        "connectors/alpha/tasks/0",
        "connectors/alpha/tasks/1",
    ]


def test_validate_exit_codes(cli: Cli) -> None:
    out = cli("connectors", "validate", "gen", "connector.class=DataGenSource", code=1)
    assert "topic" in out
    assert out.endswith(f"1 error in the config of connector gen for {DATAGEN}.\n")
    ok = cli("connectors", "validate", "gen", "topic=t", "--plugin", "DataGenSource")
    assert ok == f"The config of connector gen is valid for {DATAGEN}.\n"
    data = cli.json("connectors", "validate", "gen", "connector.class=DataGenSource", code=1)
    assert data["error_count"] == 1


def test_plugins(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    rows = _lines(cli("plugins", "list"))
    assert rows[0] == ["CLASS", "TYPE", "VERSION", "ALIASES"]
    assert rows[1][:3] == [DATAGEN, "source", "0.1.0"]
    assert len(cli.json("plugins", "list", "--all")["plugins"]) == 3
    out = cli("plugins", "config", "DataGenSource")
    assert out.startswith(f"{DATAGEN} (source 0.1.0)\n")
    assert ["topic", "STRING", "yes", "-", "HIGH", "The", "topic", "to", "write", "to."] in _lines(out)
    cli("plugins", "config", "Nope", code=1)
    assert cli.err.startswith("error: NOT_FOUND PLUGIN_NOT_FOUND: ")


def test_cluster_info(cli: Cli) -> None:
    out = cli("cluster", "info")
    assert "Leader:           replica-1 (epoch 4)\n" in out
    assert ["replica-1", "10.0.0.1:8083", "yes", "4"] in _lines(out)
    assert ["executor-1", "connectors/a/tasks/0"] in _lines(out)
    assert cli.json("cluster", "info")["this_replica"]["id"] == "replica-2"


def test_offsets_round_trip_through_json(cli: Cli, tmp_path: Path) -> None:
    cli("connectors", "stop", "alpha")
    path = tmp_path / "offsets.json"
    path.write_text(
        json.dumps(
            {
                "offsets": [
                    {"partition": {"task": 0}, "offset": {"seq": 41}},
                    {"partition": {"task": 1}, "offset": {"seq": 7}},
                ]
            }
        )
    )
    assert cli("offsets", "alter", "alpha", "--file", str(path)) == (
        "Offsets of connector alpha altered; the connector acknowledged the change\n"
    )
    assert _lines(cli("offsets", "get", "alpha")) == [
        ["PARTITION", "OFFSET"],
        ['{"task":', "0}", '{"seq":', "41}"],
        ['{"task":', "1}", '{"seq":', "7}"],
    ]
    exported = cli.json("offsets", "get", "alpha")
    # Struct numbers come out as integers, so the output feeds `offsets alter` unchanged.
    assert exported["offsets"][0] == {"partition": {"task": 0}, "offset": {"seq": 41}}
    path.write_text(json.dumps(exported))
    cli("offsets", "alter", "alpha", "-f", str(path))
    assert "reset" in cli("offsets", "reset", "alpha")
    assert cli("offsets", "get", "alpha") == "No offsets for connector alpha.\n"


def test_offsets_need_a_stopped_connector(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "offsets.json"
    path.write_text('[{"partition": {"task": 0}, "offset": null}]')
    cli("offsets", "alter", "alpha", "-f", str(path), code=1)
    assert cli.err.startswith(
        "error: FAILED_PRECONDITION CONNECTOR_NOT_STOPPED: Connector alpha is RUNNING; offsets change only"
    )


def test_topics(cli: Cli) -> None:
    cli.served.fake.connectors["alpha"].topics = {"b", "a"}
    assert cli("topics", "get", "alpha") == "TOPIC\na\nb\n"
    assert sorted(cli.json("topics", "get", "alpha")["topics"]) == ["a", "b"]
    assert cli("topics", "reset", "alpha") == "Reset the active topics of connector alpha.\n"
    assert cli("topics", "get", "alpha") == "No active topics for connector alpha.\n"
    cli.served.fake.deleted_topics["gone"] = {"orders"}
    assert cli("topics", "get", "gone") == (
        "Connector gone was deleted; its active topics are still recorded.\nTOPIC\norders\n"
    )
    cli.served.fake.fail(
        "GetActiveTopics",
        rich_status(
            grpc.StatusCode.PERMISSION_DENIED,
            "Topic tracking is disabled.",
            "TOPIC_TRACKING_DISABLED",
        ),
    )
    cli("topics", "get", "alpha", code=1)
    assert cli.err == "error: PERMISSION_DENIED TOPIC_TRACKING_DISABLED: Topic tracking is disabled.\n"


def test_cells_with_newlines_stay_on_one_row(cli: Cli) -> None:
    cli.served.fake.connectors["beta"].config["multi"] = "line1\nline2\ttab"
    out = cli("connectors", "config", "beta")
    assert "multi            line1\\nline2\\ttab" in out


def test_watch(cli: Cli) -> None:
    cli.served.fake.watch_events.append(connectors_pb2.StatusEvent(name="connectors/gone", removed=True))
    lines = cli("connectors", "watch", "alpha").splitlines()
    assert lines == [
        "2023-11-14T22:13:20Z  alpha  RUNNING  replica-1",
        "2023-11-14T22:13:20Z  alpha task 0  RUNNING  executor-1",
        "2023-11-14T22:13:20Z  alpha task 1  FAILED  executor-1",
        "-  gone  REMOVED  -",
    ]
    request = cli.served.fake.attempts_of("WatchStatus")[0].request
    assert (request.name, request.include_initial) == ("connectors/alpha", True)
    events = [
        json.loads(line) for line in cli("-o", "json", "connectors", "watch", "--no-initial").splitlines()
    ]
    # One object per line; an unset message field (status) is omitted, scalars are not.
    assert events == [{"name": "connectors/gone", "removed": True}]
    assert not cli.served.fake.attempts_of("WatchStatus")[1].request.include_initial


def test_client_side_errors_are_not_repeated(cli: Cli) -> None:
    cli("connectors", "status", "a/b", code=1)
    assert cli.err.count("is not a connector name") == 1


def test_a_task_waiting_for_an_automatic_restart_shows_which_and_when() -> None:
    waiting = connectors_pb2.InstanceStatus(state=common_pb2.STATE_RESTARTING, restart_attempt=2)
    waiting.next_restart_time.FromMilliseconds(1_700_000_007_000)
    status = connectors_pb2.ConnectorStatus(
        connector=connectors_pb2.InstanceStatus(state=common_pb2.STATE_RUNNING),
        tasks=[connectors_pb2.TaskStatus(id=0, status=waiting)],
    )
    rows = _status_rows(status)
    assert rows[0][1] == "RUNNING"
    assert rows[1][1] == "RESTARTING (restart 2 at 2023-11-14T22:13:27Z)"


def test_top_prints_one_snapshot_when_not_on_a_terminal(cli: Cli) -> None:
    out = cli("connectors", "top")
    title, header, *rows = [line for line in out.splitlines() if line.strip()]
    assert title.strip().endswith(": 2 connector(s), 3 task(s)")
    assert header.split() == ["CONNECTOR", "TASK", "STATE", "RATE", "LAG", "RESTARTS", "WORKER"]
    assert rows[0].split() == ["alpha", "0", "RUNNING", "1,234/s", "25,000", "0", "executor-1"]
    assert rows[1].split() == ["alpha", "1", "FAILED", "-", "-", "-", "executor-1"]
    assert rows[2].split()[:3] == ["beta", "0", "RUNNING"]
    listed = cli.json("connectors", "top")
    assert [(t["connector"], t["task"], t["state"]) for t in listed] == [
        ("alpha", 0, "RUNNING"),
        ("alpha", 1, "FAILED"),
        ("beta", 0, "RUNNING"),
    ]
    assert listed[0]["progress"]["lag"] == "25000"
    cli("connectors", "top", "--interval", "0", code=2)
