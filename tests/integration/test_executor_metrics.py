"""An executor's /metrics, scraped over HTTP while a real DataGenSource → SparkFileSink pipeline runs
(issue 35): the records counted equal the records in the lake, the sink's lag is above zero while
it catches up and zero at the end, and the task states of both the executor and the control plane
match the status API. The status API (of the leader and of a follower, which asks the leader) and
`sluiceway connectors status` show each task's rate and lag."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sluiceway.client import ConnectorStatus, SluicewayClient
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, free_port
from tests.conftest import ControlPlaneProcess, terminal_env
from tests.fault.fault_helpers import topic_records
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    parquet_counts,
    published_rows,
)
from tests.integration.test_control_plane_metrics import Samples, scrape, value

pytestmark = pytest.mark.integration

TASKS = 2
PER_TASK = 12_000
GENERATED = TASKS * PER_TASK


def _task_sum(samples: Samples, name: str, connector: str) -> float:
    return sum(
        sample
        for (metric, labels), sample in samples.items()
        if metric == name and ("connector", connector) in labels
    )


def _lag(samples: Samples, connector: str) -> dict[tuple[str, str], float]:
    """The sink's lag by (topic, partition)."""
    found = {}
    for (metric, labels), sample in samples.items():
        if metric == "sluiceway_sink_task_consumer_lag" and ("connector", connector) in labels:
            named = dict(labels)
            found[(named["topic"], named["partition"])] = sample
    return found


