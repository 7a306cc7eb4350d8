"""KIP-883 over the real gRPC socket and broker: `Connector.deleted()` runs once, after `stop()`,
when and only when a connector is deleted, for sources and sinks; a connector whose plugin does not
run (stopped, paused) is never started for it; a raising or hanging callback does not hold up the
deletion; a control plane killed while the callback runs leaves it to the next one, which calls it.

The plugins (`deletion_connectors.RecordingSourceConnector` and `RecordingSinkConnector`, loaded by
the control plane) append every lifecycle call with its process id to a file, so each test reads
what happened where."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.client import SluicewayClient, State
from sluiceway.errors import NotFoundError
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic, wait_until

pytestmark = pytest.mark.integration

RECORDING = "deletion_connectors.RecordingSourceConnector"
RECORDING_SINK = "deletion_connectors.RecordingSinkConnector"
Outcome = connectors_pb2.DeletedCallback
Factory = Callable[..., ControlPlaneProcess]


def _events(calls: Path) -> list[tuple[str, int]]:
    if not calls.exists():
        return []
    return [(line.split()[0], int(line.split()[1])) for line in calls.read_text().splitlines()]


def _names(calls: Path) -> list[str]:
    return [event for event, _ in _events(calls)]


def _config(calls: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": RECORDING, "calls.file": str(calls), **extra}


def _running(client: SluicewayClient, name: str) -> bool:
    state: int = client.connector_status(name).connector.state
    return state == common_pb2.STATE_RUNNING


def _callback_record(plane: ControlPlaneProcess, name: str) -> list[object]:
    """Every value of the connector's deleted-callback record in the config topic, in order."""
    key = f"deleted-connector-{name}"
    return [
        value for k, value in read_topic(plane.broker.bootstrap_servers, plane.topics["config"]) if k == key
    ]


def test_deleted_runs_once_after_stop_on_delete_and_never_in_the_rest_of_the_lifecycle(
    control_plane_factory: Factory, unique: str, tmp_path: Path
) -> None:
    calls, name, suffix = tmp_path / "calls", f"rec-{unique}", f"kip883-{unique}"
    plane = control_plane_factory(suffix)
    with SluicewayClient(plane.address, timeout=30) as client:
        client.create_connector(name, _config(calls))
        wait_until(lambda: _names(calls) == ["start"], 20, 0.1, "start")
        client.stop_connector(name)
        client.resume_connector(name)
        client.pause_connector(name)
        client.resume_connector(name)
        client.restart_connector(name)
        client.patch_connector_config(name, {"note": "reconfigured"})
        wait_until(lambda: _names(calls).count("start") == 5, 20, 0.1, "five starts")
    # A leader change: this control plane goes, the next one takes the connector over. Its plugin
    # threads all finish, so it leaves the ordinary way.
    assert plane.stop() == 0
    assert plane.managed is not None
    assert "did not finish" not in plane.managed.log_path.read_text()
    plane = control_plane_factory(suffix)
    with SluicewayClient(plane.address, timeout=30) as client:
        wait_until(lambda: _names(calls).count("start") == 6, 30, 0.1, "the new leader's start")
        assert "deleted:begin" not in _names(calls)

        answer = client.delete_connector(name, wait=True)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_SUCCEEDED, answer
        events = _events(calls)
        assert [e for e, _ in events[-3:]] == ["stop", "deleted:begin", "deleted:end"]
        # The same plugin object, in the process that ran the connector, stopped just before.
        assert len({pid for _, pid in events[-3:]}) == 1
        assert _names(calls).count("deleted:end") == 1
        with pytest.raises(NotFoundError):
            client.get_connector(name)
        wait_until(lambda: _callback_record(plane, name)[-1:] == [None], 20, 0.2, "the record cleared")


def test_a_raising_or_hanging_deleted_does_not_hold_up_the_deletion(
    control_plane_factory: Factory, unique: str, tmp_path: Path
) -> None:
    plane = control_plane_factory(**{"plugin.callback.timeout.ms": "2000"})
    with SluicewayClient(plane.address, timeout=30) as client:
        raising = f"raising-{unique}"
        client.create_connector(raising, _config(tmp_path / "raising", **{"deleted.behaviour": "raise"}))
        wait_until(lambda: _running(client, raising), 20, 0.1, "running")
        answer = client.delete_connector(raising, wait=True)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_FAILED, answer
        assert "cleanup refused on purpose" in answer.deleted_callback.error
        with pytest.raises(NotFoundError):
            client.get_connector(raising)

        hanging = f"hanging-{unique}"
        client.create_connector(hanging, _config(tmp_path / "hanging", **{"deleted.behaviour": "hang"}))
        wait_until(lambda: _running(client, hanging), 20, 0.1, "running")
        started = time.monotonic()
        answer = client.delete_connector(hanging, wait=True)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_TIMED_OUT, answer
        assert time.monotonic() - started < 15
        with pytest.raises(NotFoundError):
            client.get_connector(hanging)

        # Without `wait` the call does not wait for the callback at all.
        quick = f"quick-{unique}"
        client.create_connector(quick, _config(tmp_path / "quick", **{"deleted.behaviour": "hang"}))
        wait_until(lambda: _running(client, quick), 20, 0.1, "running")
        started = time.monotonic()
        answer = client.delete_connector(quick)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_PENDING
        assert time.monotonic() - started < 2
        for name in (raising, hanging):

            def cleared(name: str = name) -> bool:
                return _callback_record(plane, name)[-1:] == [None]

            wait_until(cleared, 20, 0.2, name)
    # The two callbacks still hanging do not hold the stopped replica up: they run on daemon
    # threads (the connectors' callback lanes), which the process leaves behind without a wait.
    started = time.monotonic()
    assert plane.stop() == 0
    assert time.monotonic() - started < 10
    assert plane.managed is not None
    log = plane.managed.log_path.read_text()
    assert f"Connector {hanging}: deleted() did not return within" in log, log[-2000:]
    assert "thread(s) that did not finish" not in log, log[-2000:]


