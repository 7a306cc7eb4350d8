"""Control-plane scale: one control plane on the embedded broker filled with N connectors (default
1,000), measured at each checkpoint on the way (`--checkpoints 1000,2500,5000`):

- create: DataGenSource connectors (tasks.max=1, RUNNING; no executor attached, so their tasks
  stay UNASSIGNED) from `--clients` clients side by side (threads, a client each): creates/s and
  the latency of each create;
- list: the first page of 1,000 of `ListConnectors` with the STATUS view, and the whole list
  (page_size 1000), `--lists` times each, against the round trip of `GetServerInfo` (the baseline:
  what any call costs);
- where the creates' time went: the CPU seconds the control plane and the broker each used while
  the clients created (from /proc), per create;
- memory: the control plane's resident set (and its peak) after the lists;
- cold start: the control plane stopped, a new one started on the same internal topics, and the
  time from its spawn until `ListConnectors` (STATUS) answers with all of them (polled from the
  spawn on, every 50 ms by a new client), and until its health check says SERVING (it knows a
  leader), `--restarts` times, against reading the config topic to its end with a raw
  confluent-kafka consumer in this script (the baseline: what reading the configs alone costs).

    .venv/bin/python bench/bench_scale.py --connectors 10000 --checkpoints 1000,2500,5000 \
        [--clients 8] [--lists 20] [--restarts 3] [--report FILE] [--plot FILE.png]
"""

from __future__ import annotations

import argparse
import itertools
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import grpc
from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench_cluster import Replica, side_by_side, start_replica
from process_usage import cpu_since, cpu_snapshot
from sluiceway.client import SluicewayClient
from sluiceway.errors import SluicewayError
from sluiceway_server.embedded import free_port, start_broker, wait_serving

TARGET_PAGE_MS = 100.0
TARGET_COLD_START_S = 3.0


def timed_ms(call: Callable[[], object]) -> tuple[float, object]:
    """Milliseconds ``call`` took, and what it returned."""
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000, result


def list_all(client: SluicewayClient) -> int:
    return sum(1 for _ in client.list_connectors(view="STATUS", page_size=1000))


def read_config_topic(bootstrap: str, topic: str) -> int:
    """Records in the config topic, read to its end by a raw consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        count = 0
        while True:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is None:
                    count += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    return count
    finally:
        consumer.close()


def cold_start_s(
    replica: Replica, bootstrap: str, suffix: str, logs: Path, expected: int
) -> tuple[float, float]:
    """Seconds from spawning a control plane until it lists `expected` connectors with status, and
    until its health check says SERVING (a leader is known, so mutations are taken)."""
    assert replica.process is not None
    replica.process.stop(timeout=30)
    started = time.monotonic()
    start_replica(replica, bootstrap, suffix, logs, wait=False)
    assert replica.process is not None
    while True:
        # A new client for every poll: one whose connection was refused waits out gRPC's reconnect
        # backoff (1 s, then 1.6 times longer each time), which would be timed as the server's.
        with SluicewayClient(replica.address, timeout=10) as client:
            try:
                if list_all(client) == expected:
                    listed = time.monotonic() - started
                    break
            except (grpc.RpcError, SluicewayError):
                pass
        time.sleep(0.05)
    wait_serving(replica.address, 120, replica.process)
    return listed, time.monotonic() - started


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def first_page_ms(client: SluicewayClient, size: int) -> float:
    """Milliseconds until the first ``size`` connectors with status are in hand: one page."""
    started = time.perf_counter()
    listed = list(itertools.islice(client.list_connectors(view="STATUS", page_size=size), size))
    assert len(listed) == size, len(listed)
    return (time.perf_counter() - started) * 1000


def rss_mib(pid: int) -> tuple[float, float]:
    """The process's resident memory now and at its peak (VmRSS, VmHWM), in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return tuple(int(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM"))  # type: ignore[return-value]


