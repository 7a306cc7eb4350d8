"""Session-wide test bed: one real broker (Tansu), one real Spark Connect server and one real
control plane (a `sluiceway server` process on a socket) per test session, which under
pytest-xdist is per worker; every test gets its own topic, group and connector names."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import pytest

from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc
from sluiceway.common.transport import TransportSecurity
from sluiceway_server.embedded import (
    SPARK_JAVA_OPTIONS_ENV,
    EmbeddedBroker,
    EmbeddedSparkConnect,
    ManagedProcess,
    control_plane_argv,
    free_port,
    spawn,
    start_broker,
    start_spark_connect,
    wait_serving,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

    from sluiceway_server.spark_cluster import EmbeddedSparkCluster
    from tests.postgres_server import PostgresServer

# Under pytest-xdist (`make test` runs two workers) each worker has a test bed of its own, and its
# own directory of service logs below this one (gw0/, gw1/).
LOG_DIR = Path(os.environ.get("SLUICEWAY_TEST_LOG_DIR", "/tmp/sluiceway-test-logs")) / os.environ.get(
    "PYTEST_XDIST_WORKER", ""
)

# Spark's JVMs in the test bed (and in the `sluiceway dev` stacks tests start, which inherit this)
# compile with the JIT's first tier only. The suite runs thousands of small, short-lived plans: the
# top tier's compiler took a third of Spark Connect's CPU time, and without it a sample of the
# pipeline tests used 23% less CPU and ran 11% faster (measured 2026-11-29; bench/ keeps the default).
os.environ.setdefault(SPARK_JAVA_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
TEST_PLUGINS = Path(__file__).parent / "plugins"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on Spark's standalone cluster run after the other integration and fault tests (in
    their own order), so the session's cluster, five JVMs, takes nothing from those; the unit tests
    come last, short units that fill in for a worker that has nothing else left."""

    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith("tests/unit/"):
            return 2
        return 1 if item.get_closest_marker("cluster") is not None else 0

    items.sort(key=rank)


def terminal_env() -> dict[str, str]:
    """The environment for a child a test runs on a pseudo-terminal: TERM set, and without the
    COLUMNS and LINES pytest-xdist sets in its workers (80 by 24), which libraries such as rich
    would take over the size the terminal itself reports."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return {**env, "TERM": "xterm-256color"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling:
    """pytest-xdist's workers get whole test modules, and all the cluster tests together
    (tests/xdist_scheduling.py)."""
    from tests.xdist_scheduling import ModuleScheduling

    return ModuleScheduling(config, log)


# Lines of each service log a failed test's report ends with.
LOG_TAIL_LINES = 40


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test's report carries the tails of the service logs (control planes, executors,
    the broker, Spark Connect) written while it ran: CI keeps the report, not the log files."""
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed and LOG_DIR.is_dir():
        for path in sorted(LOG_DIR.glob("*.log")):
            if path.stat().st_mtime >= call.start:
                lines = _tail(path, LOG_TAIL_LINES)
                report.sections.append((f"log {path.name} (last {len(lines)} lines)", "\n".join(lines)))
    return report


def _tail(path: Path, count: int) -> list[str]:
    """The last `count` lines of a log that may be large (Spark Connect's), read from its end."""
    with path.open("rb") as log:
        log.seek(max(0, path.stat().st_size - 64 * 1024))
        return log.read().decode(errors="replace").splitlines()[-count:]


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A Kafka-compatible broker on a free loopback port for the whole session."""
    started = start_broker(LOG_DIR)
    yield started
    started.stop()


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[EmbeddedSparkConnect]:
    """A Spark Connect server (local[2]) for the whole session; its Python workers run
    this interpreter, so they import the project."""
    started = start_spark_connect(LOG_DIR)
    yield started
    started.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[EmbeddedSparkCluster]:
    """Spark's standalone master and two workers of one core each, for the whole session (started
    when a test first asks for it). The fault tests kill and replace its parts and leave it whole."""
    from sluiceway_server.spark_cluster import start_spark_cluster

    started = start_spark_cluster(LOG_DIR / "spark-cluster")
    yield started
    started.stop()


@pytest.fixture(scope="session")
def cluster_spark_connect(spark_cluster: EmbeddedSparkCluster) -> Iterator[EmbeddedSparkConnect]:
    """A Spark Connect server submitting to `spark_cluster`: its jobs run in the workers' executors."""
    started = start_spark_connect(
        LOG_DIR / "spark-cluster", master=spark_cluster.master_url, extra_conf=spark_cluster.connect_conf()
    )
    yield started
    started.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server (a fresh cluster on a free loopback port) for the whole
    session, with an empty database; skipped only where PostgreSQL is not installed."""
    from tests.postgres_server import find_bin_dir, start_postgres  # psycopg only where needed

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (deploy/bootstrap.sh --tests installs it)")
    started = start_postgres(LOG_DIR, bin_dir)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def spark(spark_connect: EmbeddedSparkConnect) -> Iterator[SparkSession]:
    """A Spark Connect session for a module's tests, with no data sources of ours registered
    (modules that test registration itself define their own)."""
    from pyspark.sql import SparkSession  # here, so that unit-test runs do not import Spark

    session = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    yield session
    session.stop()


@pytest.fixture(scope="module")
def spark_with_sources(spark_connect: EmbeddedSparkConnect) -> Iterator[SparkSession]:
    """A Spark Connect session with every data source of ours registered, as an executor's is."""
    from pyspark.sql import SparkSession

    from sluiceway_executor.spark_sessions import register_data_sources

    session = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    register_data_sources(session)
    yield session
    session.stop()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for this test's topics, groups and connector names."""
    return uuid.uuid4().hex[:10]


