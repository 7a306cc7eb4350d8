"""Issue 15 end to end: a task that fails in Spark's JVM gets a status message naming the JVM
exception, not a line of the JVM stack trace.

A JdbcSource on a real control plane and executor reads from a PostgreSQL address where nothing
listens, so its first batch fails inside Spark's JVM: with the driver on the Spark Connect
server's class path (deploy/bootstrap.sh --tests installs it) as
`AnalysisException: [FAILED_JDBC.CONNECTION] …`, without it as
`java.lang.ClassNotFoundException: org.postgresql.Driver`. The status is read over the control
plane's gRPC socket."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from sluiceway.client import ConnectorStatus, InstanceStatus, State
from sluiceway_server.embedded import EmbeddedSparkConnect, jdbc_jars
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, attach_executor

pytestmark = pytest.mark.integration


def _failed_task(status: ConnectorStatus) -> InstanceStatus | None:
    return next((t.status for t in status.tasks if t.status.state == State.FAILED), None)


def test_jvm_failure_message_names_the_exception(
    control_plane_factory: Callable[..., ControlPlaneProcess], spark_connect: EmbeddedSparkConnect
) -> None:
    name = f"jdbc-refused-{uuid.uuid4().hex[:10]}"
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "jdbc-failure")
    try:
        stack.client.create_connector(
            name,
            {
                "connector.class": "JdbcSource",
                # Nothing listens there (and without the driver, loading its class fails first).
                "connection.url": "jdbc:postgresql://127.0.0.1:1/absent",
                "table": "items",
                "incrementing.column.name": "id",
                "topic.prefix": f"{name}-",
                "task.restart.enable": "false",  # the test reads the failure the task is left in
            },
        )
        try:
            failed = stack.wait_for(
                lambda: _failed_task(stack.client.connector_status(name)), "the task to fail", timeout=60
            )
            assert failed is not None
            # The trace has the shape the summary must see through: a JVM stack after the exception.
            assert "JVM stacktrace:" in failed.trace and "\tat " in failed.trace, failed.trace
            assert failed.recent_errors, failed
            message = failed.recent_errors[0].message
            if jdbc_jars():
                assert message.startswith("AnalysisException: [FAILED_JDBC.CONNECTION] "), message
            else:
                assert message == "ClassNotFoundException: org.postgresql.Driver", message
            assert not message.startswith("at "), message
        finally:
            stack.client.delete_connector(name)
    finally:
        stack.close()