def create_many(address: str, first: int, count: int, clients: int) -> list[float]:
    """Creates connectors ``first`` to ``first + count - 1`` from ``clients`` clients side by side
    (threads, a client each); the milliseconds of each create."""
    latencies: list[float] = []
    lock = threading.Lock()

    def work(offset: int) -> None:
        with SluicewayClient(address, timeout=60) as client:
            for n in range(first + offset, first + count, clients):
                config = {"connector.class": "DataGenSource", "topic": f"scale-{n}", "tasks.max": "1"}
                started = time.perf_counter()
                client.create_connector(f"c{n:05d}", config)
                took = (time.perf_counter() - started) * 1000
                with lock:
                    latencies.append(took)

    side_by_side(work, clients)
    assert len(latencies) == count, len(latencies)
    return latencies


@dataclass
class Checkpoint:
    """What was measured once the control plane held ``connectors``."""

    connectors: int
    creates_per_s: float
    create_ms: list[float]
    page_ms: list[float]
    list_ms: list[float]
    info_ms: list[float]
    rss_mib: float
    peak_mib: float
    # CPU milliseconds per create, of the control plane and of the broker, during the creates.
    plane_cpu_ms: float = 0.0
    broker_cpu_ms: float = 0.0
    cold_s: list[float] = field(default_factory=list)
    serving_s: list[float] = field(default_factory=list)
    raw_read_s: list[float] = field(default_factory=list)


