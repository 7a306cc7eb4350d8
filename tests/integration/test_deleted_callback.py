"""KIP-883 over the real gRPC socket and broker: `Connector.deleted()` runs once, after `stop()`,
when and only when a connector is deleted; a raising or hanging callback does not hold up the
deletion; a control plane killed while the callback runs leaves it to the next one, which calls it.

The plugin (`deletion_connectors.RecordingSourceConnector`, loaded by the control plane) appends
every lifecycle call with its process id to a file, so each test reads what happened where."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.client import SluicewayClient
from sluiceway.errors import NotFoundError
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic, wait_until

pytestmark = pytest.mark.integration

RECORDING = "deletion_connectors.RecordingSourceConnector"
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
    # A leader change: this control plane goes, the next one takes the connector over.
    plane.stop()
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

        # A stopped connector has no running instance: a new one is started with its config,
        # stopped, then told it was deleted.
        stopped_calls, stopped = tmp_path / "stopped", f"stopped-{unique}"
        client.create_connector(stopped, _config(stopped_calls), initial_state="STOPPED")
        answer = client.delete_connector(stopped, wait=True)
        assert answer.deleted_callback.outcome == Outcome.OUTCOME_SUCCEEDED, answer
        assert _names(stopped_calls) == ["start", "stop", "deleted:begin", "deleted:end"]


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
    # The new control plane ran it on an instance of its own: started with the recorded config,
    # stopped, then deleted() to its end.
    assert [e for e, pid in events if pid != first_pid] == ["start", "stop", "deleted:begin", "deleted:end"]
    wait_until(lambda: _callback_record(plane, name)[-1:] == [None], 20, 0.2, "the record cleared")
    with SluicewayClient(plane.address, timeout=30) as client, pytest.raises(NotFoundError):
        client.get_connector(name)
