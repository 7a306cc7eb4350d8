"""The records a task left out (errors.tolerance=all) and dead-lettered, as people and scripts see
them: the client's status objects carry both counts, and the CLI's status and watch output name
them beside the task's state, each only when not 0."""

from __future__ import annotations

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.cli.connectors import _state_text, _status_rows
from sluiceway.client import InstanceStatus


def _task(skipped: int, dead_lettered: int, detail: str = "") -> connectors_pb2.InstanceStatus:
    status = connectors_pb2.InstanceStatus(
        state=common_pb2.STATE_RUNNING,
        worker_id="executor-1",
        detail=detail,
        records_skipped=skipped,
        records_dead_lettered=dead_lettered,
    )
    if detail:
        status.idle_since.FromMilliseconds(1_700_000_007_000)
    return status


def test_the_client_status_carries_the_counts() -> None:
    status = InstanceStatus.from_proto(_task(3, 2))
    assert (status.records_skipped, status.records_dead_lettered) == (3, 2)
    assert InstanceStatus.from_proto(connectors_pb2.InstanceStatus()).records_skipped == 0


def test_the_status_table_shows_the_counts_next_to_the_tasks_state() -> None:
    status = connectors_pb2.ConnectorStatus(
        connector=connectors_pb2.InstanceStatus(state=common_pb2.STATE_RUNNING),
        tasks=[
            connectors_pb2.TaskStatus(id=0, status=_task(3, 2)),
            connectors_pb2.TaskStatus(id=1, status=_task(4, 0)),
            connectors_pb2.TaskStatus(id=2, status=_task(0, 0)),
        ],
    )
    rows = _status_rows(status)
    assert [row[1] for row in rows] == [
        "RUNNING",
        "RUNNING (skipped 3, dead-lettered 2)",
        "RUNNING (skipped 4)",
        "RUNNING",
    ]


def test_an_idle_task_shows_its_detail_and_its_counts() -> None:
    assert _state_text(_task(3, 2, "idle: no new records")) == (
        "RUNNING (idle: no new records, since 2023-11-14T22:13:27Z; skipped 3, dead-lettered 2)"
    )
    assert _state_text(_task(0, 0, "idle: end of data")) == (
        "RUNNING (idle: end of data, since 2023-11-14T22:13:27Z)"
    )