def plot_scale(path: Path, points: list[Checkpoint]) -> None:
    """Four panels against the number of connectors: creates/s, a page and the whole list with
    status, cold start, memory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [p.connectors for p in points]
    figure, axes = plt.subplots(1, 4, figsize=(14, 3.4), dpi=110)
    panels = [
        ("creates/s, 8 clients (target 500)", [[p.creates_per_s] for p in points], 500.0),
        ("ListConnectors STATUS, first page of 1,000 (ms)", [p.page_ms for p in points], 100.0),
        ("cold start until it lists all (s)", [p.cold_s for p in points], 3.0),
        ("control plane RSS (MiB)", [[p.rss_mib] for p in points], None),
    ]
    for axis, (title, values, target) in zip(axes, panels, strict=True):
        axis.plot(xs, [statistics.median(v) for v in values], marker="o", color="#2f6db5")
        axis.fill_between(xs, [min(v) for v in values], [max(v) for v in values], color="#2f6db5", alpha=0.2)
        if target is not None:
            axis.axhline(target, color="#c0392b", linestyle="--", linewidth=1, label="target")
            axis.legend(loc="best")
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("connectors")
        axis.set_ylim(bottom=0)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument(
        "--checkpoints",
        default="",
        help="comma-separated counts to measure on the way (the last is --connectors)",
    )
    parser.add_argument("--clients", type=int, default=8, help="clients creating side by side")
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--report", type=Path)
    parser.add_argument("--plot", type=Path, help="write a PNG of the figures against the count here")
    args = parser.parse_args()
    marks = sorted({int(n) for n in args.checkpoints.split(",") if n.strip()} | {args.connectors})
    marks = [n for n in marks if n <= args.connectors]

    logs = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    broker = start_broker(logs)
    suffix = uuid.uuid4().hex[:8]
    replica = Replica(free_port())
    points: list[Checkpoint] = []
    try:
        start_replica(replica, broker.bootstrap_servers, suffix, logs)
        held = 0
        for mark in marks:
            assert replica.process is not None
            pids = {"plane": replica.process.process.pid, "broker": broker.managed.process.pid}
            cpu_before = cpu_snapshot(pids)
            started = time.perf_counter()
            creates = create_many(replica.address, held, mark - held, args.clients)
            rate = (mark - held) / (time.perf_counter() - started)
            cpu = cpu_since(cpu_before, pids)
            plane_cpu_ms = cpu["plane"] * 1000 / (mark - held)
            broker_cpu_ms = cpu["broker"] * 1000 / (mark - held)
            held = mark
            with SluicewayClient(replica.address, timeout=60) as client:
                assert list_all(client) == mark
                pages, lists, infos = [], [], []
                for _ in range(args.lists):
                    pages.append(first_page_ms(client, min(1000, mark)))
                    took, counted = timed_ms(lambda: list_all(client))
                    assert counted == mark, counted
                    lists.append(took)
                    infos.append(timed_ms(client.server_info)[0])
            assert replica.process is not None
            rss, peak = rss_mib(replica.process.process.pid)
            point = Checkpoint(
                mark, rate, creates, pages, lists, infos, rss, peak, plane_cpu_ms, broker_cpu_ms
            )
            for _ in range(args.restarts):
                listed, serving = cold_start_s(replica, broker.bootstrap_servers, suffix, logs, mark)
                point.cold_s.append(listed)
                point.serving_s.append(serving)
                began = time.monotonic()
                records = read_config_topic(broker.bootstrap_servers, f"configs-{suffix}")
                point.raw_read_s.append(time.monotonic() - began)
                assert records >= mark, records
            points.append(point)
            print(
                f"{mark} connectors: {rate:.1f} creates/s, page {statistics.median(pages):.1f} ms", flush=True
            )
    finally:
        if replica.process is not None:
            replica.process.stop(timeout=30)
        broker.stop()
    if args.plot is not None:
        plot_scale(args.plot, points)

    def cells(values: list[float], digits: int) -> str:
        lo, mid, hi = spread(values)
        return f"{lo:,.{digits}f} / {mid:,.{digits}f} / {hi:,.{digits}f}"

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [
        f"| {p.connectors:,} | {p.creates_per_s:,.1f} | {cells(p.create_ms, 1)} | "
        f"{p.plane_cpu_ms:.1f} / {p.broker_cpu_ms:.1f} | {cells(p.page_ms, 1)} | "
        f"{cells(p.list_ms, 1)} | {statistics.median(p.info_ms):.1f} | {cells(p.cold_s, 2)} | "
        f"{cells(p.serving_s, 2)} | {statistics.median(p.raw_read_s):.2f} | "
        f"{p.rss_mib:,.0f} ({p.peak_mib:,.0f}) |"
        for p in points
    ]
    first, last = points[0], points[-1]
    growth = last.connectors / first.connectors
    page_growth = statistics.median(last.page_ms) / statistics.median(first.page_ms)
    cold_growth = statistics.median(last.cold_s) / statistics.median(first.cold_s)
    report = [
        "## Control-plane scale",
        "",
        f"Run: {when}, {platform.machine()}, Python {platform.python_version()}; one control plane on "
        f"the embedded broker (Tansu), DataGenSource connectors (tasks.max=1, RUNNING, no executor: "
        f"tasks UNASSIGNED) created by {args.clients} clients side by side; {args.lists} lists and "
        f"{args.restarts} cold starts at each count.",
        "",
        "```sh",
        f".venv/bin/python bench/bench_scale.py --connectors {args.connectors} --checkpoints "
        f"{','.join(str(m) for m in marks)} --clients {args.clients} --lists {args.lists} "
        f"--restarts {args.restarts}",
        "```",
        "",
        "min / median / max; creates/s over the creates since the count before; a page is the first "
        "1,000 of ListConnectors with the STATUS view; cold start from the spawn of a new process on the "
        "same topics until it lists everything, and until its health check says SERVING; CPU per create: "
        "what the control plane and the broker (Tansu) each used while the clients created, divided by "
        "the creates.",
        "",
        "| connectors | creates/s | create (ms) | CPU per create, control plane / broker (ms) | "
        "a page (ms) | the whole list (ms) | GetServerInfo (ms, baseline) | cold start, lists all (s) | "
        "cold start, SERVING (s) | raw read of the config topic (s, baseline) | RSS MiB (peak) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Targets at 10,000: 500 creates/s, a page under {TARGET_PAGE_MS:.0f} ms, a cold start under "
        f"{TARGET_COLD_START_S:.0f} s. From {first.connectors:,} to {last.connectors:,} connectors "
        f"({growth:.0f} times as many): a page took {page_growth:.1f} times as long, the cold start "
        f"{cold_growth:.1f} times, "
        f"the memory {last.rss_mib / first.rss_mib:.1f} times; creates/s went from {first.creates_per_s:.1f} "
        f"to {last.creates_per_s:.1f}.",
        "",
    ]
    text = "\n".join(report)
    print(text)
    if args.report is not None:
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
