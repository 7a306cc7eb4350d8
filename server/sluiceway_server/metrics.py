"""The control plane's Prometheus metrics: its calls (gRPC, REST, forwarding to the leader) and what
it knows of the cluster (connectors and tasks by state, the leader, the executors attached). Names
follow Prometheus' conventions, labels Kafka Connect's words (`connector`, `task`, `state`).

Each replica has its own registry, so several in one process (tests) do not mix. The counters and
histograms are updated where calls happen; the state gauges by `set_cluster_state`, which
server.py calls every few seconds on the event loop, where the views they read live."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["STATES", "ControlPlaneMetrics"]

STATES: Final = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")
# Calls take from under a millisecond (reads) to the request timeout (a create that waits for a
# plugin); the buckets span that.
_CALL_SECONDS: Final = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    90.0,
)


class ControlPlaneMetrics:
    """The instruments of one replica. Threading: prometheus-client's instruments may be updated
    from any thread and are read by the endpoint's thread."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.grpc_handled = Counter(
            "sluiceway_grpc_server_handled",
            "gRPC calls this replica answered, by service, method and status code",
            ["service", "method", "code"],
            registry=registry,
        )
        self.grpc_seconds = Histogram(
            "sluiceway_grpc_server_handling_seconds",
            "How long this replica took to answer a gRPC call (streams: how long they stayed open)",
            ["service", "method"],
            buckets=_CALL_SECONDS,
            registry=registry,
        )
        self.rest_handled = Counter(
            "sluiceway_rest_requests",
            "REST requests this replica answered, by HTTP method, route and status",
            ["method", "route", "status"],
            registry=registry,
        )
        self.rest_seconds = Histogram(
            "sluiceway_rest_request_seconds",
            "How long this replica took to answer a REST request",
            ["method", "route"],
            buckets=_CALL_SECONDS,
            registry=registry,
        )
        self.forwarded = Counter(
            "sluiceway_forwarded_requests",
            "Mutations this replica passed on to the leader, by method and the leader's status code",
            ["method", "code"],
            registry=registry,
        )
        self.forwarding_seconds = Histogram(
            "sluiceway_forwarding_seconds",
            "How long the leader took to answer a mutation this replica passed on",
            ["method"],
            buckets=_CALL_SECONDS,
            registry=registry,
        )
        self.connectors = Gauge(
            "sluiceway_connectors",
            "Connectors by the state of their connector instance",
            ["state"],
            registry=registry,
        )
        self.tasks = Gauge("sluiceway_tasks", "Tasks by state", ["state"], registry=registry)
        self.task_state = Gauge(
            "sluiceway_task_state",
            "1 for each task and the state it is in (Kafka Connect's task status)",
            ["connector", "task", "state"],
            registry=registry,
        )
        self.leader = Gauge("sluiceway_leader", "1 while this replica leads the cluster", registry=registry)
        self.leader_epoch = Gauge(
            "sluiceway_leader_epoch",
            "The epoch of the leader this replica knows (0: none)",
            registry=registry,
        )
        self.executors = Gauge(
            "sluiceway_executors_attached",
            "Executors attached to this replica (the leader; 0 on others)",
            registry=registry,
        )
        self.internal_topic_read_lag = Gauge(
            "sluiceway_internal_topic_read_lag",
            "Records of an internal topic (configs, statuses, offsets, cluster) this replica has not "
            "read yet, from its fetches' high watermarks; 0 once caught up",
            ["topic"],
            registry=registry,
        )
        self.rebalance_seconds = Histogram(
            "sluiceway_rebalance_seconds",
            "How long each rebalance of the tasks over the executors took on this replica (while it "
            "led); its _count is the rebalances completed",
            buckets=_CALL_SECONDS,
            registry=registry,
        )

    def set_cluster_state(
        self,
        connector_states: Mapping[str, str],
        task_states: Iterable[tuple[str, int, str]],
        *,
        leading: bool,
        leader_epoch: int,
        executors: int,
    ) -> None:
        """The state gauges from one reading of the status views and the leadership."""
        by_state = Tally(connector_states.values())
        for state in STATES:
            self.connectors.labels(state).set(by_state.get(state, 0))
        tasks = list(task_states)
        task_tally = Tally(state for _, _, state in tasks)
        for state in STATES:
            self.tasks.labels(state).set(task_tally.get(state, 0))
        # Tasks come and go: the per-task series are written afresh each time.
        self.task_state.clear()
        for connector, task, state in tasks:
            self.task_state.labels(connector, str(task), state).set(1)
        self.leader.set(1 if leading else 0)
        self.leader_epoch.set(leader_epoch)
        self.executors.set(executors)