@dataclass
class ControlPlaneProcess:
    """A `sluiceway server` child process with its own internal topics."""

    broker: EmbeddedBroker
    suffix: str
    port: int = field(default_factory=free_port)
    settings: dict[str, str] = field(default_factory=dict)
    managed: ManagedProcess | None = None
    # How this test's own calls reach it (TLS, a token) when it requires them.
    security: TransportSecurity = field(default_factory=TransportSecurity)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def topics(self) -> dict[str, str]:
        return {
            "config": f"configs-{self.suffix}",
            "offset": f"offsets-{self.suffix}",
            "status": f"status-{self.suffix}",
            "cluster": f"cluster-{self.suffix}",
        }

    def argv(self) -> list[str]:
        return control_plane_argv(
            self.broker.bootstrap_servers, self.address, f"cluster-{self.suffix}", self._settings()
        )

    def _settings(self) -> dict[str, str]:
        return {
            "config.storage.topic": self.topics["config"],
            "offset.storage.topic": self.topics["offset"],
            "status.storage.topic": self.topics["status"],
            "cluster.storage.topic": self.topics["cluster"],
            "cluster.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "2",
            "plugin.callback.timeout.ms": "5000",
            # A silent leader (the SIGSTOP test's) is replaced after this; its member record is
            # refreshed every second (cluster/election.py).
            "session.timeout.ms": "3000",
            # The test plugins (testing_connectors, deletion_connectors) load from here; executors
            # get it in the worker config Welcome carries.
            "plugin.path": str(TEST_PLUGINS),
            **self.settings,
        }

    def start(self, timeout: float = 60.0, *, lead: bool = True) -> ControlPlaneProcess:
        """Spawn it and wait until it serves; with `lead`, also until it leads (a replica restarted
        on the same topics serves as soon as it has read the last leader's announcement)."""
        self.managed = spawn(f"control-plane-{self.suffix}", self.argv(), LOG_DIR)
        deadline = time.monotonic() + timeout
        wait_serving(self.address, timeout, self.managed, self.security)
        if lead:
            self.wait_until_leading(max(deadline - time.monotonic(), 1.0))
        return self

    def server_info(self, timeout: float = 5.0) -> cluster_pb2.ServerInfo:
        with self.security.channel(self.address, []) as channel:
            info: cluster_pb2.ServerInfo = cluster_pb2_grpc.ClusterServiceStub(channel).GetServerInfo(
                cluster_pb2.GetServerInfoRequest(), timeout=timeout, metadata=self.security.metadata()
            )
            return info

    def wait_until_leading(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            info = self.server_info()
            if info.leader.id and info.leader.id == info.this_replica.id:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"control plane at {self.address} does not lead after {timeout:.0f}s")
            time.sleep(0.2)

    def stop(self) -> int:
        assert self.managed is not None
        self.managed.stop(timeout=30)
        return self.managed.process.returncode

    def kill(self) -> None:
        assert self.managed is not None
        self.managed.kill()


@pytest.fixture(scope="session")
def control_plane(broker: EmbeddedBroker) -> Iterator[ControlPlaneProcess]:
    """The shared control plane; tests use their own connector names (`unique`)."""
    plane = ControlPlaneProcess(broker, uuid.uuid4().hex[:8]).start()
    yield plane
    plane.stop()


@pytest.fixture
def channel(control_plane: ControlPlaneProcess) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(control_plane.address) as ch:
        yield ch


@pytest.fixture
def control_plane_factory(broker: EmbeddedBroker) -> Iterator[Callable[..., ControlPlaneProcess]]:
    """Dedicated control planes for tests that restart or kill them; all stopped at the end.
    `factory(suffix=None, lead=True, security=None, **settings)`: the same suffix reuses the same
    internal topics and group (a replica of the same cluster); `lead=False` waits only until it
    serves; `security` is how the test's own calls reach it."""
    started: list[ControlPlaneProcess] = []

    def factory(
        suffix: str | None = None,
        *,
        lead: bool = True,
        security: TransportSecurity | None = None,
        **settings: str,
    ) -> ControlPlaneProcess:
        plane = ControlPlaneProcess(
            broker,
            suffix or uuid.uuid4().hex[:8],
            settings=dict(settings),
            security=security or TransportSecurity(),
        )
        plane.start(lead=lead)
        started.append(plane)
        return plane

    yield factory
    for plane in started:
        if plane.managed is not None and plane.managed.process.poll() is None:
            plane.stop()
