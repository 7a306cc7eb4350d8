"""`sluiceway executor`: attach to the control plane and run tasks on Spark Connect until
SIGTERM/SIGINT.

On the first signal every task stops between batches (a batch in flight finishes and commits its
offsets), the executor says Goodbye to the leader, the stream closes and the process exits 0; a
second signal exits at once.

The attach stream uses TLS, mutual TLS and a bearer token from --tls, --tls-ca, --tls-cert,
--tls-key, --token and --token-file, or their SLUICEWAY_* variables. --config names the executor's
own worker properties (Kafka credentials and the like), laid over the worker config the leader
sends, which leaves its secrets out.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from types import FrameType

import sluiceway
from sluiceway.common.logging_setup import configure_logging
from sluiceway.common.metrics_endpoint import MetricsEndpoint, MetricsListenerError, parse_metrics_listener
from sluiceway.common.process_exit import exit_now
from sluiceway.common.targets import parse_targets
from sluiceway.common.tracing import TracingEndpointError, otlp_endpoint, start_tracing, stop_tracing
from sluiceway.common.transport import TransportSecurity, add_arguments
from sluiceway.connect import ConnectException
from sluiceway_executor.attach import AttachSettings, ExecutorAgent, default_executor_id
from sluiceway_executor.own_config import load_own_config
from sluiceway_executor.pipelines.observed import counts_enabled
from sluiceway_executor.spark_sessions import SparkSessions
from sluiceway_executor.spark_warm_up import SparkWarmUp
from sluiceway_executor.task_metrics import ExecutorMetrics

__all__ = ["main", "parse_args"]

log = logging.getLogger("sluiceway_executor")

_SPARK_WAIT_WARNING_S = 30.0
_SPARK_CLOSE_TIMEOUT_S = 5.0
_EVERY_INTERFACE = frozenset({"", "0.0.0.0", "::"})


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sluiceway executor",
        description="Run a Sluiceway executor: attach to the control plane and run the tasks it "
        "assigns as Spark micro-batch jobs through Spark Connect.",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("SLUICEWAY_SERVER", "localhost:8083"),
        help="control-plane address host:port, or the replicas' addresses comma-separated (IPv4, "
        "[IPv6]:port or host names; the executor finds the leader from any of them), as the CLI's "
        "--server; default $SLUICEWAY_SERVER or localhost:8083",
    )
    parser.add_argument(
        "--spark-remote",
        default=os.environ.get("SLUICEWAY_SPARK_REMOTE", "sc://localhost:15002"),
        help="Spark Connect URL (default $SLUICEWAY_SPARK_REMOTE or sc://localhost:15002)",
    )
    parser.add_argument("--id", help="executor id (default: {hostname}-{random})")
    parser.add_argument(
        "--max-tasks", type=int, default=0, help="most tasks to run at once; 0 means no limit (default)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="this executor's worker properties (e.g. producer.sasl.password), laid over the worker "
        "config the control plane sends; SLUICEWAY_* variables naming worker keys win over the file",
    )
    add_arguments(parser.add_argument_group("connection to the control plane"))
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        args.security = TransportSecurity.from_arguments(args)
        args.worker_config = load_own_config(args.config)
    except ValueError as exc:  # OwnConfigError too
        parser.error(str(exc))
    try:
        parse_targets(args.server)
    except ValueError as exc:
        parser.error(f"--server: {exc}")
    if args.max_tasks < 0:
        parser.error("--max-tasks must not be negative")
    try:
        # Its own key only: the control plane's metrics.listeners (in Welcome) is the control plane's.
        args.metrics_listener = parse_metrics_listener(args.worker_config.get("metrics.listeners", ""))
    except MetricsListenerError as exc:
        parser.error(f"metrics.listeners: {exc}")
    try:
        # Checked here so that a bad value stops the executor at start, not each of its tasks later.
        counts_enabled(args.worker_config)
    except ConnectException as exc:
        parser.error(str(exc))
    try:
        # Its own key (or OpenTelemetry's variables), read before anything runs that could be traced.
        args.tracing_endpoint = otlp_endpoint(args.worker_config.get("tracing.otlp.endpoint", ""), os.environ)
    except TracingEndpointError as exc:
        parser.error(f"tracing.otlp.endpoint: {exc}")
    if not args.spark_remote.startswith("sc://"):
        parser.error(
            f"--spark-remote must be a Spark Connect URL (sc://host:port), got {args.spark_remote!r}"
        )
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    stop = threading.Event()
    signals = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(1)
        log.info("%s: stopping tasks between batches", signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    executor_id = args.id or default_executor_id()
    metrics = ExecutorMetrics(executor_id, sluiceway.__version__)
    endpoint = _serve_metrics(args.metrics_listener, metrics)
    if args.tracing_endpoint:
        start_tracing(
            args.tracing_endpoint,
            service="sluiceway-executor",
            instance=executor_id,
            version=sluiceway.__version__,
        )
    started = time.monotonic()
    # On its own thread: a call to a Spark Connect server that is not up yet may take a while to
    # give up, and a signal must still end the process meanwhile.
    sessions = SparkSessions(args.spark_remote, stop)
    # Each new session runs a source's and a sink's job on no records before a pipeline needs it.
    warm_up = SparkWarmUp(sessions, stop)
    sessions.on_new_session(warm_up.session_built)
    connecting = threading.Thread(target=sessions.start, name="spark", daemon=True)
    connecting.start()
    warned_at = started
    while not stop.wait(0.2) and connecting.is_alive():
        if time.monotonic() - warned_at > _SPARK_WAIT_WARNING_S:
            warned_at = time.monotonic()
            log.warning("still waiting for Spark Connect at %s", args.spark_remote)
    if sessions.generation == 0 or stop.is_set():
        # The client's exit hook would retry the unreachable server for minutes: leave now.
        exit_now(0)

    from sluiceway.connect import PluginRegistry
    from sluiceway_executor.connectors import BUILT_IN_CONNECTORS
    from sluiceway_executor.offset_commits import KafkaCommitterFactory
    from sluiceway_executor.pipelines.factory import SparkPipelineFactory

    settings = AttachSettings(
        server=args.server,
        spark_remote=args.spark_remote,
        executor_id=executor_id,
        max_tasks=args.max_tasks,
        security=args.security,
        worker_config=args.worker_config,
        metrics_url="" if endpoint is None else endpoint.url,
    )
    # One plugin registry: pipelines and offset committers find a task's connector plugin alike.
    registry = PluginRegistry.discover(built_in=BUILT_IN_CONNECTORS)
    agent = ExecutorAgent(
        settings,
        SparkPipelineFactory(sessions, registry),
        committer_factory=KafkaCommitterFactory(registry),
        sessions=sessions,
        metrics=metrics,
        on_worker_config=warm_up.configure,
    )
    attach = threading.Thread(target=agent.run, name="attach", daemon=True)
    attach.start()
    transport = "mutual TLS" if args.security.mutual_tls else "TLS" if args.security.uses_tls else "plaintext"
    served = "" if endpoint is None else f"; metrics at {endpoint.url}"
    print(
        f"sluiceway executor {settings.executor_id} attaching to {settings.server} ({transport}){served}",
        flush=True,
    )
    code = 0
    while not stop.wait(0.5):
        if not attach.is_alive():
            log.error("the attach loop ended unexpectedly")
            code = 1
            break
    agent.shutdown()
    attach.join(timeout=30)
    closed = threading.Thread(target=sessions.close, name="spark-close", daemon=True)
    closed.start()
    closed.join(_SPARK_CLOSE_TIMEOUT_S)
    if endpoint is not None:
        endpoint.stop()
    stop_tracing()  # the last batches' spans
    log.info("executor %s stopped", settings.executor_id)
    if closed.is_alive():
        # Spark Connect is unreachable and its client would retry on exit: do not hang on it.
        exit_now(code)
    return code


def _serve_metrics(listener: tuple[str, int] | None, metrics: ExecutorMetrics) -> MetricsEndpoint | None:
    """Starts `/metrics` on ``listener`` (None: metrics are not served). A listener on every
    interface is reported under the host's name, the address others reach it at."""
    if listener is None:
        return None
    host, port = listener
    endpoint = MetricsEndpoint.start(host, port, metrics.registry)
    if host in _EVERY_INTERFACE:
        endpoint.host = socket.gethostname()
    log.info("serving metrics at %s", endpoint.url)
    return endpoint


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
