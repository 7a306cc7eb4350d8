"""Control-plane cluster benchmarks on a real three-replica cluster (embedded broker):

- latency: p50/p99 of a read (GetConnector) and of a mutation (PatchConnectorConfig of a STOPPED
  connector: validated, written to the config topic, read back) sent to the leader and to a
  follower, at 1, 8 and 32 concurrent clients; the follower's extra time is what forwarding costs;
- failover: the leader killed with SIGKILL, then the time until a mutation sent through a
  survivor (the client library retrying UNAVAILABLE) first succeeds; repeated `--kills` times,
  the killed replica restarted in between.

    .venv/bin/python bench/bench_cluster.py --requests 200 --kills 5 --report bench/CLUSTER.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import grpc

from sluiceway.api.v1 import cluster_pb2, cluster_pb2_grpc
from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import (
    ManagedProcess,
    control_plane_argv,
    free_port,
    spawn,
    start_broker,
    wait_serving,
)

SESSION_TIMEOUT_MS = 6000
CONCURRENCY = (1, 8, 32)


@dataclass
class Replica:
    port: int
    process: ManagedProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_replica(replica: Replica, bootstrap: str, suffix: str, logs: Path, *, wait: bool = True) -> None:
    """Spawns the replica; with ``wait``, returns once its health check says SERVING (a leader is
    known)."""
    settings = {
        "config.storage.topic": f"configs-{suffix}",
        "offset.storage.topic": f"offsets-{suffix}",
        "status.storage.topic": f"status-{suffix}",
        "cluster.storage.topic": f"cluster-{suffix}",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "cluster.storage.replication.factor": "1",
        "session.timeout.ms": str(SESSION_TIMEOUT_MS),
    }
    argv = control_plane_argv(bootstrap, replica.address, f"bench-{suffix}", settings)
    replica.process = spawn(f"replica-{replica.port}", argv, logs)
    if wait:
        wait_serving(replica.address, 120, replica.process)


def server_info(address: str) -> cluster_pb2.ServerInfo | None:
    try:
        with grpc.insecure_channel(address) as channel:
            info: cluster_pb2.ServerInfo = cluster_pb2_grpc.ClusterServiceStub(channel).GetServerInfo(
                cluster_pb2.GetServerInfoRequest(), timeout=3
            )
            return info
    except grpc.RpcError:
        return None


def agreed_leader(replicas: list[Replica], min_epoch: int = 0, timeout: float = 120) -> tuple[str, int]:
    deadline = time.monotonic() + timeout
    addresses = {r.address for r in replicas}
    while time.monotonic() < deadline:
        infos = [server_info(r.address) for r in replicas]
        leaders = {(i.leader.id, i.leader.leader_epoch) for i in infos if i is not None}
        if len(leaders) == 1 and None not in infos:
            leader, epoch = leaders.pop()
            if leader in addresses and epoch >= min_epoch:
                return leader, epoch
        time.sleep(0.2)
    raise TimeoutError("the replicas did not agree on a leader")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(
    address: str, clients: int, requests: int, call: Callable[[SluicewayClient, int, int], None]
) -> list[float]:
    """`requests` calls per client from `clients` threads, each with a client of its own; the
    latency of every call in milliseconds."""
    latencies: list[float] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def run(worker: int) -> None:
        mine: list[float] = []
        with SluicewayClient(address, timeout=60) as client:
            call(client, worker, -1)  # warm the channel
            barrier.wait()
            for n in range(requests):
                started = time.perf_counter()
                call(client, worker, n)
                mine.append((time.perf_counter() - started) * 1000)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(latencies) == clients * requests, (len(latencies), clients * requests)
    return latencies


def latency_table(replicas: list[Replica], requests: int, prefix: str) -> list[str]:
    leader_address, _ = agreed_leader(replicas)
    follower_address = next(r.address for r in replicas if r.address != leader_address)
    with SluicewayClient(leader_address, timeout=60) as admin:
        for worker in range(max(CONCURRENCY)):
            admin.create_connector(
                f"{prefix}-{worker}",
                {"connector.class": "DataGenSource", "topic": f"{prefix}-{worker}", "tasks.max": "1"},
                initial_state="STOPPED",
            )

    def read(client: SluicewayClient, worker: int, n: int) -> None:
        client.get_connector(f"{prefix}-{worker}")

    def mutate(client: SluicewayClient, worker: int, n: int) -> None:
        client.patch_connector_config(f"{prefix}-{worker}", {"max.records": str(1000 + n + 1)})

    rows = [
        "| call | clients | leader p50 | leader p99 | follower p50 | follower p99 | forwarding adds (p50) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, call in (("read (GetConnector)", read), ("mutation (PatchConnectorConfig)", mutate)):
        for clients in CONCURRENCY:
            per_client = max(requests // clients, 5)
            leader = measure(leader_address, clients, per_client, call)
            follower = measure(follower_address, clients, per_client, call)
            lp50, fp50 = statistics.median(leader), statistics.median(follower)
            rows.append(
                f"| {name} | {clients} | {lp50:.1f} ms | {percentile(leader, 0.99):.1f} ms | "
                f"{fp50:.1f} ms | {percentile(follower, 0.99):.1f} ms | {fp50 - lp50:+.1f} ms |"
            )
            print(rows[-1], flush=True)
    return rows


def _logged_at(replica: Replica, text: str, after: float) -> float | None:
    """Wall-clock time of the first line of the replica's log holding `text` written after `after`."""
    assert replica.process is not None
    for line in replica.process.log_path.read_text().splitlines():
        if text not in line:
            continue
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if stamp >= after:
            return stamp
    return None


