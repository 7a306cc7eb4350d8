"""`sluiceway dev` for real: the all-in-one stack starts (broker, Spark Connect, control plane and
one executor), serves gRPC health, runs the Quickstart its start-up table prints, and a Ctrl-C stops
every process it started, grandchildren included, with exit code 0. The next run starts fresh log
files and moves the previous run's into previous-1/."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedSparkConnect, free_port
from tests.integration.pipeline_helpers import published_rows, typed_lake_counts
from tests.readme_blocks import blocks_under, commands

pytestmark = pytest.mark.integration

pytest.importorskip("sluiceway_server.main", reason="the control plane is not installed")

DEV = "import sys; from sluiceway_server.dev import main; sys.exit(main(sys.argv[1:]))"
READY_LINE = "Press Ctrl-C to stop everything."
STACK_LOGS = {"tansu.log", "spark-connect.log", "control-plane.log", "executor.log"}
START_TIMEOUT_S = 180.0
# What the README's Quickstart names that differs in the test: the lake and the Spark Connect address.
README_LAKE = "/tmp/sluiceway-lake"
README_SPARK = "sc://127.0.0.1:15002"
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


def start_dev(port: int, log_dir: Path) -> tuple[subprocess.Popen[str], Output]:
    process = subprocess.Popen(
        [sys.executable, "-c", DEV, "--port", str(port), "--log-dir", str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return process, Output(process)


def kill_all(process: subprocess.Popen[str]) -> None:
    """Leave no process of a `sluiceway dev` behind, whatever the test did."""
    seen: dict[int, str] = {}
    if process.poll() is None:
        seen = descendants(process.pid)
        process.kill()
        process.wait(10)
    for pid in still_running(seen):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def dev_stack(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Output, int, Path]]:
    port = free_port()
    log_dir = tmp_path / "logs"
    process, output = start_dev(port, log_dir)
    try:
        yield process, output, port, log_dir
    finally:
        kill_all(process)


def cli_path(banner: str) -> str:
    """The console script as the start-up table names it: the activated venv's, or the one on the
    PATH."""
    lines = banner.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("Try "))
    first = shlex.split(lines[start + 1], comments=True)
    found = str(Path(first[1]).with_name("sluiceway")) if first[0] == "source" else shutil.which("sluiceway")
    assert found is not None, banner
    return found


def quickstart(banner: str, lake: Path) -> None:
    """The Quickstart as the start-up table offers it (its "Try" lines), typed into a shell in this
    directory, with the lake under the test's own directory."""
    lines = banner.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("Try "))
    commands = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        commands.append(shlex.split(line, comments=True))
    cli = shutil.which("sluiceway")
    if commands[0][0] == "source":
        # Activating the venv puts its bin/ first on the PATH.
        cli = str(Path(commands.pop(0)[1]).with_name("sluiceway"))
    assert cli is not None, banner
    assert len(commands) == 2, banner
    for command in commands:
        assert command[:2] == ["sluiceway", "--server"], banner
        args = [f"path={lake}" if arg.startswith("path=") else arg for arg in command[1:]]
        result = subprocess.run([cli, *args], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr


def _readme_command(cli: str, port: int, line: str, lake: Path) -> subprocess.CompletedProcess[str]:
    """One `sluiceway …` line of the README, against this stack (the README's stack listens on
    8083, this one on `port`) and with the lake under the test's own directory."""
    words = [str(lake) if word == README_LAKE else word for word in shlex.split(line)]
    assert words[0] == "sluiceway", line
    env = {**os.environ, "SLUICEWAY_SERVER": f"127.0.0.1:{port}"}
    return subprocess.run([cli, *words[1:]], capture_output=True, text=True, timeout=60, env=env, check=False)


def readme_quickstart_after_the_pipeline(cli: str, port: int, spark_remote: str, lake: Path) -> None:
    """The rest of the README's Quickstart as written, once the lake is complete: the commands that
    watch the pipeline, the Spark check, and the commands that operate connectors."""
    watching, operating = blocks_under("Quickstart", "sh")[1:3]
    for line in commands(watching):
        if " watch " in f"{line} ":
            # `watch` runs until Ctrl-C: it prints the current states first, gen's among them.
            env = {**os.environ, "SLUICEWAY_SERVER": f"127.0.0.1:{port}"}
            argv = [cli, *shlex.split(line)[1:]]
            with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as watch:
                assert watch.stdout is not None
                first = watch.stdout.readline()
                watch.send_signal(signal.SIGINT)
                assert watch.wait(30) == 130
            assert first.split()[1] == "gen" and "RUNNING" in first, first
            continue
        result = _readme_command(cli, port, line, lake)
        assert result.returncode == 0, (line, result.stderr)
        if line.startswith("sluiceway connectors status gen"):
            assert result.stdout.count("RUNNING (idle: end of data, since ") == 2, result.stdout
        if line.startswith("sluiceway offsets get gen"):
            assert result.stdout.count("49999") == 2, result.stdout

    (check,) = blocks_under("Quickstart", "python")
    code = check.text.replace(README_SPARK, spark_remote).replace(README_LAKE, str(lake))
    printed = io.StringIO()
    names: dict[str, object] = {"__name__": "readme_quickstart"}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), names)
    finally:
        session = names.get("spark")
        if isinstance(session, SparkSession):
            session.stop()
    assert re.search(r"\|\s*100000\|\s*100000\|", printed.getvalue()), printed.getvalue()

    for line in commands(operating):
        result = _readme_command(cli, port, line, lake)
        assert result.returncode == 0, (line, result.stderr)


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
    assert {p.name for p in log_dir.iterdir()} >= STACK_LOGS
    # The table names Kafka Connect's REST API, which answers there.
    rest = re.search(r"\(Kafka Connect REST\)\s+(http://127\.0\.0\.1:\d+)", banner)
    assert rest is not None, banner
    with urllib.request.urlopen(f"{rest.group(1)}/connectors", timeout=10) as answer:
        assert json.loads(answer.read()) == []

    # README quickstart: make run, then the commands the table offers, leave Parquet holding exactly
    # the generated records.
    lake = tmp_path / "lake"
    quickstart(banner, lake)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and published_rows(lake) < 100_000:
        time.sleep(1)
    spark = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    try:
        counts = typed_lake_counts(spark, lake)
        assert counts == (100_000, 100_000), f"{counts}\n{output.text()}"
    finally:
        spark.stop()
    # The executor's metrics, where the table says, counted those records.
    executor_metrics = re.search(r"executor \(Prometheus metrics\)\s+(http://\S+)", banner)
    assert executor_metrics is not None, banner
    with urllib.request.urlopen(executor_metrics.group(1), timeout=10) as answer:
        written = [
            sample.value
            for family in text_string_to_metric_families(answer.read().decode())
            for sample in family.samples
            if sample.name == "sluiceway_task_records_written_total"
        ]
    assert sum(written) >= 2 * 100_000, written  # by the source to Kafka, by the sink to the lake
    readme_quickstart_after_the_pipeline(cli_path(banner), port, spark_connect.remote, lake)

    process.send_signal(signal.SIGINT)
    assert process.wait(STOP_TIMEOUT_S) == 0, output.text()

    deadline = time.monotonic() + 10
    while still_running(stack) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert still_running(stack) == [], f"left running: {still_running(stack)}\n{output.text()}"
    assert "stopping control-plane" in output.text()
    first_run = {name: (log_dir / name).read_bytes() for name in STACK_LOGS}
    assert first_run["control-plane.log"]
    assert first_run["executor.log"]

    # The next run moves those aside and starts afresh (stopped once its broker is up).
    again, again_output = start_dev(port, log_dir)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "starting Spark Connect" not in again_output.text():
            assert again.poll() is None and time.monotonic() < deadline, again_output.text()
            time.sleep(0.2)
        again.send_signal(signal.SIGINT)
        assert again.wait(STOP_TIMEOUT_S) == 0, again_output.text()
    finally:
        kill_all(again)
    assert f"the previous run's logs are now in {log_dir / 'previous-1'}" in again_output.text()
    assert {name: (log_dir / "previous-1" / name).read_bytes() for name in STACK_LOGS} == first_run
    # This run's broker log is its own; the children it never started have none.
    assert (log_dir / "tansu.log").exists()
    assert not (log_dir / "control-plane.log").exists()
    assert not (log_dir / "executor.log").exists()