def _in_a_terminal(argv: list[str], seconds: float) -> tuple[str, int]:
    """Runs ``argv`` on a pseudo-terminal of 160 by 40 for ``seconds``, then sends it Ctrl-C (SIGINT);
    returns what it drew and its exit code."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=terminal_env())
    os.close(child)
    drawn = bytearray()

    def read_for(span: float) -> None:
        deadline = time.monotonic() + span
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.1)
            if ready:
                try:
                    drawn.extend(os.read(main, 65536))
                except OSError:  # the child closed the terminal
                    return

    try:
        read_for(seconds)
        process.send_signal(signal.SIGINT)
        read_for(2)
        code = process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(main)
    return drawn.decode(errors="replace"), code


@pytest.fixture
def stack(broker: EmbeddedBroker, spark_connect: EmbeddedSparkConnect, tmp_path: Path) -> PipelineStack:
    settings = {**FAST_EXECUTOR_SESSION, "metrics.listeners": f"http://127.0.0.1:{free_port()}"}
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8], settings=settings).start()
    own = tmp_path / "executor.properties"
    # Port 0: the executor takes any free port and tells the control plane which.
    own.write_text("metrics.listeners=http://127.0.0.1:0\n")
    try:
        return attach_executor(plane, spark_connect, "metered", "--config", str(own), "--log-format", "json")
    except BaseException:
        plane.stop()
        raise


def test_records_lag_and_states_on_the_executors_metrics(
    stack: PipelineStack, spark: SparkSession, unique: str, tmp_path: Path, broker: EmbeddedBroker
) -> None:
    client = stack.client
    try:
        executor = client.server_info().executors[0]
        assert executor.metrics_url.startswith("http://127.0.0.1:")
        assert not executor.metrics_url.startswith("http://127.0.0.1:0/")
        url = executor.metrics_url
        plane_url = stack.plane.settings["metrics.listeners"] + "/metrics"
        assert (
            value(scrape(url), "sluiceway_executor_info", executor=executor.id, version=executor.version) == 1
        )

        topic, source, sink = f"metered-{unique}", f"gen-{unique}", f"sink-{unique}"
        client.create_connector(
            source,
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": str(TASKS),
                "max.records": str(PER_TASK),
                "batch.max.records": "6000",
            },
        )
        stack.wait_for(
            lambda: _task_sum(scrape(url), "sluiceway_task_records_written_total", source) == GENERATED,
            "the source's records counted",
        )
        assert topic_records(broker.bootstrap_servers, topic) == GENERATED
        samples = scrape(url)
        assert _task_sum(samples, "sluiceway_task_records_read_total", source) == GENERATED
        assert _task_sum(samples, "sluiceway_task_bytes_written_total", source) > GENERATED * 10

        # The sink starts behind every record and takes small batches: its lag shows while it reads.
        out = tmp_path / "lake"
        client.create_connector(
            sink,
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(out),
                "format": "parquet",
                "tasks.max": str(TASKS),
                "batch.max.records": "1500",
            },
        )
        behind: list[float] = []
        # (lag, records per second) of the sink's tasks in GetConnectorStatus while it catches up.
        progressing: list[tuple[int, float]] = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            samples = scrape(url)
            lag = _lag(samples, sink)
            if lag and any(records > 0 for records in lag.values()):
                behind.append(sum(lag.values()))
            for measured in client.connector_status(sink).raw.tasks:
                if measured.progress.HasField("lag") and measured.progress.lag > 0:
                    progressing.append((measured.progress.lag, measured.progress.records_per_second))
            if _task_sum(samples, "sluiceway_task_records_written_total", sink) == GENERATED and lag:
                break
            time.sleep(0.2)
        assert behind, f"the sink's lag was never seen above zero\n{stack.logs()}"
        assert any(rate > 0 for _, rate in progressing), f"no lag with a rate in the status: {progressing}"
        stack.wait_for(lambda: published_rows(out) >= GENERATED, "every record in the lake")
        rows, distinct = parquet_counts(spark, out)

        samples = scrape(url)
        assert _task_sum(samples, "sluiceway_task_records_read_total", sink) == rows == distinct == GENERATED
        assert _task_sum(samples, "sluiceway_task_records_written_total", sink) == rows
        assert _task_sum(samples, "sluiceway_task_bytes_read_total", sink) > 0
        stack.wait_for(lambda: set(_lag(scrape(url), sink).values()) == {0.0}, "the sink's lag at zero")
        assert _task_sum(samples, "sluiceway_task_batches_total", sink) >= GENERATED / 1500
        assert _task_sum(samples, "sluiceway_task_batch_seconds_count", sink) > 0
        assert _task_sum(samples, "sluiceway_task_restarts_total", sink) == 0
        assert value(samples, "sluiceway_task_seconds_since_last_commit", connector=sink, task="0") < 60

        # The status: every task's lag at 0 once its executor's next heartbeat is in; from a follower too.
        def caught_up(status: ConnectorStatus) -> bool:
            return all(t.progress.HasField("lag") and t.progress.lag == 0 for t in status.raw.tasks)

        stack.wait_for(lambda: caught_up(client.connector_status(sink)), "the sink's lag at 0 in its status")
        follower = ControlPlaneProcess(broker, stack.plane.suffix, settings=dict(FAST_EXECUTOR_SESSION))
        follower.start(lead=False)
        try:
            with SluicewayClient(follower.address, timeout=30) as asked:
                status = asked.connector_status(sink)
                assert caught_up(status), status.raw
                assert all(t.progress.records_per_second > 0 for t in status.raw.tasks), status.raw
                source_status = asked.connector_status(source).raw
                assert all(not t.progress.HasField("lag") for t in source_status.tasks), source_status
                assert all(t.progress.HasField("measure_time") for t in source_status.tasks), source_status
        finally:
            follower.stop()
        cli = [str(Path(sys.executable).parent / "sluiceway"), "--server", stack.plane.address]
        shown = subprocess.run(
            [*cli, "connectors", "status", sink],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        header = next(line for line in shown.splitlines() if line.startswith("INSTANCE"))
        assert header.split()[:4] == ["INSTANCE", "STATE", "RATE", "LAG"], shown
        # Each task row: its state (with its idle note), then RATE as N/s and LAG 0.
        task_rows = [line for line in shown.splitlines() if line.startswith("task ")]
        assert len(task_rows) == TASKS, shown
        assert all(re.search(r"\s[\d,.]+/s\s+0\s", row) for row in task_rows), shown

        # `connectors top` in a terminal: frames drawn in place, the sink's tasks in them, Ctrl-C ends it.
        drawn, code = _in_a_terminal([*cli, "connectors", "top", "--interval", "0.5"], seconds=6)
        assert code == 0, drawn
        assert drawn.count("connector(s)") >= 3, drawn  # the first frame and refreshes
        assert "\x1b[" in drawn  # drawn with the terminal's escape codes, by rich
        assert sink in drawn and source in drawn and "RUNNING" in drawn and "/s" in drawn, drawn

        # States: what the status API says, on the executor and on the control plane.
        plane_samples = scrape(plane_url)
        for name in (source, sink):
            status = client.connector_status(name)
            for task in status.tasks:
                state = task.state.name
                labels = {"connector": name, "task": str(task.id)}
                assert value(samples, "sluiceway_task_reported_state", **labels, state=state) == 1
                assert value(plane_samples, "sluiceway_task_state", **labels, state=state) == 1

        # Its JSON log lines for a task name the connector, the task and the batch in fields of their own.
        def for_sink() -> list[dict[str, Any]]:
            logged = [
                json.loads(line)
                for line in stack.executor.log_path.read_text().splitlines()
                if line.startswith("{")
            ]
            return [entry for entry in logged if entry.get("connector") == sink]

        assert {entry.get("task") for entry in for_sink()} == set(range(TASKS)), for_sink()
        # A line written between batches: the sink's tasks say they are idle once their batches have
        # come back empty for 10 s (the test may get here sooner on a fast machine).
        stack.wait_for(lambda: any("batch" in entry for entry in for_sink()), "a sink line with its batch")

        # A connector deleted: its tasks' series leave the executor's metrics.
        client.delete_connector(sink)
        stack.wait_for(
            lambda: _task_sum(scrape(url), "sluiceway_task_batches_total", sink) == 0,
            "the deleted sink's series to go",
        )
    finally:
        stack.close()
        stack.plane.stop()