@dataclass
class Failover:
    total: float  # kill → first successful mutation through a survivor
    assigned: float | None  # kill → the new leader's replica got the group's partition
    leading: float | None  # kill → it finished taking the lead (announced, term begun)


def failover(replicas: list[Replica], kills: int, bootstrap: str, suffix: str, logs: Path) -> list[Failover]:
    times: list[Failover] = []
    for kill in range(kills):
        leader_address, epoch = agreed_leader(replicas)
        leader = next(r for r in replicas if r.address == leader_address)
        survivor = next(r for r in replicas if r is not leader)
        assert leader.process is not None
        leader.process.kill()
        killed, killed_wall = time.monotonic(), time.time()
        with SluicewayClient(survivor.address, timeout=120) as client:
            client.create_connector(
                f"failover-{kill}-{uuid.uuid4().hex[:6]}",
                {"connector.class": "DataGenSource", "topic": "failover", "tasks.max": "1"},
                initial_state="STOPPED",
            )
        total = time.monotonic() - killed
        new_address, _ = agreed_leader([r for r in replicas if r is not leader], min_epoch=epoch + 1)
        new_leader = next(r for r in replicas if r.address == new_address)
        assigned = _logged_at(new_leader, "holds the cluster partition", killed_wall)
        leading = _logged_at(new_leader, "leads the cluster with epoch", killed_wall)
        times.append(
            Failover(
                total,
                None if assigned is None else assigned - killed_wall,
                None if leading is None else leading - killed_wall,
            )
        )
        print(
            f"kill {kill + 1}: partition reassigned after {times[-1].assigned}s, leading after "
            f"{times[-1].leading}s, first mutation through a survivor after {total:.2f}s",
            flush=True,
        )
        start_replica(leader, bootstrap, suffix, logs)
        agreed_leader(replicas)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=200, help="calls per measurement, split over the clients"
    )
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--only", choices=("latency", "failover"), help="run one of the two parts")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    broker = start_broker(logs)
    suffix = uuid.uuid4().hex[:8]
    replicas = [Replica(free_port()) for _ in range(3)]
    try:
        for replica in replicas:
            start_replica(replica, broker.bootstrap_servers, suffix, logs)
        rows = [] if args.only == "failover" else latency_table(replicas, args.requests, f"lat-{suffix}")
        times = (
            []
            if args.only == "latency"
            else failover(replicas, args.kills, broker.bootstrap_servers, suffix, logs)
        )
    finally:
        for replica in replicas:
            if replica.process is not None and replica.process.process.poll() is None:
                replica.process.stop(timeout=30)
        broker.stop()
    report = [
        "## Control-plane cluster",
        "",
        f"Three replicas on one embedded broker (Tansu), {platform.machine()}, "
        f"`session.timeout.ms={SESSION_TIMEOUT_MS}`; command: "
        f"`bench/bench_cluster.py --requests {args.requests} --kills {args.kills}`.",
        "",
        *rows,
        "",
    ]
    if times:
        report += [
            f"Failover over {len(times)} kills of the leader (SIGKILL), seconds after the kill:",
            "",
            "| step | min | median | max |",
            "|---|---|---|---|",
            *(
                f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |"
                for name, values in (
                    ("the group gives a survivor the partition", [t.assigned for t in times if t.assigned]),
                    ("the survivor leads (fenced, read, announced)", [t.leading for t in times if t.leading]),
                    ("first successful mutation through a survivor", [t.total for t in times]),
                )
                if values
            ),
            "",
        ]
    text = "\n".join(report)
    print(text)
    if args.report is not None:
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
