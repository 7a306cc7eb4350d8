"""`sluiceway dev` for real: the all-in-one stack starts (broker, Spark Connect, control plane and
one executor), serves gRPC health, and a Ctrl-C stops every process it started, grandchildren
included, with exit code 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedSparkConnect, free_port
from tests.integration.pipeline_helpers import parquet_counts

pytestmark = pytest.mark.integration

pytest.importorskip("sluiceway_server.main", reason="the control plane is not installed")

DEV = "import sys; from sluiceway_server.dev import main; sys.exit(main(sys.argv[1:]))"
READY_LINE = "Press Ctrl-C to stop everything."
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 120.0


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(state, ppid, start time) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: fields follow the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), fields[19]


def descendants(root: int) -> dict[int, str]:
    """Every live process below `root`, each with its start time (so a reused pid is not it)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
            starts[int(entry.name)] = stat[2]
    found: dict[int, str] = {}
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found[child] = starts[child]
            pending.append(child)
    return found


def still_running(processes: dict[int, str]) -> list[int]:
    alive = []
    for pid, start in processes.items():
        stat = _stat(pid)
        # A zombie has finished; only the reaping is left, to whichever process adopted it.
        if stat is not None and stat[2] == start and stat[0] != "Z":
            alive.append(pid)
    return alive


class Output:
    """Collects a child's merged stdout/stderr lines on a thread, so its pipe never fills."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._pump, args=(process,), daemon=True)
        self._thread.start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))
            if READY_LINE in line:
                self.ready.set()

    def text(self) -> str:
        return "\n".join(self.lines)


def wait_serving(address: str, process: subprocess.Popen[str], output: Output) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert process.poll() is None, f"sluiceway dev exited early:\n{output.text()}"
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.3)
    pytest.fail(f"control plane at {address} not SERVING after {START_TIMEOUT_S:.0f}s:\n{output.text()}")


@pytest.fixture
def dev_stack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Output, int, Path]]:
    port = free_port()
    log_dir = tmp_path / "logs"
    process = subprocess.Popen(
        [sys.executable, "-c", DEV, "--port", str(port), "--log-dir", str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    output = Output(process)
    seen: dict[int, str] = {}
    try:
        yield process, output, port, log_dir
    finally:
        # Whatever the test did: leave no process of the stack behind.
        if process.poll() is None:
            seen = descendants(process.pid)
            process.kill()
            process.wait(10)
        for pid in still_running(seen):
            os.kill(pid, signal.SIGKILL)


def quickstart(port: int, lake: Path) -> None:
    """The README quickstart's two commands, through the installed CLI."""
    cli = [str(Path(sys.executable).parent / "sluiceway"), "--server", f"127.0.0.1:{port}"]
    for args in (
        [
            "connectors",
            "create",
            "gen",
            "connector.class=DataGenSource",
            "topic=datagen",
            "tasks.max=2",
            "max.records=50000",
        ],
        [
            "connectors",
            "create",
            "lake",
            "connector.class=SparkFileSink",
            "topics=datagen",
            f"path={lake}",
            "format=parquet",
        ],
    ):
        result = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr


def test_dev_stack_runs_the_quickstart_and_stops_everything_on_ctrl_c(
    dev_stack: tuple[subprocess.Popen[str], Output, int, Path],
    spark_connect: EmbeddedSparkConnect,
    tmp_path: Path,
) -> None:
    process, output, port, log_dir = dev_stack
    wait_serving(f"127.0.0.1:{port}", process, output)
    assert output.ready.wait(START_TIMEOUT_S), f"no ready banner:\n{output.text()}"

    stack = descendants(process.pid)
    direct = [pid for pid in stack if (stat := _stat(pid)) is not None and stat[1] == process.pid]
    assert len(direct) >= 3, f"expected broker, Spark Connect and control plane; got {direct}"
    banner = output.text()
    assert f"127.0.0.1:{port}" in banner
    assert "sc://127.0.0.1:" in banner
    assert str(log_dir) in banner
    assert {"tansu.log", "spark-connect.log", "control-plane.log"} <= {p.name for p in log_dir.iterdir()}

    # README quickstart: make run, then two commands, leave Parquet holding exactly the generated records.
    lake = tmp_path / "lake"
    quickstart(port, lake)
    spark = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    try:
        deadline = time.monotonic() + 240
        counts = (0, 0)
        while time.monotonic() < deadline and counts != (100_000, 100_000):
            time.sleep(2)
            counts = parquet_counts(spark, lake)
        assert counts == (100_000, 100_000), f"{counts}\n{output.text()}"
    finally:
        spark.stop()

    process.send_signal(signal.SIGINT)
    assert process.wait(STOP_TIMEOUT_S) == 0, output.text()

    deadline = time.monotonic() + 10
    while still_running(stack) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert still_running(stack) == [], f"left running: {still_running(stack)}\n{output.text()}"
    assert "stopping control-plane" in output.text()
