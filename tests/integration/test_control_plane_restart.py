"""State lives in Kafka: a restarted control plane brings every connector back, and the raw
internal topics hold exactly Kafka Connect's keys and JSON values (docs/ARCHITECTURE.md §5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2
from tests.integration.api_helpers import Stubs, read_topic, wait_until

pytestmark = pytest.mark.integration


def _create(
    stubs: Stubs, name: str, config: dict[str, str], initial: connectors_pb2.InitialState.ValueType
) -> None:
    stubs.connectors.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=name, connector=connectors_pb2.Connector(config=config), initial_state=initial
        ),
        timeout=30,
    )


def _state(stubs: Stubs, name: str) -> tuple[int, int, int]:
    connector = stubs.connectors.GetConnector(
        connectors_pb2.GetConnectorRequest(
            name=f"connectors/{name}", view=connectors_pb2.CONNECTOR_VIEW_FULL
        ),
        timeout=10,
    )
    return connector.target_state, connector.status.connector.state, len(connector.tasks)


def _settle(stubs: Stubs, name: str, want: tuple[int, int, int]) -> None:
    wait_until(lambda: _state(stubs, name) == want, what=f"{name} in {want}")


def test_restart_brings_everything_back_and_topics_use_kafka_formats(
    control_plane_factory: Callable[..., Any], broker: Any, unique: str
) -> None:
    plane = control_plane_factory(suffix=f"rs{unique}")
    names = {"running": f"run-{unique}", "paused": f"pause-{unique}", "stopped": f"stop-{unique}"}
    with grpc.insecure_channel(plane.address) as channel:
        stubs = Stubs.of(channel)
        config = {"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": "2"}
        _create(stubs, names["running"], config, connectors_pb2.INITIAL_STATE_RUNNING)
        _create(stubs, names["paused"], config, connectors_pb2.INITIAL_STATE_RUNNING)
        _create(stubs, names["stopped"], config, connectors_pb2.INITIAL_STATE_STOPPED)
        wait_until(lambda: _state(stubs, names["paused"])[2] == 2, what="tasks of the paused connector")
        stubs.connectors.PauseConnector(
            connectors_pb2.PauseConnectorRequest(name=f"connectors/{names['paused']}"), timeout=30
        )
        expected = {
            names["running"]: (common_pb2.TARGET_STATE_RUNNING, common_pb2.STATE_RUNNING, 2),
            names["paused"]: (common_pb2.TARGET_STATE_PAUSED, common_pb2.STATE_PAUSED, 2),
            names["stopped"]: (common_pb2.TARGET_STATE_STOPPED, common_pb2.STATE_STOPPED, 0),
        }
        for name, want in expected.items():
            _settle(stubs, name, want)
        tasks_before = {
            n: [
                dict(t.config)
                for t in stubs.connectors.ListTasks(
                    connectors_pb2.ListTasksRequest(parent=f"connectors/{n}"), timeout=10
                ).tasks
            ]
            for n in names.values()
        }

    assert plane.stop() == 0  # SIGTERM: graceful, exit code 0

    again = control_plane_factory(suffix=f"rs{unique}")
    with grpc.insecure_channel(again.address) as channel:
        stubs = Stubs.of(channel)
        listed = stubs.connectors.ListConnectors(connectors_pb2.ListConnectorsRequest(), timeout=10)
        assert {c.name for c in listed.connectors} == {f"connectors/{n}" for n in names.values()}
        for name, want in expected.items():
            _settle(stubs, name, want)
            tasks = stubs.connectors.ListTasks(
                connectors_pb2.ListTasksRequest(parent=f"connectors/{name}"), timeout=10
            )
            assert [dict(t.config) for t in tasks.tasks] == tasks_before[name]
        # a restored connector is fully usable
        stubs.connectors.ResumeConnector(
            connectors_pb2.ResumeConnectorRequest(name=f"connectors/{names['stopped']}"), timeout=30
        )
        wait_until(
            lambda: (
                _state(stubs, names["stopped"])
                == (common_pb2.TARGET_STATE_RUNNING, common_pb2.STATE_RUNNING, 2)
            )
        )

    records = read_topic(broker.bootstrap_servers, plane.topics["config"])
    by_key: dict[str | None, list[Any]] = {}
    for key, value in records:
        by_key.setdefault(key, []).append(value)
    run = names["running"]
    assert by_key[f"connector-{run}"][0] == {"properties": {**config, "name": run}}
    assert by_key[f"task-{run}-0"][0] == {"properties": by_key[f"task-{run}-0"][0]["properties"]}
    assert by_key[f"task-{run}-0"][0]["properties"]["task.id"] == "0"
    assert {"tasks": 2} in by_key[f"commit-{run}"]
    stop = names["stopped"]
    # KIP-980: the initial target state is written before the config; KIP-875 STOPPED encoding
    keys_in_order = [k for k, _ in records]
    assert keys_in_order.index(f"target-state-{stop}") < keys_in_order.index(f"connector-{stop}")
    assert by_key[f"target-state-{stop}"][0] == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert by_key[f"target-state-{names['paused']}"][-1] == {"state": "PAUSED"}
    assert by_key[f"target-state-{stop}"][-1] == {"state": "STARTED"}

    statuses = dict(read_topic(broker.bootstrap_servers, plane.topics["status"]))
    value = statuses[f"status-connector-{run}"]
    assert set(value) >= {"state", "trace", "worker_id", "generation"}
    assert value["state"] == "RUNNING" and isinstance(value["generation"], int)


def test_stop_writes_empty_task_set_then_target_state(control_plane: Any, broker: Any, unique: str) -> None:
    with grpc.insecure_channel(control_plane.address) as channel:
        stubs = Stubs.of(channel)
        name = f"stopfmt-{unique}"
        _create(
            stubs,
            name,
            {"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": "2"},
            connectors_pb2.INITIAL_STATE_RUNNING,
        )
        wait_until(lambda: _state(stubs, name)[2] == 2, what="tasks")
        stubs.connectors.StopConnector(
            connectors_pb2.StopConnectorRequest(name=f"connectors/{name}"), timeout=30
        )
        stubs.connectors.RestartConnector(
            connectors_pb2.RestartConnectorRequest(
                name=f"connectors/{name}", include_tasks=True, only_failed=True
            ),
            timeout=30,
        )
    records = [
        (k, v)
        for k, v in read_topic(broker.bootstrap_servers, control_plane.topics["config"])
        if k and name in k
    ]
    keys = [k for k, _ in records]
    empty_commit = keys.index(f"commit-{name}", keys.index(f"commit-{name}") + 1)
    assert records[empty_commit][1] == {"tasks": 0}
    stopped = keys.index(f"target-state-{name}")
    assert empty_commit < stopped
    assert records[stopped][1] == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert records[keys.index(f"restart-connector-{name}")][1] == {"include-tasks": True, "only-failed": True}
