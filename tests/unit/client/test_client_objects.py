"""The client's connector, task and status objects: what they hold and how they print."""

from __future__ import annotations

import datetime

from google.protobuf import timestamp_pb2

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.client import (
    Connector,
    ConnectorStatus,
    ConnectorType,
    Generation,
    State,
    StatusEvent,
    TargetState,
    Task,
)


def _status(state: int, generation: int = 0) -> connectors_pb2.InstanceStatus:
    return connectors_pb2.InstanceStatus(state=state, worker_id="executor-1", generation=generation)  # type: ignore[arg-type]


def test_states_print_as_words_and_equal_the_api_numbers() -> None:
    assert (str(State.RUNNING), f"{State.FAILED:>8}", repr(TargetState.PAUSED)) == (
        "RUNNING",
        "  FAILED",
        "TargetState.PAUSED",
    )
    # Equal to the API's numbers at run time (mypy asks for the same enum on both sides).
    assert int(common_pb2.STATE_RUNNING) == State.RUNNING
    assert int(common_pb2.TARGET_STATE_STOPPED) == TargetState.STOPPED
    assert int(common_pb2.CONNECTOR_TYPE_SINK) == ConnectorType.SINK
    # A state added to the API after this client reads as UNSPECIFIED rather than failing.
    assert State.of(99) is State.UNSPECIFIED


def test_generations_read_epoch_dot_count() -> None:
    task = Generation((3 << 32) | 7)
    assert (str(task), task.epoch, task.count, int(task)) == ("3.7", 3, 7, (3 << 32) | 7)
    assert str(Generation(2)) == "2"  # a connector's: the epoch alone
    assert str(Generation(0)) == "-"


def test_a_connector_holds_its_bare_name_and_its_message() -> None:
    message = connectors_pb2.Connector(
        name="connectors/gen",
        config={"connector.class": "DataGenSource"},
        type=common_pb2.CONNECTOR_TYPE_SOURCE,
        tasks=["connectors/gen/tasks/0", "connectors/gen/tasks/1"],
        target_state=common_pb2.TARGET_STATE_RUNNING,
        config_position=12,
        etag="e",
    )
    plain = Connector.from_proto(message)
    assert (plain.name, plain.resource_name, plain.tasks, plain.status) == (
        "gen",
        "connectors/gen",
        (0, 1),
        None,
    )
    assert (plain.type, plain.target_state, plain.state) == (
        ConnectorType.SOURCE,
        TargetState.RUNNING,
        State.UNSPECIFIED,
    )
    assert plain.raw is message and "raw" not in repr(plain)

    message.status.CopyFrom(
        connectors_pb2.ConnectorStatus(
            name="connectors/gen",
            connector=_status(common_pb2.STATE_RUNNING, 4),
            tasks=[
                connectors_pb2.TaskStatus(
                    name="connectors/gen/tasks/0",
                    id=0,
                    status=_status(common_pb2.STATE_FAILED, (4 << 32) | 2),
                )
            ],
        )
    )
    with_status = Connector.from_proto(message)
    assert with_status.state == State.RUNNING
    assert with_status.status is not None
    (task,) = with_status.status.tasks
    assert (task.connector, task.id, task.state, str(task.status.generation)) == (
        "gen",
        0,
        State.FAILED,
        "4.2",
    )


def test_times_are_datetimes_and_unset_times_none() -> None:
    due = timestamp_pb2.Timestamp(seconds=1_800_000_000)
    message = connectors_pb2.ConnectorStatus(
        name="connectors/x",
        connector=connectors_pb2.InstanceStatus(state=common_pb2.STATE_RESTARTING, next_restart_time=due),
    )
    status = ConnectorStatus.from_proto(message)
    assert status.connector.next_restart_time == datetime.datetime.fromtimestamp(1_800_000_000, datetime.UTC)
    assert status.connector.update_time is None


def test_tasks_and_events_name_their_connector_and_task() -> None:
    task = Task.from_proto(connectors_pb2.Task(name="connectors/a/tasks/3", config={"k": "v"}))
    assert (task.connector, task.id, task.config) == ("a", 3, {"k": "v"})
    of_task = StatusEvent.from_proto(connectors_pb2.StatusEvent(name="connectors/a/tasks/3", removed=True))
    of_connector = StatusEvent.from_proto(connectors_pb2.StatusEvent(name="connectors/a"))
    assert (of_task.connector, of_task.task, of_task.removed) == ("a", 3, True)
    assert (of_connector.connector, of_connector.task) == ("a", None)
