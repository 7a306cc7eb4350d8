"""`sluiceway dev`: the all-in-one local stack behind `make run`.

Starts, in order, an embedded Kafka-compatible broker (Tansu), a Spark Connect server, one
control-plane replica (or `--replicas N`, on consecutive ports, forming one cluster) and one
executor that knows every replica, each as a child process logging to `--log-dir` (a fresh set of
files each run, the previous runs' moved into `previous-1/` …, every file rotated by size: see
log_files). It waits for each to be ready, prints where everything runs and the README Quickstart's
first commands, and then supervises them: Ctrl-C or SIGTERM stops them all in reverse order
(exit 0); a child that dies stops the rest and is reported with the end of its log (exit 1) —
except a replica of a cluster of several, whose death is reported while the others carry on (to
try a failover, kill one).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import grpc
from grpc_health.v1 import health_pb2_grpc

from sluiceway_server.embedded import (
    ManagedProcess,
    control_plane_argv,
    executor_argv,
    free_port,
    is_serving,
    spawn,
    start_broker,
    start_spark_connect,
)
from sluiceway_server.log_files import PREVIOUS_RUNS_KEPT, LogRotation, set_aside_previous_run
from sluiceway_server.spark_cluster import start_spark_cluster

DEFAULT_BROKER_PORT = 9092
DEFAULT_SPARK_CONNECT_PORT = 15002
DEFAULT_CONTROL_PLANE_PORT = 8083
DEFAULT_LOG_DIR = Path("var/dev-logs")
LOG_ROTATION = LogRotation()
# The log files a run writes (named after the children) and their rotated pieces: what the next run
# moves aside. Nothing else in --log-dir is touched.
STACK_LOGS = re.compile(
    r"(?:tansu|spark-connect|spark-master(?:-\d+)?|spark-worker-\d+|control-plane(?:-\d+)?|executor)"
    r"\.log(?:\.\d+)?"
)
# `--spark-master cluster`: Spark's standalone master and this many workers (one core each) on this
# machine, instead of a local master inside the Spark Connect server.
CLUSTER_MASTER = "cluster"
CLUSTER_WORKERS = 2

# The README Quickstart's first commands (its first ```sh block, after the line that activates the
# venv), which the start-up table offers to try; tests/unit/server/test_dev_banner.py keeps the two
# the same.
QUICKSTART: tuple[tuple[str, ...], ...] = (
    (
        "connectors",
        "create",
        "gen",
        "connector.class=DataGenSource",
        "topic=datagen",
        "tasks.max=2",
        "max.records=50000",
        "value.type=struct",
        "value.converter=JsonConverter",
        "value.converter.schemas.enable=true",
    ),
    (
        "connectors",
        "create",
        "lake",
        "connector.class=SparkFileSink",
        "topics=datagen",
        "path=/tmp/sluiceway-lake",
        "format=parquet",
        "value.converter=JsonConverter",
        "value.converter.schemas.enable=true",
    ),
)

# Before it reports SERVING the control plane creates its internal topics and reads them to the
# end, which can take a while on a freshly started broker.
CONTROL_PLANE_TIMEOUT_S = 120.0
# How long to wait for the executor to show up in the control plane's executor list; past it the
# stack keeps running (the executor may still be attaching) and says so.
EXECUTOR_ATTACH_TIMEOUT_S = 30.0
TAIL_LINES = 30

# Every internal topic on a one-broker cluster can only have one replica.
_SINGLE_BROKER_SETTINGS = {
    "config.storage.replication.factor": "1",
    "offset.storage.replication.factor": "1",
    "status.storage.replication.factor": "1",
    "cluster.storage.replication.factor": "1",
}


class _Stop(BaseException):
    """Raised from the SIGINT/SIGTERM handler; a BaseException so that no `except Exception`
    on the way (process start-up, health polling) swallows the request to stop."""


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sluiceway dev",
        description="Run the all-in-one local stack: broker, Spark Connect, control plane and executor.",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=DEFAULT_LOG_DIR,
        help=f"directory for the children's logs (default: ./{DEFAULT_LOG_DIR})",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_CONTROL_PLANE_PORT,
        help=f"gRPC port of the control plane (default: {DEFAULT_CONTROL_PLANE_PORT})",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="control-plane replicas, on ports --port, --port+1, … (default: 1)",
    )
    parser.add_argument(
        "--spark-master",
        default="local[2]",
        help=(
            "Spark master of the Spark Connect server (default: local[2]); `cluster` starts Spark's "
            f"standalone master and {CLUSTER_WORKERS} workers here and runs the jobs there"
        ),
    )
    return parser.parse_args(argv)


def port_in_use(port: int) -> bool:
    """Whether something already listens on `port` (on any address). SO_REUSEADDR, as every server
    sets it, so connections lingering in TIME_WAIT from an earlier run do not count."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return True
        return False


