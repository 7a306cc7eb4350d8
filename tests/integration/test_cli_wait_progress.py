"""Issue 35: `sluiceway connectors delete --wait`, run as a user runs it with stderr on a terminal,
draws a progress line there while the control plane waits for the connector's task to leave a real
executor and for its deleted() callback, erases it, and prints on stdout exactly what it prints
without a terminal.

The connector is the test plugin `deletion_connectors.RecordingSourceConnector`: one idle task, and
a deleted() callback that sleeps, so the wait lasts long enough to be seen."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess, terminal_env
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor
from tests.integration.test_control_plane_metrics import scrape, value

pytestmark = pytest.mark.integration

RECORDING = "deletion_connectors.RecordingSourceConnector"
# The callback starts as the connector is deleted: it outlasts the task's leaving (a few seconds)
# by a few refreshes of the line, within the plane's time limit for it.
CALLBACK_MS = 8000
SETTINGS = {**FAST_EXECUTOR_SESSION, "plugin.callback.timeout.ms": "30000"}


@pytest.fixture(scope="module")
def stack(
    broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PipelineStack]:
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=dict(SETTINGS)).start()
    # Its metrics tell when a task has run a batch (the first one of a fresh Spark session is slow).
    own = tmp_path_factory.mktemp("waiter") / "executor.properties"
    own.write_text("metrics.listeners=http://127.0.0.1:0\n")
    try:
        started = attach_executor(plane, spark_connect, "waiter", "--config", str(own))
        yield started
        started.close()
    finally:
        plane.stop()


def _stderr_on_a_terminal(argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
    """Runs `argv` with stderr on a pseudo-terminal of 160 columns and stdout on a pipe, until it
    exits; returns its exit code, its stdout and what it drew on the terminal."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
        env=terminal_env(),
    )
    os.close(child)
    drawn = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(main, 65536)
                except OSError:  # every writer closed the terminal: the process is gone
                    break
                if not chunk:
                    break
                drawn.extend(chunk)
            elif process.poll() is not None:
                break
        assert process.stdout is not None
        out = process.stdout.read().decode()
        code = process.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)
    return code, out, drawn.decode(errors="replace")


def test_delete_wait_shows_its_progress_on_a_terminal(stack: PipelineStack, tmp_path: Path) -> None:
    client = stack.client
    name = f"wait-{uuid.uuid4().hex[:10]}"
    calls = tmp_path / "calls"
    client.create_connector(
        name, {"connector.class": RECORDING, "calls.file": str(calls), "deleted.delay.ms": str(CALLBACK_MS)}
    )
    (executor,) = client.server_info().executors
    task = f"connectors/{name}/tasks/0"
    # A task leaves between batches: once it has run one, the next ends within its poll window.
    stack.wait_for(
        lambda: value(scrape(executor.metrics_url), "sluiceway_task_batches_total", connector=name, task="0"),
        "a batch of its task",
    )
    assert task in client.server_info().executors[0].tasks

    cli = [str(Path(sys.executable).parent / "sluiceway"), "--server", stack.plane.address]
    code, out, drawn = _stderr_on_a_terminal(
        [*cli, "connectors", "delete", name, "--wait", "--timeout", "60"]
    )

    assert code == 0, drawn
    assert out == f"Deleted connector {name}.\nIts deleted() callback: SUCCEEDED.\n"
    assert "\x1b[" in drawn  # drawn and redrawn in place, by rich
    assert f"Deleting connector {name} (" in drawn, drawn
    # First the task on its executor, then (the callback still sleeping) only the callback.
    assert f"waiting for 1 task to leave {executor.id} (task 0) and for its deleted() callback" in drawn, (
        drawn
    )
    assert "its tasks have left the executors; waiting for its deleted() callback" in drawn, drawn
    assert drawn.rstrip().endswith("\x1b[2K"), drawn  # the line erased at the end
    assert [line.split()[0] for line in calls.read_text().splitlines()][-2:] == [
        "deleted:begin",
        "deleted:end",
    ]
    assert not any(task in e.tasks for e in client.server_info().executors)
