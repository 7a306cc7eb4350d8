"""ConnectorService over the real socket: a real `sluiceway server` process, a real broker."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import cluster_pb2, common_pb2, connectors_pb2, plugins_pb2
from tests.integration.api_helpers import Stubs, failure, read_topic, wait_until

pytestmark = pytest.mark.integration

TARGETS = {
    "running": common_pb2.TARGET_STATE_RUNNING,
    "paused": common_pb2.TARGET_STATE_PAUSED,
    "stopped": common_pb2.TARGET_STATE_STOPPED,
}
INITIAL = {
    "running": connectors_pb2.INITIAL_STATE_RUNNING,
    "paused": connectors_pb2.INITIAL_STATE_PAUSED,
    "stopped": connectors_pb2.INITIAL_STATE_STOPPED,
}
CONTROLLABLE = "testing_connectors.ControllableSourceConnector"


def datagen(unique: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": "2", **extra}


def cname(name: str) -> str:
    return f"connectors/{name}"


def create(
    stubs: Stubs, name: str, config: dict[str, str], initial: str = "running", request_id: str = ""
) -> connectors_pb2.Connector:
    return stubs.connectors.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=name,
            connector=connectors_pb2.Connector(config=config),
            initial_state=INITIAL[initial],
            request_id=request_id,
        ),
        timeout=30,
    )


def status(stubs: Stubs, name: str) -> connectors_pb2.ConnectorStatus:
    return stubs.connectors.GetConnectorStatus(
        connectors_pb2.GetConnectorStatusRequest(name=cname(name)), timeout=10
    )


def task_count(stubs: Stubs, name: str) -> int:
    return len(
        stubs.connectors.ListTasks(connectors_pb2.ListTasksRequest(parent=cname(name)), timeout=10).tasks
    )


def wait_state(
    stubs: Stubs, name: str, state: common_pb2.State.ValueType, tasks: int | None = None
) -> connectors_pb2.ConnectorStatus:
    def probe() -> connectors_pb2.ConnectorStatus | None:
        current = status(stubs, name)
        if current.connector.state != state:
            return None
        if tasks is not None and len(current.tasks) != tasks:
            return None
        return current

    return wait_until(probe, what=f"{name} in state {common_pb2.State.Name(state)} with {tasks} tasks")


def transition(stubs: Stubs, name: str, op: str) -> connectors_pb2.Connector:
    calls: dict[str, Callable[..., connectors_pb2.Connector]] = {
        "pause": lambda: stubs.connectors.PauseConnector(
            connectors_pb2.PauseConnectorRequest(name=cname(name)), timeout=30
        ),
        "resume": lambda: stubs.connectors.ResumeConnector(
            connectors_pb2.ResumeConnectorRequest(name=cname(name)), timeout=30
        ),
        "stop": lambda: stubs.connectors.StopConnector(
            connectors_pb2.StopConnectorRequest(name=cname(name)), timeout=30
        ),
    }
    return calls[op]()


@pytest.fixture
def stubs(channel: grpc.Channel) -> Stubs:
    return Stubs.of(channel)


def test_create_get_list_tasks_and_delete(stubs: Stubs, unique: str) -> None:
    name = f"dg-{unique}"
    created = create(stubs, name, datagen(unique))
    assert created.name == cname(name)
    assert created.config["name"] == name
    assert created.target_state == common_pb2.TARGET_STATE_RUNNING
    assert created.type == common_pb2.CONNECTOR_TYPE_SOURCE

    current = wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)
    # Tasks exist but no executor runs them yet: UNASSIGNED is the truth.
    assert [t.status.state for t in current.tasks] == [common_pb2.STATE_UNASSIGNED] * 2
    assert [t.name for t in current.tasks] == [f"connectors/{name}/tasks/0", f"connectors/{name}/tasks/1"]

    got = stubs.connectors.GetConnector(connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10)
    assert list(got.tasks) == [f"connectors/{name}/tasks/0", f"connectors/{name}/tasks/1"]
    assert got.config["topic"] == f"t-{unique}"

    tasks = stubs.connectors.ListTasks(connectors_pb2.ListTasksRequest(parent=cname(name)), timeout=10).tasks
    assert [t.config["task.id"] for t in tasks] == ["0", "1"]
    assert all(t.config["task.class"].endswith("DataGenBatchTask") for t in tasks)

    task = stubs.connectors.GetTaskStatus(
        connectors_pb2.GetTaskStatusRequest(name=f"connectors/{name}/tasks/1"), timeout=10
    )
    assert task.id == 1 and task.status.state == common_pb2.STATE_UNASSIGNED

    names = [
        c.name
        for c in stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(), timeout=10
        ).connectors
    ]
    assert cname(name) in names

    stubs.connectors.DeleteConnector(connectors_pb2.DeleteConnectorRequest(name=cname(name)), timeout=30)
    gone = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10
        )
    )
    assert gone.code == grpc.StatusCode.NOT_FOUND
    names = [
        c.name
        for c in stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(), timeout=10
        ).connectors
    ]
    assert cname(name) not in names


def test_unknown_connector_and_task_are_not_found(stubs: Stubs, unique: str) -> None:
    missing = cname(f"missing-{unique}")
    calls: list[Callable[[], object]] = [
        lambda: stubs.connectors.GetConnector(connectors_pb2.GetConnectorRequest(name=missing), timeout=10),
        lambda: stubs.connectors.GetConnectorStatus(
            connectors_pb2.GetConnectorStatusRequest(name=missing), timeout=10
        ),
        lambda: stubs.connectors.ListTasks(connectors_pb2.ListTasksRequest(parent=missing), timeout=10),
        lambda: stubs.connectors.PauseConnector(
            connectors_pb2.PauseConnectorRequest(name=missing), timeout=10
        ),
        lambda: stubs.connectors.ResumeConnector(
            connectors_pb2.ResumeConnectorRequest(name=missing), timeout=10
        ),
        lambda: stubs.connectors.StopConnector(connectors_pb2.StopConnectorRequest(name=missing), timeout=10),
        lambda: stubs.connectors.RestartConnector(
            connectors_pb2.RestartConnectorRequest(name=missing), timeout=10
        ),
        lambda: stubs.connectors.DeleteConnector(
            connectors_pb2.DeleteConnectorRequest(name=missing), timeout=10
        ),
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(name=missing, set={"a": "b"}), timeout=10
        ),
        lambda: stubs.connectors.RestartTask(
            connectors_pb2.RestartTaskRequest(name=f"{missing}/tasks/0"), timeout=10
        ),
    ]
    for call in calls:
        result = failure(call)
        assert result.code == grpc.StatusCode.NOT_FOUND
        assert result.reason == "CONNECTOR_NOT_FOUND"
        assert result.domain == "sluiceway"

    name = f"dg-{unique}"
    create(stubs, name, datagen(unique, **{"tasks.max": "1"}))
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)
    result = failure(
        lambda: stubs.connectors.GetTaskStatus(
            connectors_pb2.GetTaskStatusRequest(name=f"{cname(name)}/tasks/5"), timeout=10
        )
    )
    assert (result.code, result.reason) == (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")


def test_duplicate_create_is_already_exists(stubs: Stubs, unique: str) -> None:
    name = f"dup-{unique}"
    create(stubs, name, datagen(unique))
    result = failure(lambda: create(stubs, name, datagen(unique)))
    assert (result.code, result.reason) == (grpc.StatusCode.ALREADY_EXISTS, "CONNECTOR_ALREADY_EXISTS")


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"topic": "t", "tasks.max": "1"}, "connector.class"),
        ({"connector.class": "NoSuchConnector", "topic": "t"}, "connector.class"),
        ({"connector.class": "DataGenSource", "topic": "t", "tasks.max": "0"}, "tasks.max"),
        ({"connector.class": "DataGenSource", "topic": "t", "tasks.max": "many"}, "tasks.max"),
        ({"connector.class": "DataGenSource", "topic": "t", "records.per.sec": "-1"}, "records.per.sec"),
        ({"connector.class": "DataGenSource"}, "topic"),
        ({"connector.class": "SparkFileSink", "topics": "a", "path": "/tmp/x", "format": "xml"}, "format"),
    ],
    ids=[
        "missing-class",
        "unknown-class",
        "tasks-max-0",
        "tasks-max-text",
        "plugin-field",
        "plugin-required",
        "sink-format",
    ],
)
def test_invalid_config_names_the_field_and_writes_nothing(
    stubs: Stubs, unique: str, control_plane: object, broker: object, config: dict[str, str], field: str
) -> None:
    name = f"bad-{unique}"
    result = failure(lambda: create(stubs, name, config))
    assert result.code == grpc.StatusCode.INVALID_ARGUMENT
    assert result.reason == "INVALID_CONFIG"
    # BadRequest names the request field (AIP-193); ErrorInfo metadata keeps the config key.
    assert f'connector.config["{field}"]' in result.violations, result.violations
    assert field in result.metadata["config_keys"].split(",")
    assert field in result.message
    # Nothing reached the config topic, and the connector does not exist.
    keys = {key for key, _ in read_topic(broker.bootstrap_servers, control_plane.topics["config"])}  # type: ignore[attr-defined]
    assert not {k for k in keys if k and k.endswith(name)}
    missing = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10
        )
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND


def test_invalid_request_fields(stubs: Stubs, unique: str) -> None:
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: create(stubs, f"a/{unique}", datagen(unique)), "connector_id"),
        (lambda: create(stubs, "", datagen(unique)), "connector_id"),
        (lambda: create(stubs, " padded ", datagen(unique)), "connector_id"),
        (
            lambda: stubs.connectors.GetConnector(
                connectors_pb2.GetConnectorRequest(name=f"dg-{unique}"), timeout=10
            ),
            "name",
        ),
        (
            lambda: stubs.connectors.ListConnectors(
                connectors_pb2.ListConnectorsRequest(page_size=-1), timeout=10
            ),
            "page_size",
        ),
        (
            lambda: stubs.connectors.ListConnectors(
                connectors_pb2.ListConnectorsRequest(page_token="%%%"), timeout=10
            ),
            "page_token",
        ),
        (
            lambda: stubs.connectors.GetTaskStatus(
                connectors_pb2.GetTaskStatusRequest(name="connectors/x/tasks/one"), timeout=10
            ),
            "name",
        ),
        (
            lambda: create(stubs, f"n-{unique}", {**datagen(unique), "name": "other"}),
            'connector.config["name"]',
        ),
    ]
    for call, field in cases:
        result = failure(call)
        assert result.code == grpc.StatusCode.INVALID_ARGUMENT, (field, result)
        assert field in result.violations, (field, result)


@pytest.mark.parametrize("initial", ["running", "paused", "stopped"])
def test_transitions_from_every_state(stubs: Stubs, unique: str, initial: str) -> None:
    name = f"tr-{initial}-{unique}"
    created = create(stubs, name, datagen(unique), initial=initial)
    assert created.target_state == TARGETS[initial]
    expected_tasks = {"running": 2, "paused": 0, "stopped": 0}[initial]
    state = {
        "running": common_pb2.STATE_RUNNING,
        "paused": common_pb2.STATE_PAUSED,
        "stopped": common_pb2.STATE_STOPPED,
    }
    wait_state(stubs, name, state[initial], tasks=expected_tasks)

    # stop is idempotent and leaves an empty task set
    for _ in range(2):
        assert transition(stubs, name, "stop").target_state == common_pb2.TARGET_STATE_STOPPED
        wait_state(stubs, name, common_pb2.STATE_STOPPED, tasks=0)
        assert task_count(stubs, name) == 0
    # pause of a stopped connector (KIP-875; Kafka as shipped differs): the connector is started to
    # generate its tasks, which then exist, paused
    assert transition(stubs, name, "pause").target_state == common_pb2.TARGET_STATE_PAUSED
    wait_state(stubs, name, common_pb2.STATE_PAUSED, tasks=2)
    # resume runs them
    assert transition(stubs, name, "resume").target_state == common_pb2.TARGET_STATE_RUNNING
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)
    # pause keeps the tasks; resume runs again
    transition(stubs, name, "pause")
    wait_state(stubs, name, common_pb2.STATE_PAUSED, tasks=2)
    transition(stubs, name, "pause")
    wait_state(stubs, name, common_pb2.STATE_PAUSED, tasks=2)
    transition(stubs, name, "resume")
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)
    transition(stubs, name, "resume")
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)
    # a stopped connector can be deleted
    transition(stubs, name, "stop")
    wait_state(stubs, name, common_pb2.STATE_STOPPED, tasks=0)
    stubs.connectors.DeleteConnector(connectors_pb2.DeleteConnectorRequest(name=cname(name)), timeout=30)
    assert failure(lambda: status(stubs, name)).code == grpc.StatusCode.NOT_FOUND


def test_failed_connector_shows_failed_then_stopped(stubs: Stubs, unique: str) -> None:
    name = f"fail-{unique}"
    create(stubs, name, {"connector.class": CONTROLLABLE, "fail.start": "true"})
    failed = wait_state(stubs, name, common_pb2.STATE_FAILED)
    assert "start failed on purpose" in failed.connector.trace
    assert (
        failed.connector.recent_errors
        and "start failed on purpose" in failed.connector.recent_errors[0].trace
    )

    transition(stubs, name, "stop")
    stopped = wait_state(stubs, name, common_pb2.STATE_STOPPED, tasks=0)
    assert stopped.connector.trace == ""
    # the history of errors survives the transition
    assert stopped.connector.recent_errors
    # update_time is when the state changed: the failure first, the stop after it
    failed_at = failed.connector.update_time.ToMilliseconds()
    assert 0 < failed_at <= stopped.connector.update_time.ToMilliseconds()
    assert abs(failed_at - failed.connector.recent_errors[0].time.ToMilliseconds()) < 10_000

    # resume starts it again — and it fails again
    transition(stubs, name, "resume")
    wait_state(stubs, name, common_pb2.STATE_FAILED)
    # fixing the config restarts it with the new config
    stubs.connectors.PatchConnectorConfig(
        connectors_pb2.PatchConnectorConfigRequest(name=cname(name), set={"fail.start": "false"}), timeout=30
    )
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)


def test_connector_failing_during_stop_still_stops(stubs: Stubs, unique: str, tmp_path: Path) -> None:
    name = f"failstop-{unique}"
    marker = tmp_path / "calls"
    create(stubs, name, {"connector.class": CONTROLLABLE, "fail.stop": "true", "marker.file": str(marker)})
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)
    transition(stubs, name, "stop")
    wait_state(stubs, name, common_pb2.STATE_STOPPED, tasks=0)
    assert marker.read_text().split() == ["start", "stop"]
    transition(stubs, name, "resume")
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)


def test_connector_failing_before_and_during_stop_stops_and_resumes(stubs: Stubs, unique: str) -> None:
    name = f"failboth-{unique}"
    create(stubs, name, {"connector.class": CONTROLLABLE, "fail.start": "true", "fail.stop": "true"})
    wait_state(stubs, name, common_pb2.STATE_FAILED)
    transition(stubs, name, "stop")
    wait_state(stubs, name, common_pb2.STATE_STOPPED, tasks=0)
    stubs.connectors.PatchConnectorConfig(
        connectors_pb2.PatchConnectorConfigRequest(name=cname(name), set={"fail.start": "false"}), timeout=30
    )
    transition(stubs, name, "resume")
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)


def test_restart_connector_and_plan(stubs: Stubs, unique: str, tmp_path: Path) -> None:
    name = f"rs-{unique}"
    marker = tmp_path / "calls"
    create(
        stubs,
        name,
        {"connector.class": CONTROLLABLE, "task.count": "2", "tasks.max": "2", "marker.file": str(marker)},
    )
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)

    planned = stubs.connectors.RestartConnector(
        connectors_pb2.RestartConnectorRequest(name=cname(name)), timeout=30
    )
    assert planned.connector.state == common_pb2.STATE_RESTARTING
    assert [t.status.state for t in planned.tasks] == [common_pb2.STATE_UNASSIGNED] * 2
    wait_until(
        lambda: marker.read_text().split() == ["start", "stop", "start"], what="connector restarted once"
    )
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)

    # only_failed on a healthy connector restarts nothing
    planned = stubs.connectors.RestartConnector(
        connectors_pb2.RestartConnectorRequest(name=cname(name), only_failed=True, include_tasks=True),
        timeout=30,
    )
    assert planned.connector.state == common_pb2.STATE_RUNNING
    assert [t.status.state for t in planned.tasks] == [common_pb2.STATE_UNASSIGNED] * 2
    # include_tasks plans every task
    planned = stubs.connectors.RestartConnector(
        connectors_pb2.RestartConnectorRequest(name=cname(name), include_tasks=True), timeout=30
    )
    assert [t.status.state for t in planned.tasks] == [common_pb2.STATE_RESTARTING] * 2
    wait_until(lambda: marker.read_text().split().count("start") == 3, what="second restart")
    time.sleep(0.5)
    assert marker.read_text().split() == ["start", "stop", "start", "stop", "start"]

    stubs.connectors.RestartTask(connectors_pb2.RestartTaskRequest(name=f"{cname(name)}/tasks/1"), timeout=10)


def test_restart_failed_connector_with_only_failed(stubs: Stubs, unique: str) -> None:
    name = f"rsf-{unique}"
    create(stubs, name, {"connector.class": CONTROLLABLE, "fail.start": "true"})
    wait_state(stubs, name, common_pb2.STATE_FAILED)
    planned = stubs.connectors.RestartConnector(
        connectors_pb2.RestartConnectorRequest(name=cname(name), only_failed=True), timeout=30
    )
    assert planned.connector.state == common_pb2.STATE_RESTARTING
    again = wait_state(stubs, name, common_pb2.STATE_FAILED)
    assert len(again.connector.recent_errors) >= 2


def test_replace_and_patch_config(stubs: Stubs, unique: str) -> None:
    name = f"cfg-{unique}"
    first = stubs.connectors.ReplaceConnectorConfig(
        connectors_pb2.ReplaceConnectorConfigRequest(name=cname(name), config=datagen(unique)), timeout=30
    )
    assert first.created
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=2)
    second = stubs.connectors.ReplaceConnectorConfig(
        connectors_pb2.ReplaceConnectorConfigRequest(
            name=cname(name), config=datagen(unique, **{"tasks.max": "3"})
        ),
        timeout=30,
    )
    assert not second.created
    assert second.connector.config["tasks.max"] == "3"
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=3)

    patched = stubs.connectors.PatchConnectorConfig(
        connectors_pb2.PatchConnectorConfigRequest(
            name=cname(name), set={"records.per.sec": "5"}, remove=["tasks.max"]
        ),
        timeout=30,
    )
    assert patched.config["records.per.sec"] == "5"
    assert "tasks.max" not in patched.config
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)

    bad = failure(
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(name=cname(name), set={"records.per.sec": "-3"}),
            timeout=30,
        )
    )
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT and 'set["records.per.sec"]' in bad.violations
    renamed = failure(
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(name=cname(name), remove=["name"]), timeout=30
        )
    )
    assert renamed.code == grpc.StatusCode.INVALID_ARGUMENT and "remove" in renamed.violations
    unchanged = stubs.connectors.GetConnector(
        connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10
    )
    assert unchanged.config["records.per.sec"] == "5"

    invalid = failure(
        lambda: stubs.connectors.ReplaceConnectorConfig(
            connectors_pb2.ReplaceConnectorConfigRequest(
                name=cname(name), config={"connector.class": "DataGenSource"}
            ),
            timeout=30,
        )
    )
    assert invalid.code == grpc.StatusCode.INVALID_ARGUMENT and 'config["topic"]' in invalid.violations
    assert invalid.metadata["config_keys"] == "topic"


def test_password_fields_are_masked(stubs: Stubs, unique: str) -> None:
    name = f"pw-{unique}"
    created = create(stubs, name, {"connector.class": CONTROLLABLE, "secret": "hunter2"})
    assert created.config["secret"] == "[hidden]"
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)
    got = stubs.connectors.GetConnector(connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10)
    assert got.config["secret"] == "[hidden]"
    listed = stubs.connectors.ListConnectors(
        connectors_pb2.ListConnectorsRequest(view=connectors_pb2.CONNECTOR_VIEW_FULL), timeout=10
    )
    assert all("hunter2" not in str(c) for c in listed.connectors)


def test_list_pagination_and_views(stubs: Stubs, unique: str) -> None:
    names = [f"page-{unique}-{i}" for i in range(5)]
    for n in names:
        create(stubs, n, datagen(unique, **{"tasks.max": "1"}))
    for n in names:
        wait_state(stubs, n, common_pb2.STATE_RUNNING, tasks=1)
    seen: list[str] = []
    token = ""
    while True:
        page = stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(page_size=2, page_token=token), timeout=10
        )
        assert len(page.connectors) <= 2
        seen += [c.name for c in page.connectors]
        token = page.next_page_token
        if not token:
            break
    assert [cname(n) for n in names] == [s for s in seen if f"page-{unique}" in s]
    assert seen == sorted(seen)

    full = stubs.connectors.ListConnectors(
        connectors_pb2.ListConnectorsRequest(view=connectors_pb2.CONNECTOR_VIEW_FULL), timeout=10
    )
    mine = [c for c in full.connectors if f"page-{unique}" in c.name]
    assert all(c.config["connector.class"] == "DataGenSource" for c in mine)
    assert all(c.status.connector.state == common_pb2.STATE_RUNNING for c in mine)
    only_status = stubs.connectors.ListConnectors(
        connectors_pb2.ListConnectorsRequest(view=connectors_pb2.CONNECTOR_VIEW_STATUS), timeout=10
    )
    assert all(not c.config and c.status.name for c in only_status.connectors)
    by_name = stubs.connectors.ListConnectors(
        connectors_pb2.ListConnectorsRequest(view=connectors_pb2.CONNECTOR_VIEW_NAMES), timeout=10
    )
    assert all(not c.config and not c.HasField("status") for c in by_name.connectors)


def test_request_id_makes_retries_idempotent(stubs: Stubs, unique: str) -> None:
    name = f"idem-{unique}"
    first = create(stubs, name, datagen(unique), request_id=f"req-{unique}")
    again = create(stubs, name, datagen(unique), request_id=f"req-{unique}")
    assert again == first
    reused = failure(
        lambda: create(stubs, name, datagen(unique, **{"tasks.max": "1"}), request_id=f"req-{unique}")
    )
    assert (reused.code, reused.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "REQUEST_ID_REUSED")


def test_deadline_is_honoured_and_work_completes(stubs: Stubs, unique: str) -> None:
    name = f"slow-{unique}"
    started = time.monotonic()
    result = failure(
        lambda: stubs.connectors.CreateConnector(
            connectors_pb2.CreateConnectorRequest(
                connector_id=name,
                connector=connectors_pb2.Connector(
                    config={"connector.class": CONTROLLABLE, "start.delay.ms": "2500"}
                ),
            ),
            timeout=1.0,
        )
    )
    assert result.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 2.0
    # other calls are served while the plugin is still starting
    stubs.cluster.GetServerInfo(cluster_pb2.GetServerInfoRequest(), timeout=2)
    # the create itself was durable and completes
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)


def test_server_side_deadline_names_the_stage(stubs: Stubs, unique: str) -> None:
    name = f"stage-{unique}"
    create(stubs, name, {"connector.class": CONTROLLABLE})
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)
    # Reconfiguring restarts the plugin, which sleeps 3 s in start(); the server's own
    # deadline handling answers with the stage it was in before the transport gives up.
    result = failure(
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(name=cname(name), set={"start.delay.ms": "3000"}),
            timeout=1.5,
        )
    )
    assert result.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert result.reason == "REQUEST_TIMED_OUT"
    assert "Request timed out while starting the connector" in result.message
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)


def test_hung_plugin_fails_only_its_connector(stubs: Stubs, unique: str) -> None:
    hung = f"hung-{unique}"
    create(stubs, hung, {"connector.class": CONTROLLABLE, "start.delay.ms": "8000"}, initial="paused")
    timed_out = failure(
        lambda: stubs.connectors.ResumeConnector(
            connectors_pb2.ResumeConnectorRequest(name=cname(hung)), timeout=0.5
        )
    )
    assert timed_out.code == grpc.StatusCode.DEADLINE_EXCEEDED
    other = f"other-{unique}"
    create(stubs, other, datagen(unique, **{"tasks.max": "1"}))
    wait_state(stubs, other, common_pb2.STATE_RUNNING, tasks=1)
    # the test control plane gives plugin callbacks 5 s
    failed = wait_state(stubs, hung, common_pb2.STATE_FAILED)
    assert "did not return within" in failed.connector.trace


def test_watch_status_streams_changes(stubs: Stubs, unique: str) -> None:
    name = f"watch-{unique}"
    create(stubs, name, datagen(unique, **{"tasks.max": "1"}))
    wait_state(stubs, name, common_pb2.STATE_RUNNING, tasks=1)
    stream = stubs.connectors.WatchStatus(
        connectors_pb2.WatchStatusRequest(name=cname(name), include_initial=True), timeout=20
    )
    first = next(stream)
    assert first.name == cname(name) and first.status.state == common_pb2.STATE_RUNNING
    task_event = next(stream)
    assert (
        task_event.name == f"{cname(name)}/tasks/0" and task_event.status.state == common_pb2.STATE_UNASSIGNED
    )
    transition(stubs, name, "pause")
    paused = next(e for e in stream if e.name == cname(name))
    assert paused.status.state == common_pb2.STATE_PAUSED
    stubs.connectors.DeleteConnector(connectors_pb2.DeleteConnectorRequest(name=cname(name)), timeout=30)
    removed = next(e for e in stream if e.name == cname(name))
    assert removed.removed
    stream.cancel()


def test_a_setting_sluiceway_cannot_honour_is_refused(stubs: Stubs, unique: str) -> None:
    # transaction.boundary=interval would promise source transactions Sluiceway does not write.
    name = f"interval-{unique}"
    result = failure(lambda: create(stubs, name, datagen(unique, **{"transaction.boundary": "interval"})))
    assert result.code == grpc.StatusCode.INVALID_ARGUMENT
    assert result.reason == "INVALID_CONFIG"
    assert list(result.violations) == ['connector.config["transaction.boundary"]'], result.violations
    assert result.violations['connector.config["transaction.boundary"]'][0].startswith("not supported yet: ")
    assert result.metadata["config_keys"] == "transaction.boundary"
    assert "transaction.boundary: not supported yet" in result.message
    missing = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10
        )
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND


def test_etags_guard_replace_patch_and_delete(stubs: Stubs, unique: str) -> None:
    """AIP-154: a write that carries the etag of an older read fails ABORTED and changes nothing."""
    name = f"etag-{unique}"
    created = create(stubs, name, datagen(unique), initial="paused")

    def get() -> connectors_pb2.Connector:
        return stubs.connectors.GetConnector(connectors_pb2.GetConnectorRequest(name=cname(name)), timeout=10)

    first = get()
    assert first.etag and first.etag == created.etag == get().etag  # stable while nothing changes

    replaced = stubs.connectors.ReplaceConnectorConfig(
        connectors_pb2.ReplaceConnectorConfigRequest(
            name=cname(name), config=datagen(unique, **{"tasks.max": "3"}), etag=first.etag
        ),
        timeout=30,
    ).connector
    assert replaced.etag not in ("", first.etag)

    def refused(call: Callable[[], object]) -> None:
        rejected = failure(call)
        assert rejected.code == grpc.StatusCode.ABORTED
        assert rejected.reason == "ETAG_MISMATCH"
        assert rejected.metadata["current_etag"] == get().etag

    refused(
        lambda: stubs.connectors.ReplaceConnectorConfig(
            connectors_pb2.ReplaceConnectorConfigRequest(
                name=cname(name), config=datagen(unique, **{"tasks.max": "5"}), etag=first.etag
            ),
            timeout=30,
        )
    )
    refused(
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(
                name=cname(name), set={"tasks.max": "5"}, etag=first.etag
            ),
            timeout=30,
        )
    )
    assert get().config["tasks.max"] == "3"  # neither stale write landed

    # A target-state change moves the etag too: a delete based on the read before it is refused.
    before_resume = get().etag
    stubs.connectors.ResumeConnector(connectors_pb2.ResumeConnectorRequest(name=cname(name)), timeout=30)
    assert get().etag != before_resume
    refused(
        lambda: stubs.connectors.DeleteConnector(
            connectors_pb2.DeleteConnectorRequest(name=cname(name), etag=before_resume), timeout=30
        )
    )
    assert get().name == cname(name)

    patched = stubs.connectors.PatchConnectorConfig(
        connectors_pb2.PatchConnectorConfigRequest(name=cname(name), set={"tasks.max": "1"}, etag=get().etag),
        timeout=30,
    )
    stubs.connectors.DeleteConnector(
        connectors_pb2.DeleteConnectorRequest(name=cname(name), etag=patched.etag), timeout=30
    )
    assert failure(get).code == grpc.StatusCode.NOT_FOUND
    # An etag names a state of an existing connector: replacing a missing one with it is refused.
    rejected = failure(
        lambda: stubs.connectors.ReplaceConnectorConfig(
            connectors_pb2.ReplaceConnectorConfigRequest(
                name=cname(name), config=datagen(unique), etag=patched.etag
            ),
            timeout=30,
        )
    )
    assert (rejected.code, rejected.reason) == (grpc.StatusCode.ABORTED, "ETAG_MISMATCH")
    assert failure(get).code == grpc.StatusCode.NOT_FOUND


def test_list_tasks_and_plugins_page_with_tokens_tied_to_their_request(stubs: Stubs, unique: str) -> None:
    name, other = f"pages-{unique}", f"pages2-{unique}"
    for connector in (name, other):
        create(stubs, connector, {"connector.class": CONTROLLABLE, "task.count": "5", "tasks.max": "5"})
    wait_until(lambda: task_count(stubs, name) == 5 and task_count(stubs, other) == 5, what="5 + 5 tasks")

    def tasks_page(parent: str, token: str = "") -> connectors_pb2.ListTasksResponse:
        return stubs.connectors.ListTasks(
            connectors_pb2.ListTasksRequest(parent=cname(parent), page_size=2, page_token=token), timeout=10
        )

    seen: list[str] = []
    token, pages = "", 0
    while True:
        page = tasks_page(name, token)
        pages += 1
        seen.extend(t.name for t in page.tasks)
        token = page.next_page_token
        if not token:
            break
    assert pages == 3
    assert seen == [f"connectors/{name}/tasks/{n}" for n in range(5)]

    # A token of one connector's task list is no good for another's.
    first = tasks_page(name)
    refused = failure(lambda: tasks_page(other, first.next_page_token))
    assert refused.code == grpc.StatusCode.INVALID_ARGUMENT
    assert list(refused.violations) == ["page_token"]

    plugins: list[str] = []
    token = ""
    while True:
        listed = stubs.plugins.ListPlugins(
            plugins_pb2.ListPluginsRequest(page_size=2, page_token=token), timeout=10
        )
        plugins.extend(p.class_name for p in listed.plugins)
        token = listed.next_page_token
        if not token:
            break
    everything = stubs.plugins.ListPlugins(plugins_pb2.ListPluginsRequest(), timeout=10)
    assert plugins == [p.class_name for p in everything.plugins] == sorted(plugins)
    assert len(plugins) >= 6

    # ListConnectors: a token issued for one view is refused for another.
    names = stubs.connectors.ListConnectors(connectors_pb2.ListConnectorsRequest(page_size=1), timeout=10)
    assert names.next_page_token
    wrong_view = failure(
        lambda: stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(
                page_size=1, page_token=names.next_page_token, view=connectors_pb2.CONNECTOR_VIEW_FULL
            ),
            timeout=10,
        )
    )
    assert (wrong_view.code, list(wrong_view.violations)) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        ["page_token"],
    )