def test_a_control_plane_killed_during_deleted_leaves_the_call_to_the_next_one(
    control_plane_factory: Factory, unique: str, tmp_path: Path
) -> None:
    calls, name, suffix = tmp_path / "calls", f"killed-{unique}", f"kip883k-{unique}"
    plane = control_plane_factory(suffix)
    with SluicewayClient(plane.address, timeout=30) as client:
        client.create_connector(name, _config(calls, **{"deleted.delay.ms": "3000"}))
        wait_until(lambda: _names(calls) == ["start"], 20, 0.1, "start")
        client.delete_connector(name)
        wait_until(lambda: "deleted:begin" in _names(calls), 20, 0.05, "the callback running")
    plane.kill()
    first_pid = _events(calls)[-1][1]
    assert "deleted:end" not in _names(calls)

    plane = control_plane_factory(suffix)
    wait_until(lambda: "deleted:end" in _names(calls), 30, 0.1, f"the callback again\n{plane.managed.tail()}")  # type: ignore[union-attr]
    time.sleep(1)
    events = _events(calls)
    assert [e for e, _ in events].count("deleted:end") == 1
    # The new control plane ran it on a plugin object of its own, given the recorded config but
    # never started: deleted() alone, to its end.
    assert [e for e, pid in events if pid != first_pid] == ["deleted:begin", "deleted:end"]
    wait_until(lambda: _callback_record(plane, name)[-1:] == [None], 20, 0.2, "the record cleared")
    with SluicewayClient(plane.address, timeout=30) as client, pytest.raises(NotFoundError):
        client.get_connector(name)


@pytest.mark.parametrize("kind", ["source", "sink"])
def test_deleted_is_never_preceded_by_a_start_made_for_it(
    control_plane: ControlPlaneProcess, unique: str, tmp_path: Path, kind: str
) -> None:
    """For a source and a sink of our own: a running connector is stopped, then told; one created
    STOPPED, or stopped after running, is told on a new object and never started for it (KIP-875:
    a stopped connector is not started); one paused out of STOPPED was started and stopped by the
    pause (KIP-875), and is not started again for the callback either."""

    def config(calls: Path) -> dict[str, str]:
        if kind == "sink":
            return {"connector.class": RECORDING_SINK, "calls.file": str(calls), "topics": f"in-{unique}"}
        return _config(calls)

    def deleted(client: SluicewayClient, name: str) -> None:
        answer = client.delete_connector(name, wait=True)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_SUCCEEDED, answer
        with pytest.raises(NotFoundError):
            client.get_connector(name)

    with SluicewayClient(control_plane.address, timeout=30) as client:
        running, running_calls = f"{kind}-running-{unique}", tmp_path / "running"
        client.create_connector(running, config(running_calls))
        wait_until(lambda: _running(client, running), 20, 0.1, "running")
        deleted(client, running)
        assert _names(running_calls) == ["start", "stop", "deleted:begin", "deleted:end"]
        # The object that ran the connector is the one told.
        assert len({pid for _, pid in _events(running_calls)}) == 1

        stopped, stopped_calls = f"{kind}-stopped-{unique}", tmp_path / "stopped"
        client.create_connector(stopped, config(stopped_calls), initial_state="STOPPED")
        wait_until(lambda: client.connector_status(stopped).connector.state == State.STOPPED)
        deleted(client, stopped)
        assert _names(stopped_calls) == ["deleted:begin", "deleted:end"]

        later, later_calls = f"{kind}-later-{unique}", tmp_path / "later"
        client.create_connector(later, config(later_calls))
        wait_until(lambda: _running(client, later), 20, 0.1, "running")
        client.stop_connector(later)
        wait_until(lambda: _names(later_calls) == ["start", "stop"], 20, 0.1, "stopped")
        deleted(client, later)
        assert _names(later_calls) == ["start", "stop", "deleted:begin", "deleted:end"]

        paused, paused_calls = f"{kind}-paused-{unique}", tmp_path / "paused"
        client.create_connector(paused, config(paused_calls), initial_state="STOPPED")
        wait_until(lambda: client.connector_status(paused).connector.state == State.STOPPED)
        client.pause_connector(paused)

        def paused_with_task() -> bool:
            status = client.connector_status(paused)
            return status.connector.state == State.PAUSED and len(status.tasks) == 1

        wait_until(paused_with_task, 20, 0.1, "paused with its task")
        assert _names(paused_calls) == ["start", "stop"]
        deleted(client, paused)
        assert _names(paused_calls) == ["start", "stop", "deleted:begin", "deleted:end"]
