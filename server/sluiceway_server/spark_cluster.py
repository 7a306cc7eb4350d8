"""Spark's own standalone cluster on this machine, for `sluiceway dev --spark-master cluster` and the
test bed: a master and its workers, each a JVM started with the `spark-class` launcher of the pinned
pyspark (nothing else is downloaded), all on loopback. A Spark Connect server started with the
cluster's `master_url` runs its jobs in executors the workers launch, each a JVM of its own, so a
pipeline's Spark tasks run in processes other than the Spark Connect server, as on a real cluster.

The master keeps its state in a recovery directory (`spark.deploy.recoveryMode=FILESYSTEM`): one
started again on the same port and directory after a crash takes back the workers and the running
applications. Without it (as Spark's master is written; not tried here) a new master knows no
application, tells every returning worker to kill the executors it runs, and the Spark Connect
server is left with no executor it could ever get back."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sluiceway_server.embedded import (
    ManagedProcess,
    free_port,
    spark_home,
    spark_process_env,
    spawn,
    wait_for_port,
    with_java_options,
)
from sluiceway_server.log_files import LogRotation

__all__ = ["EmbeddedSparkCluster", "start_spark_cluster"]

# Heap of the master and worker daemons: they only keep book, the executors do the work.
_DAEMON_MEMORY: Final = "512m"
# Memory a worker offers; an executor asks for spark.executor.memory (1g) of it.
_WORKER_MEMORY: Final = "2g"
_START_TIMEOUT_S: Final = 120.0


@dataclass
class EmbeddedSparkCluster:
    """A standalone master and its workers. ``master_url`` is what a Spark Connect server is started
    with; `kill_master` and `restart_master`, and a kill of one of ``workers``, are the faults the
    tests inflict."""

    master_port: int
    master_ui_port: int
    work_dir: Path
    log_dir: Path
    worker_cores: int
    master: ManagedProcess | None = None
    workers: list[ManagedProcess] = field(default_factory=list)
    rotation: LogRotation | None = None
    # How many master processes were started (names each one's log).
    _masters_started: int = 0

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui_port}"

    def connect_conf(self) -> dict[str, str]:
        """What a Spark Connect server submitting to this cluster is started with, on top of what
        every one gets: the settings deploy/README.md's "What a remote Spark cluster needs" names.
        The Python of the executors' workers is this interpreter, the one the project is installed
        in; the JDBC driver jars travel with --jars (`start_spark_connect`)."""
        return {
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            # One executor per worker, each with the worker's cores.
            "spark.executor.cores": str(self.worker_cores),
            "spark.executor.memory": "1g",
        }

    def _env(self) -> dict[str, str]:
        env = spark_process_env(
            SPARK_HOME=str(spark_home()),
            # Loopback only: a worker would otherwise register with the machine's other address.
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=_DAEMON_MEMORY,
            SPARK_LOG_DIR=str(self.work_dir / "logs"),
            # Executors start Python workers with this interpreter unless the application says
            # otherwise: the one this project is installed in.
            PYSPARK_PYTHON=sys.executable,
        )
        # The master's and workers' JVM options (spark-class reads this variable for Spark's
        # daemons), after any the environment already gives them.
        return with_java_options(env, "SPARK_DAEMON_JAVA_OPTS")

    def _properties(self) -> Path:
        """The Spark properties the master and the workers start with (written on first use)."""
        properties = self.work_dir / "cluster.properties"
        if properties.exists():
            return properties
        recovery = self.work_dir / "recovery"
        recovery.mkdir(parents=True, exist_ok=True)
        properties.write_text(
            "spark.deploy.recoveryMode=FILESYSTEM\n"
            f"spark.deploy.recoveryDirectory={recovery}\n"
            # A recovering master waits this long for workers and applications to answer before it
            # drops the silent ones; they answer in about a second here.
            "spark.deploy.recoveryTimeout=30s\n"
            # A worker silent this long is dead to the master (60 s by default), which drops it and
            # does not wait for it when recovering. Workers beat four times per period, so they
            # must have the same value.
            "spark.worker.timeout=10\n"
        )
        return properties

    def start_master(self, timeout: float = _START_TIMEOUT_S) -> None:
        """Starts the master on ``master_port`` with the cluster's recovery directory; returns once
        it says it is ALIVE (a restarted one: once it has finished recovering)."""
        properties = self._properties()
        argv = [
            str(spark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.master_ui_port),
            "--properties-file",
            str(properties),
        ]
        self._masters_started += 1
        name = "spark-master" if self._masters_started == 1 else f"spark-master-{self._masters_started}"
        self.master = spawn(name, argv, self.log_dir, env=self._env(), rotation=self.rotation)
        wait_for_port("127.0.0.1", self.master_port, timeout, self.master.process)
        self._wait_state(lambda state: state.get("status") == "ALIVE", timeout, "the master to be ALIVE")

    def start_worker(self, timeout: float = _START_TIMEOUT_S) -> ManagedProcess:
        """Starts one more worker and returns once the master lists it ALIVE."""
        number = len(self.workers) + 1
        work = self.work_dir / f"worker-{number}"
        work.mkdir(parents=True, exist_ok=True)
        argv = [
            str(spark_home() / "bin" / "spark-class"),
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.worker_cores),
            "--memory",
            _WORKER_MEMORY,
            "--work-dir",
            str(work),
            "--properties-file",
            str(self._properties()),
            "--webui-port",
            str(free_port()),
        ]
        port = free_port()
        argv += ["--port", str(port)]
        worker = spawn(f"spark-worker-{number}", argv, self.log_dir, env=self._env(), rotation=self.rotation)
        self.workers.append(worker)

        def registered(state: dict[str, object]) -> bool:
            return any(w.get("port") == port for w in _listed(state, "workers", "ALIVE"))

        self._wait_state(registered, timeout, f"worker {number} to register", worker)
        return worker

    def alive_workers(self) -> int:
        """How many workers the master lists ALIVE (0 while it does not answer)."""
        return len(_listed(self.state(), "workers", "ALIVE"))

    def running_applications(self) -> list[str]:
        """The names of the applications (Spark Connect servers) the master lists RUNNING."""
        return [str(app.get("name")) for app in _listed(self.state(), "activeapps", "RUNNING")]

    def state(self) -> dict[str, object]:
        """The master's own account of the cluster (its web UI's JSON), {} while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.master_ui_url}/json/", timeout=2) as reply:
                answer = json.loads(reply.read())
        except (OSError, ValueError):
            return {}
        return answer if isinstance(answer, dict) else {}

    def _wait_state(
        self,
        probe: Callable[[dict[str, object]], bool],
        timeout: float,
        what: str,
        process: ManagedProcess | None = None,
    ) -> None:
        watched = process or self.master
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if watched is not None and watched.process.poll() is not None:
                raise RuntimeError(f"{watched.name} exited while waiting for {what}:\n{watched.tail()}")
            if probe(self.state()):
                return
            time.sleep(0.25)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")

    def tasks_run(self) -> dict[str, int]:
        """Spark tasks each running worker's executors have started so far, by worker (``worker-1``,
        …), from the executors' own logs in the worker's work directory."""
        counts: dict[str, int] = {}
        for number, worker in enumerate(self.workers, start=1):
            if worker.process.poll() is not None:
                continue
            name = f"worker-{number}"
            counts[name] = sum(
                log.read_text(errors="replace").count("Running task ")
                for log in (self.work_dir / name).glob("app-*/*/stderr")
            )
        return counts

    def kill_master(self) -> None:
        """SIGKILL the master, as a crash of its host would."""
        assert self.master is not None
        self.master.kill()

    def restart_master(self, timeout: float = _START_TIMEOUT_S) -> None:
        """A master started again on the same port and recovery directory after `kill_master` (or a
        crash); returns once it is ALIVE, i.e. has finished taking back workers and applications."""
        self.start_master(timeout)

    def stop(self) -> None:
        for worker in reversed(self.workers):
            worker.stop(timeout=30)
        if self.master is not None:
            self.master.stop(timeout=30)
        shutil.rmtree(self.work_dir, ignore_errors=True)


def _listed(state: dict[str, object], key: str, status: str) -> list[dict[str, object]]:
    """The entries of the master's JSON ``state`` under ``key`` (``workers``, ``activeapps``) whose
    ``state`` is ``status`` (ALIVE, RUNNING, …)."""
    entries = state.get(key, [])
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and e.get("state") == status]


def start_spark_cluster(
    log_dir: Path,
    workers: int = 2,
    worker_cores: int = 1,
    master_port: int | None = None,
    rotation: LogRotation | None = None,
) -> EmbeddedSparkCluster:
    """A master on ``master_port`` (else a free port) and ``workers`` workers of ``worker_cores``
    cores each, every one registered before this returns."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError("Spark needs Java 17: run `make install` (it installs it with apt)")
    cluster = EmbeddedSparkCluster(
        master_port=master_port or free_port(),
        master_ui_port=free_port(),
        work_dir=Path(tempfile.mkdtemp(prefix="sluiceway-spark-cluster-")),
        log_dir=log_dir,
        worker_cores=worker_cores,
        rotation=rotation,
    )
    try:
        cluster.start_master()
        for _ in range(workers):
            cluster.start_worker()
    except BaseException:
        cluster.stop()
        raise
    return cluster