def _preferred_port(port: int) -> int:
    return free_port() if port_in_use(port) else port


def _child_env() -> dict[str, str]:
    # Unbuffered, so a child's last words are in its log when it dies.
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _wait_until(
    probe: Callable[[], bool], timeout: float, child: ManagedProcess, interval: float = 0.2
) -> bool:
    """Poll `probe` until it is true (True) or `timeout` passes (False); fail if `child` exits."""
    deadline = time.monotonic() + timeout
    while True:
        if child.process.poll() is not None:
            raise _ChildDiedError(child)
        if probe():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class _ChildDiedError(Exception):
    def __init__(self, child: ManagedProcess) -> None:
        super().__init__(f"{child.name} exited with code {child.process.returncode}")
        self.child = child


def _executor_attached(channel: grpc.Channel) -> bool:
    from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc

    try:
        info = cluster_pb2_grpc.ClusterServiceStub(channel).GetServerInfo(
            cluster_pb2.GetServerInfoRequest(), timeout=2
        )
    except grpc.RpcError:
        return False
    return len(info.executors) > 0


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """The first SIGINT or SIGTERM raises _Stop; later ones are ignored, so that nothing cuts the
    orderly shutdown short (every stop has its own timeout). The previous handlers come back
    afterwards: the CLI may call main() in a process that has its own."""
    requested: list[str] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not requested:
            requested.append(signal.Signals(signum).name)
            raise _Stop(requested[0])

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _say(message: str = "") -> None:
    print(message, flush=True)


def _report_death(child: ManagedProcess) -> None:
    print(
        f"sluiceway dev: {child.name} exited with code {child.process.returncode}; stopping the rest.\n"
        f"--- last lines of {child.log_path} ---\n{child.tail(TAIL_LINES)}\n---",
        file=sys.stderr,
        flush=True,
    )


# A started child and how to stop it (the embedded broker and Spark Connect clean up after themselves).
_Child = tuple[ManagedProcess, Callable[[], None]]


