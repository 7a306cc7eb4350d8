"""Issue 15 end to end: one connector whose task assignments together are far larger than gRPC's
default 4 MiB message neither breaks the executor's attach stream nor holds up another connector.

A DataGenSource with 20 tasks and a 200 KiB config value (DataGen copies its config into every task
config, so each assignment carries it twice: about 8 MB in all) and a small DataGenSource run on one
executor over the control plane's real gRPC socket. Both generate nothing (`max.records=0`), so the
tasks are idle and no Spark job runs."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from sluiceway.client import State
from sluiceway_server.embedded import EmbeddedSparkConnect
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, PipelineStack, attach_executor

pytestmark = pytest.mark.integration

BIG_TASKS = 20
PADDING_BYTES = 200 * 1024


def _idle_datagen(topic: str, tasks: int, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "DataGenSource",
        "topic": topic,
        "tasks.max": str(tasks),
        "max.records": "0",
        **extra,
    }


def _running(stack: PipelineStack, name: str, tasks: int) -> bool:
    status = stack.client.connector_status(name)
    states = [task.status.state for task in status.tasks]
    return len(states) == tasks and all(state == State.RUNNING for state in states)


def test_a_connector_with_large_assignments_runs_beside_a_small_one_without_reattaching(
    control_plane_factory: Callable[..., ControlPlaneProcess], spark_connect: EmbeddedSparkConnect
) -> None:
    u = uuid.uuid4().hex[:10]
    big, small = f"big-{u}", f"small-{u}"
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "assignment-size")
    try:
        (attached,) = stack.client.server_info().executors
        stack.client.create_connector(
            big, _idle_datagen(f"size-{u}-big", BIG_TASKS, padding="x" * PADDING_BYTES)
        )
        stack.client.create_connector(small, _idle_datagen(f"size-{u}-small", 2))
        stack.wait_for(lambda: _running(stack, big, BIG_TASKS), "every task of the big connector to run")
        stack.wait_for(lambda: _running(stack, small, 2), "both tasks of the small connector to run")

        # The same session all along: the executor was never dropped and attached again.
        (executor,) = stack.client.server_info().executors
        assert (executor.id, executor.attach_time) == (attached.id, attached.attach_time)
        assert len(executor.tasks) == BIG_TASKS + 2
        log = stack.executor.log_path.read_text(errors="replace")
        assert log.count("attached to ") == 1, stack.logs()
        assert "RESOURCE_EXHAUSTED" not in log, stack.logs()

        stack.client.delete_connector(big, wait=True)
        stack.client.delete_connector(small, wait=True)
    finally:
        stack.close()
