"""The whole product on this machine for a benchmark: the embedded Tansu broker, a Spark Connect
server (`local[2]`), one control plane (replication factor 1) and one executor, each its own
process, with a client, an admin client and a Spark session of the benchmark's own. The executor
logs at DEBUG, so its log holds each batch's steps (see bench_steps.py). A benchmark of the data
source alone starts the broker and Spark Connect only (`running_services`)."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
    ManagedProcess,
    control_plane_argv,
    executor_argv,
    free_port,
    spawn,
    start_broker,
    start_spark_connect,
    wait_serving,
)


@dataclass
class Services:
    """The broker and the Spark Connect server, and the work directory whose `logs` holds the log
    of every process started for the benchmark."""

    work: Path
    broker: EmbeddedBroker
    spark_server: EmbeddedSparkConnect

    @property
    def logs(self) -> Path:
        return self.work / "logs"


@dataclass
class Stack:
    work: Path
    bootstrap: str
    executor: ManagedProcess
    spark_server_pid: int
    client: SluicewayClient
    admin: AdminClient
    spark: SparkSession
    # The control plane's and Spark Connect's addresses, for an executor started again.
    server: str = ""
    spark_remote: str = ""

    @property
    def executor_log(self) -> Path:
        return self.work / "logs" / "executor.log"

    def restart_executor(self, env: Mapping[str, str]) -> None:
        """Stops the executor and starts another one in its place, with ``env`` added to this
        process's environment (its own worker settings as SLUICEWAY_* variables); returns once the
        new one is the only executor attached. Its log goes on in the same file."""
        self.executor.stop(timeout=60)
        executor_id = f"bench-{uuid.uuid4().hex[:8]}"
        argv = executor_argv(self.server, self.spark_remote, "--id", executor_id, "--log-level", "DEBUG")
        self.executor = spawn("executor", argv, self.work / "logs", env={**os.environ, **env})

        def attached() -> bool:
            return [e.id for e in self.client.server_info().executors] == [executor_id]

        wait(attached, 120, f"executor {executor_id} to attach")


def wait(probe: Callable[[], bool], timeout: float, what: str, poll: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(poll)
    raise TimeoutError(f"timed out waiting for {what}")


@contextmanager
def running_services(prefix: str) -> Iterator[Services]:
    """Starts the broker and Spark Connect in a new work directory named after ``prefix``, and
    stops both on the way out."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    services = Services(work, start_broker(work / "logs"), start_spark_connect(work / "logs"))
    try:
        yield services
    finally:
        services.spark_server.stop()
        services.broker.stop()


@contextmanager
def running_stack(
    prefix: str, plane_settings: Mapping[str, str] | None = None, executor_flags: Sequence[str] = ()
) -> Iterator[Stack]:
    """Starts everything, waits for the executor to attach, and stops it all on the way out.
    ``plane_settings`` go into the control plane's worker config, ``executor_flags`` onto the
    executor's command line (deploy/grafana/preview.py serves metrics from both)."""
    with running_services(prefix) as services:
        bootstrap, remote = services.broker.bootstrap_servers, services.spark_server.remote
        logs = services.logs
        address = f"127.0.0.1:{free_port()}"
        settings = {f"{k}.storage.replication.factor": "1" for k in ("config", "offset", "status")}
        settings.update(plane_settings or {})
        children: list[ManagedProcess] = []
        try:
            plane = spawn("control-plane", control_plane_argv(bootstrap, address, "bench", settings), logs)
            children.append(plane)
            wait_serving(address, 60, plane)
            flags = ("--log-level", "DEBUG", *executor_flags)
            executor = spawn("executor", executor_argv(address, remote, *flags), logs)
            children.append(executor)
            client = SluicewayClient(address, timeout=60)
            wait(lambda: len(client.server_info().executors) == 1, 60, "the executor to attach")
            spark = SparkSession.builder.remote(remote).getOrCreate()
            stack = Stack(
                services.work,
                bootstrap,
                executor,
                services.spark_server.managed.process.pid,
                client,
                AdminClient({"bootstrap.servers": bootstrap}),
                spark,
                address,
                remote,
            )
            try:
                yield stack
            finally:
                # The one running now: restart_executor may have replaced the first.
                stack.executor.stop()
                spark.stop()
                client.close()
        finally:
            for child in reversed(children):
                child.stop()