def _stop_all(running: list[_Child]) -> None:
    for child, stop in reversed(running):
        if child.process.poll() is None:
            _say(f"sluiceway dev: stopping {child.name} (pid {child.process.pid})")
        try:
            stop()
        except Exception as exc:  # keep stopping the others whatever one of them does
            print(f"sluiceway dev: could not stop {child.name}: {exc}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    args = _parse_args(argv)
    log_dir: Path = args.log_dir.resolve()
    if args.replicas < 1:
        print("sluiceway dev: --replicas must be at least 1", file=sys.stderr)
        return 2
    for port in range(args.port, args.port + args.replicas):
        if port_in_use(port):
            print(
                f"sluiceway dev: port {port} is already in use; choose another with --port", file=sys.stderr
            )
            return 2
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        previous = set_aside_previous_run(log_dir, STACK_LOGS)
    except OSError as exc:
        print(f"sluiceway dev: cannot prepare the log directory {log_dir}: {exc}", file=sys.stderr)
        return 1
    if previous is not None:
        _say(f"sluiceway dev: the previous run's logs are now in {_shown(previous)}")

    running: list[_Child] = []
    code: int | None = None
    with _stop_on_signals():
        try:
            try:
                code = _run(args, log_dir, running)
            except _Stop as stop:
                _say(f"sluiceway dev: {stop} received, stopping")
                code = 0
            finally:
                _stop_all(running)
        except _Stop:
            # The one signal arrived while the first pass above was stopping the children after a
            # failure; finish the job (no further signal can interrupt it).
            _stop_all(running)
    return 1 if code is None else code


def _run(args: argparse.Namespace, log_dir: Path, running: list[_Child]) -> int:
    """Start the stack (each child appended to `running` once started) and supervise it."""
    rows: list[tuple[str, str]] = []
    notes: list[str] = []
    port: int = args.port
    try:
        _say(f"sluiceway dev: starting the broker (logs in {_shown(log_dir)})")
        broker = start_broker(log_dir, port=_preferred_port(DEFAULT_BROKER_PORT), rotation=LOG_ROTATION)
        running.append((broker.managed, broker.stop))
        rows.append(("broker (Tansu, in memory)", broker.bootstrap_servers))

        master, connect_conf = args.spark_master, {}
        if master == CLUSTER_MASTER:
            _say(f"sluiceway dev: starting Spark's standalone master and {CLUSTER_WORKERS} workers")
            cluster = start_spark_cluster(log_dir, workers=CLUSTER_WORKERS, rotation=LOG_ROTATION)
            assert cluster.master is not None
            running.append((cluster.master, cluster.stop))
            running += [(worker, worker.stop) for worker in cluster.workers]
            master, connect_conf = cluster.master_url, cluster.connect_conf()
            rows.append(("Spark master (standalone)", f"{master}, web UI {cluster.master_ui_url}"))
            rows.append(("Spark workers", f"{CLUSTER_WORKERS}, one core each"))
        _say(f"sluiceway dev: starting Spark Connect ({master})")
        spark = start_spark_connect(
            log_dir,
            port=_preferred_port(DEFAULT_SPARK_CONNECT_PORT),
            master=master,
            extra_conf=connect_conf,
            rotation=LOG_ROTATION,
        )
        running.append((spark.managed, spark.stop))
        rows.append((f"Spark Connect ({master})", spark.remote))

        ports = list(range(port, port + args.replicas))
        addresses = [f"127.0.0.1:{p}" for p in ports]
        replicas: list[ManagedProcess] = []
        for number, address in enumerate(addresses):
            name = "control-plane" if args.replicas == 1 else f"control-plane-{number}"
            # Kafka Connect's REST API next to the gRPC ports (8084 beside a single replica on 8083),
            # or any free port when that one is taken.
            rest = f"http://127.0.0.1:{_preferred_port(port + args.replicas + number)}"
            # Prometheus metrics after those (8085 for a single replica).
            metrics = f"http://127.0.0.1:{_preferred_port(port + 2 * args.replicas + number)}"
            _say(f"sluiceway dev: starting {name}")
            plane_argv = control_plane_argv(
                broker.bootstrap_servers,
                # This host only: the development stack runs without authentication.
                address,
                None,
                {
                    **_SINGLE_BROKER_SETTINGS,
                    "advertised.listeners": address,
                    "rest.listeners": rest,
                    "metrics.listeners": metrics,
                },
            )
            plane = spawn(name, plane_argv, log_dir, env=_child_env(), rotation=LOG_ROTATION)
            running.append((plane, plane.stop))
            replicas.append(plane)
            with grpc.insecure_channel(address) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                if not _wait_until(functools.partial(is_serving, health), CONTROL_PLANE_TIMEOUT_S, plane):
                    raise TimeoutError(
                        f"{name} is not SERVING after {CONTROL_PLANE_TIMEOUT_S:.0f}s; see {plane.log_path}"
                    )
            where = f"{address}, pid {plane.process.pid} (this host only, no authentication)"
            rows.append((f"{name} (gRPC)", where))
            rows.append((f"{name} (Kafka Connect REST)", f"{rest} (this host only, no authentication)"))
            rows.append((f"{name} (Prometheus metrics)", f"{metrics}/metrics"))

        _say("sluiceway dev: starting an executor")
        # Its metrics after the replicas' (8086 beside a single replica), through the variable an
        # executor takes its own worker keys from.
        executor_metrics = f"http://127.0.0.1:{_preferred_port(port + 3 * args.replicas)}"
        executor = spawn(
            "executor",
            executor_argv(",".join(addresses), spark.remote),
            log_dir,
            env={**_child_env(), "SLUICEWAY_METRICS_LISTENERS": executor_metrics},
            rotation=LOG_ROTATION,
        )
        running.append((executor, executor.stop))
        with grpc.insecure_channel(addresses[0]) as channel:
            attached = _wait_until(
                lambda: _executor_attached(channel), EXECUTOR_ATTACH_TIMEOUT_S, executor, interval=0.5
            )
        rows.append(("executor", f"pid {executor.process.pid}, Spark Connect {spark.remote}"))
        rows.append(("executor (Prometheus metrics)", f"{executor_metrics}/metrics"))
        if not attached:
            notes.append(
                f"the executor has not attached after {EXECUTOR_ATTACH_TIMEOUT_S:.0f}s; "
                f"see {executor.log_path}"
            )
        rows += _log_rows(log_dir)
    except _ChildDiedError as died:
        _report_death(died.child)
        return 1
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"sluiceway dev: {exc}", file=sys.stderr, flush=True)
        return 1

    _say(banner(rows, notes, port, cli_command()))
    return _supervise(running, tolerated={r.name for r in replicas} if len(replicas) > 1 else set())


