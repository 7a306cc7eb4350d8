"""`sluiceway server`: run one control-plane replica until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from sluiceway.common.logging_setup import configure_logging
from sluiceway.common.process_exit import exit_now, lingering_threads
from sluiceway_server.config import WorkerConfig, WorkerConfigError

# How long threads still running after the shutdown get to finish before the process leaves them.
_THREAD_GRACE_S = 2.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sluiceway server", description="Run a Sluiceway control-plane replica."
    )
    parser.add_argument("--config", type=Path, help="worker properties file")
    parser.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (bootstrap.servers)")
    parser.add_argument(
        "--listeners",
        help="gRPC listen address host:port (listeners), default 127.0.0.1:8083 (this host only)",
    )
    parser.add_argument(
        "--advertised-address",
        "--advertised-listeners",
        dest="advertised_listeners",
        help="host:port other replicas, executors and clients reach this replica on "
        "(advertised.listeners; default: this host's name and the bound port)",
    )
    parser.add_argument("--group-id", help="control-plane cluster id (group.id)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="any worker setting; repeatable"
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    return parser.parse_args(argv)


def load_config(args: argparse.Namespace) -> WorkerConfig:
    overrides: dict[str, str] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise WorkerConfigError(item, "--set takes KEY=VALUE")
        overrides[key.strip()] = value.strip()
    for key, value in (
        ("bootstrap.servers", args.bootstrap_servers),
        ("listeners", args.listeners),
        ("advertised.listeners", args.advertised_listeners),
        ("group.id", args.group_id),
    ):
        if value is not None:
            overrides[key] = value
    return WorkerConfig.load(args.config, overrides)


async def serve(config: WorkerConfig) -> None:
    from sluiceway_server.server import start_control_plane

    plane = await start_control_plane(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"sluiceway control plane listening on {config.listen_address()} ({plane.advertised_address})",
        flush=True,
    )
    await stop.wait()
    await plane.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    configure_logging(args.log_level, args.log_format)
    try:
        config = load_config(args)
    except WorkerConfigError as exc:
        print(f"error: invalid worker configuration: {exc}", file=sys.stderr)
        return 2
    code = 0
    try:
        asyncio.run(serve(config))
    except RuntimeError as exc:
        logging.getLogger("sluiceway_server").error("%s", exc)
        code = 1
    # A plugin callback abandoned past plugin.callback.timeout.ms still runs in a pool thread, which
    # Python would join at exit: the replica has stopped, so it leaves without it.
    stuck = lingering_threads(grace=_THREAD_GRACE_S)
    if stuck:
        logging.getLogger("sluiceway_server").warning(
            "leaving %d thread(s) that did not finish (%s)", len(stuck), ", ".join(t.name for t in stuck)
        )
        exit_now(code)
    return code
