"""Control-plane scale: one control plane on the embedded broker holding N connectors (default 1,000).

- create: N DataGenSource connectors (tasks.max=1, RUNNING; no executor attached, so their tasks
  stay UNASSIGNED), one after another from one client: the latency of each create;
- list: `ListConnectors` with the STATUS view, every page (page_size 1000), repeated `--lists`
  times, against the round trip of `GetServerInfo` measured the same way (the baseline: what any
  call costs);
- cold start: the control plane stopped, a new one started on the same internal topics, and the
  time from its spawn until `ListConnectors` (STATUS) answers with all N connectors (polled from
  the spawn on, every 50 ms by a new client), and until its health check says SERVING (it knows
  a leader), repeated `--restarts` times, against reading the config topic to its end with a raw
  confluent-kafka consumer in this script (the baseline: what reading the configs alone costs).

    .venv/bin/python bench/bench_scale.py --connectors 1000 --lists 20 --restarts 3 [--report FILE]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import grpc
from confluent_kafka import Consumer, KafkaError, TopicPartition

from bench_cluster import Replica, percentile, start_replica
from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import free_port, start_broker, wait_serving

TARGET_LIST_MS = 200.0
TARGET_COLD_START_S = 5.0


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
            except grpc.RpcError:
                pass
        time.sleep(0.05)
    wait_serving(replica.address, 120, replica.process)
    return listed, time.monotonic() - started


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--lists", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()

    logs = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    broker = start_broker(logs)
    suffix = uuid.uuid4().hex[:8]
    replica = Replica(free_port())
    try:
        start_replica(replica, broker.bootstrap_servers, suffix, logs)
        creates: list[float] = []
        with SluicewayClient(replica.address, timeout=60) as client:
            for n in range(args.connectors):
                config = {"connector.class": "DataGenSource", "topic": f"scale-{n}", "tasks.max": "1"}
                started = time.perf_counter()
                client.create_connector(f"c{n:05d}", config)
                creates.append((time.perf_counter() - started) * 1000)
            assert list_all(client) == args.connectors
            lists: list[float] = []
            infos: list[float] = []
            for _ in range(args.lists):
                took, counted = timed_ms(lambda: list_all(client))
                assert counted == args.connectors, counted
                lists.append(took)
                infos.append(timed_ms(client.server_info)[0])
        colds: list[float] = []
        servings: list[float] = []
        reads: list[float] = []
        for _ in range(args.restarts):
            listed, serving = cold_start_s(replica, broker.bootstrap_servers, suffix, logs, args.connectors)
            colds.append(listed)
            servings.append(serving)
            started = time.monotonic()
            records = read_config_topic(broker.bootstrap_servers, f"configs-{suffix}")
            reads.append(time.monotonic() - started)
            assert records >= args.connectors, records
    finally:
        if replica.process is not None:
            replica.process.stop(timeout=30)
        broker.stop()

    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lo, mid, hi = spread(lists)
    cold_lo, cold_mid, cold_hi = spread(colds)
    report = [
        "## Control-plane scale",
        "",
        f"Run: {when}, {platform.machine()}, Python {platform.python_version()}; one control plane on "
        f"the embedded broker (Tansu), {args.connectors} DataGenSource connectors (tasks.max=1, RUNNING, "
        "no executor: tasks UNASSIGNED).",
        "",
        "```sh",
        f".venv/bin/python bench/bench_scale.py --connectors {args.connectors} --lists {args.lists} "
        f"--restarts {args.restarts}",
        "```",
        "",
        "| measure | min | median | max | p99 | target |",
        "|---|---|---|---|---|---|",
        f"| create, one connector (ms) | {min(creates):.1f} | {statistics.median(creates):.1f} | "
        f"{max(creates):.1f} | {percentile(creates, 0.99):.1f} | — |",
        f"| ListConnectors, STATUS view, all {args.connectors} (ms) | {lo:.1f} | {mid:.1f} | {hi:.1f} | "
        f"{percentile(lists, 0.99):.1f} | < {TARGET_LIST_MS:.0f} |",
        f"| GetServerInfo round trip (ms, baseline) | {min(infos):.1f} | {statistics.median(infos):.1f} | "
        f"{max(infos):.1f} | {percentile(infos, 0.99):.1f} | — |",
        f"| cold start until the list answers (s) | {cold_lo:.2f} | {cold_mid:.2f} | {cold_hi:.2f} | — | "
        f"< {TARGET_COLD_START_S:.0f} |",
        f"| cold start until SERVING: a leader known, mutations taken (s) | {min(servings):.2f} | "
        f"{statistics.median(servings):.2f} | {max(servings):.2f} | — | — |",
        f"| raw read of the config topic (s, baseline) | {min(reads):.2f} | {statistics.median(reads):.2f} | "
        f"{max(reads):.2f} | — | — |",
        "",
        f"ListConnectors / GetServerInfo (median): {mid / statistics.median(infos):.1f} times; cold start / "
        f"raw config read (median): {cold_mid / statistics.median(reads):.1f} times.",
        "",
    ]
    text = "\n".join(report)
    print(text)
    if args.report is not None:
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