def _shown(path: Path) -> str:
    """`path` as the user can type it here: relative when under the current directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _log_rows(log_dir: Path) -> list[tuple[str, str]]:
    shown = _shown(log_dir)
    return [
        (
            "logs",
            f"{shown}/*.log, a fresh set each run (the {PREVIOUS_RUNS_KEPT} runs before: previous-1/ … "
            f"previous-{PREVIOUS_RUNS_KEPT}/)",
        ),
        ("", LOG_ROTATION.describe()),
    ]


def cli_command() -> str:
    """The `sluiceway` command of this installation as the user can type it in the current
    directory: `sluiceway` when the PATH finds this one, else its path (relative to the current
    directory when under it, as `.venv/bin/sluiceway`)."""
    # Not resolved: the venv's python is a link to the base interpreter, outside the venv.
    script = Path(os.path.abspath(sys.executable)).parent / "sluiceway"
    if not script.exists():
        return "sluiceway"
    found = shutil.which("sluiceway")
    if found is not None and Path(found).resolve() == script.resolve():
        return "sluiceway"
    shown = _shown(script)
    return shown if "/" in shown else f"./{shown}"


def banner(rows: list[tuple[str, str]], notes: list[str], port: int, cli: str) -> str:
    """The start-up table: where everything runs, then the Quickstart's first commands."""
    width = max(len(name) for name, _ in rows)
    server_flag = "" if port == DEFAULT_CONTROL_PLANE_PORT else f" --server 127.0.0.1:{port}"
    lines = ["", "Sluiceway dev stack is running:", ""]
    lines += [f"  {name.ljust(width)}  {where}" for name, where in rows]
    lines += [f"  note: {note}" for note in notes]
    lines += ["", "Try the README's Quickstart, in a second terminal, in this directory:"]
    if cli != "sluiceway":
        # As the README has it: the venv's bin on the PATH first.
        activate = shlex.quote(str(Path(cli).with_name("activate")))
        lines.append(
            f"  source {activate}   # puts `sluiceway` on the PATH; or type {shlex.quote(cli)} each time"
        )
    lines += [f"  sluiceway{server_flag} {shlex.join(command)}" for command in QUICKSTART]
    lines += ["", "Press Ctrl-C to stop everything.", ""]
    return "\n".join(lines)


def _supervise(running: list[_Child], tolerated: set[str]) -> int:
    """Until a signal (raises _Stop) or the death of a child not named in `tolerated` (returns 1);
    the death of a tolerated one (a replica of a cluster) is reported once."""
    reported: set[str] = set()
    while True:
        for child, _ in running:
            if child.process.poll() is not None and child.name not in reported:
                if child.name not in tolerated:
                    _report_death(child)
                    return 1
                reported.add(child.name)
                print(
                    f"sluiceway dev: {child.name} exited with code {child.process.returncode}; "
                    "the other replicas carry on",
                    file=sys.stderr,
                    flush=True,
                )
        time.sleep(0.5)
