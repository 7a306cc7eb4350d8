"""Control-plane cluster benchmarks on a real three-replica cluster (embedded broker):

- latency: p50/p99 of a read (GetConnector) and of a mutation (PatchConnectorConfig of a STOPPED
  connector: validated, written to the config topic, read back) sent to the leader and to a
  follower, at 1, 8 and 32 concurrent clients; the follower's extra time is what forwarding costs;
- failover: the leader killed with SIGKILL, then the time until a mutation sent through a
  survivor (the client library retrying UNAVAILABLE) first succeeds; repeated `--kills` times,
  the killed replica restarted in between;
- handover: the same after a clean stop of the leader (SIGTERM), `--handovers` times;
- restart: a lone replica holding `--connectors` connectors killed with SIGKILL and started again,
  the time from the new process's spawn until it leads and lists every connector, `--restarts` times.

Every replica runs with the default settings (no session timeout of ours).

    .venv/bin/python bench/bench_cluster.py --requests 200 --kills 10 --report bench/CLUSTER.md \
        --plot bench/failover.png
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


def side_by_side(work: Callable[[int], None], count: int) -> None:
    """Runs ``work(0)`` to ``work(count - 1)`` on threads of their own and waits for all of them."""
    threads = [threading.Thread(target=work, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


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

    side_by_side(run, clients)
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
    total: float  # kill (or stop) → first successful mutation through a survivor
    decided: float | None  # → the new leader's election decided to take the lead
    leading: float | None  # → it finished taking the lead (fenced, read, announced)


def failover(
    replicas: list[Replica], times: int, bootstrap: str, suffix: str, logs: Path, *, clean: bool
) -> list[Failover]:
    """The leader killed (or, with `clean`, stopped) `times` times; restarted in between."""
    results: list[Failover] = []
    for round_ in range(times):
        leader_address, epoch = agreed_leader(replicas)
        leader = next(r for r in replicas if r.address == leader_address)
        survivor = next(r for r in replicas if r is not leader)
        assert leader.process is not None
        if clean:
            stopping = threading.Thread(target=leader.process.stop, kwargs={"timeout": 30})
            stopping.start()
        else:
            leader.process.kill()
        killed, killed_wall = time.monotonic(), time.time()
        with SluicewayClient(survivor.address, timeout=120) as client:
            client.create_connector(
                f"failover-{round_}-{uuid.uuid4().hex[:6]}",
                {"connector.class": "DataGenSource", "topic": "failover", "tasks.max": "1"},
                initial_state="STOPPED",
            )
        total = time.monotonic() - killed
        if clean:
            stopping.join()
        new_address, _ = agreed_leader([r for r in replicas if r is not leader], min_epoch=epoch + 1)
        new_leader = next(r for r in replicas if r.address == new_address)
        decided = _logged_at(new_leader, "this replica takes the lead", killed_wall)
        leading = _logged_at(new_leader, "leads the cluster with epoch", killed_wall)
        results.append(
            Failover(
                total,
                None if decided is None else decided - killed_wall,
                None if leading is None else leading - killed_wall,
            )
        )
        print(
            f"{'stop' if clean else 'kill'} {round_ + 1}: lead taken after {results[-1].decided}s, "
            f"leading after {results[-1].leading}s, first mutation through a survivor after {total:.2f}s",
            flush=True,
        )
        start_replica(leader, bootstrap, suffix, logs)
        agreed_leader(replicas)
    return results


def lone_restarts(bootstrap: str, logs: Path, connectors: int, restarts: int) -> list[float]:
    """A one-replica cluster holding `connectors` connectors, killed and started again: the seconds
    from each new spawn until it leads and lists every connector."""
    suffix = uuid.uuid4().hex[:8]
    replica = Replica(free_port())
    start_replica(replica, bootstrap, suffix, logs)
    with SluicewayClient(replica.address, timeout=60) as client:
        for n in range(connectors):
            client.create_connector(
                f"lone-{n}", {"connector.class": "DataGenSource", "topic": "lone"}, initial_state="STOPPED"
            )
    results: list[float] = []
    try:
        for round_ in range(restarts):
            assert replica.process is not None
            replica.process.kill()
            spawned = time.monotonic()
            start_replica(replica, bootstrap, suffix, logs, wait=False)
            while True:
                info = server_info(replica.address)
                if info is not None and info.leader.id == info.this_replica.id:
                    try:
                        with SluicewayClient(replica.address, timeout=5) as client:
                            if sum(1 for _ in client.list_connectors()) == connectors:
                                break
                    except Exception:  # still starting: try again
                        pass
                if time.monotonic() - spawned > 120:
                    raise TimeoutError("the restarted replica did not answer with its state")
                time.sleep(0.05)
            results.append(time.monotonic() - spawned)
            print(f"restart {round_ + 1}: leads and lists {connectors} connectors after {results[-1]:.2f}s")
    finally:
        if replica.process is not None and replica.process.process.poll() is None:
            replica.process.stop(timeout=30)
    return results


def plot(kills: list[Failover], stops: list[Failover], restarts: list[float], path: Path) -> None:
    """Each round's time to the first mutation (and to the new term), one series per kind."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4))
    for label, values, marker in (
        ("leader killed: first mutation through a survivor", [t.total for t in kills], "o"),
        ("leader killed: survivor leads", [t.leading or 0.0 for t in kills], "."),
        ("leader stopped: first mutation through a survivor", [t.total for t in stops], "s"),
        ("lone replica restarted: leads and lists everything", restarts, "^"),
    ):
        if values:
            axis.plot(range(1, len(values) + 1), values, marker=marker, label=label)
    axis.axhline(5.0, color="grey", linestyle="--", linewidth=0.8)
    axis.set_xlabel("round")
    axis.set_ylabel("seconds")
    axis.set_ylim(bottom=0)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def _summary(title: str, rows: list[tuple[str, list[float]]]) -> list[str]:
    lines = [title, "", "| step | min | median | max |", "|---|---|---|---|"]
    lines += [
        f"| {name} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |"
        for name, values in rows
        if values
    ]
    return [*lines, ""]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--requests", type=int, default=200, help="calls per measurement, split over the clients"
    )
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--handovers", type=int, default=5)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--connectors", type=int, default=100, help="what the restarted lone replica holds")
    parser.add_argument("--only", choices=("latency", "failover"), help="run one of the two parts")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--plot", type=Path, help="a PNG of every failover round (needs matplotlib)")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    broker = start_broker(logs)
    suffix = uuid.uuid4().hex[:8]
    replicas = [Replica(free_port()) for _ in range(3)]
    kills: list[Failover] = []
    stops: list[Failover] = []
    restarts: list[float] = []
    try:
        for replica in replicas:
            start_replica(replica, broker.bootstrap_servers, suffix, logs)
        rows = [] if args.only == "failover" else latency_table(replicas, args.requests, f"lat-{suffix}")
        if args.only != "latency":
            bootstrap = broker.bootstrap_servers
            kills = failover(replicas, args.kills, bootstrap, suffix, logs, clean=False)
            stops = failover(replicas, args.handovers, bootstrap, suffix, logs, clean=True)
            restarts = lone_restarts(bootstrap, logs, args.connectors, args.restarts)
    finally:
        for replica in replicas:
            if replica.process is not None and replica.process.process.poll() is None:
                replica.process.stop(timeout=30)
        broker.stop()
    report = [
        "## Control-plane cluster",
        "",
        f"Three replicas on one embedded broker (Tansu), {platform.machine()}, default settings; "
        f"command: `bench/bench_cluster.py{' --only ' + args.only if args.only else ''} "
        f"--requests {args.requests} --kills {args.kills} "
        f"--handovers {args.handovers} --restarts {args.restarts} --connectors {args.connectors}`.",
        "",
        *rows,
        "",
    ]
    if kills:
        report += _summary(
            f"Failover over {len(kills)} kills of the leader (SIGKILL), seconds after the kill:",
            [
                ("a survivor's election decides to lead", [t.decided for t in kills if t.decided]),
                ("the survivor leads (fenced, read, announced)", [t.leading for t in kills if t.leading]),
                ("first successful mutation through a survivor", [t.total for t in kills]),
            ],
        )
    if stops:
        report += _summary(
            f"Handover over {len(stops)} clean stops of the leader (SIGTERM), seconds after the signal:",
            [
                ("the survivor leads", [t.leading for t in stops if t.leading]),
                ("first successful mutation through a survivor", [t.total for t in stops]),
            ],
        )
    if restarts:
        report += _summary(
            f"A lone replica with {args.connectors} connectors killed and started again, "
            f"{len(restarts)} times, seconds after the new spawn:",
            [("leads and lists every connector", restarts)],
        )
    if args.plot is not None and (kills or stops or restarts):
        plot(kills, stops, restarts, args.plot)
    text = "\n".join(report)
    print(text)
    if args.report is not None:
        args.report.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
