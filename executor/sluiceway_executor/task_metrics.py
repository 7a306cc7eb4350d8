"""An executor's Prometheus metrics: what each of its tasks moves and how long its batches take.

Names follow Prometheus' conventions, labels Kafka Connect's words (`connector`, `task`, `topic`,
`partition`). A batch is counted once its offsets are committed (as the skipped records are), so
the records counted are the records delivered; a batch that failed, or whose commit was refused,
is counted when it is done again. Series of a task leave the registry when the task leaves the
executor (`ExecutorMetrics.forget`), so a scrape shows the tasks the executor runs.

Threading: each task's runner updates its own `TaskMeter` from its thread; the `/metrics`
endpoint reads the registry from another (prometheus-client's instruments are thread-safe)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sluiceway.api.v1 import common_pb2
from sluiceway_executor.pipelines.pipeline import BatchOutcome

__all__ = ["PHASES", "ExecutorMetrics", "TaskMeter"]

log = logging.getLogger(__name__)

# The steps of a batch, as BatchOutcome.steps names them, plus the runner's commit. Spark runs the
# reading and converting of a batch lazily inside the job that writes it, so `write` holds all
# three; `plan` is the sink's planning of its ranges (end offsets, committed offsets).
PHASES: Final = ("plan", "write", "commit")
# From a few milliseconds (an empty batch) to minutes (a large batch on a cold JVM).
_BATCH_SECONDS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0)
_TASK: Final = ("connector", "task")
# The span a task's records_per_second is averaged over.
RATE_WINDOW_S: Final = 60.0


class ExecutorMetrics:
    """The instruments of one executor, and a `TaskMeter` per task it runs."""

    def __init__(self, executor_id: str, version: str, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry()
        self._clock = clock
        self._lock = threading.Lock()
        self._meters: dict[tuple[str, int], TaskMeter] = {}
        registry = self.registry
        info = Gauge(
            "sluiceway_executor_info",
            "Always 1; the executor's id and version as labels",
            ["executor", "version"],
            registry=registry,
        )
        info.labels(executor_id, version).set(1)
        self.records_read = Counter(
            "sluiceway_task_records_read",
            "Records a task took in: a sink from Kafka, a source from its system",
            _TASK,
            registry=registry,
        )
        self.records_written = Counter(
            "sluiceway_task_records_written",
            "Records a task handed on: a sink to its system, a source to Kafka",
            _TASK,
            registry=registry,
        )
        self.bytes_read = Counter(
            "sluiceway_task_bytes_read",
            "Bytes of the keys and values a sink task read from Kafka",
            _TASK,
            registry=registry,
        )
        self.bytes_written = Counter(
            "sluiceway_task_bytes_written",
            "Bytes of the keys and values a source task wrote to Kafka",
            _TASK,
            registry=registry,
        )
        self.batches = Counter(
            "sluiceway_task_batches", "Batches a task committed (empty ones too)", _TASK, registry=registry
        )
        self.batch_seconds = Histogram(
            "sluiceway_task_batch_seconds",
            "How long a phase of a committed batch took: plan (sinks), write (reading, converting "
            "and writing, one Spark job), commit",
            [*_TASK, "phase"],
            buckets=_BATCH_SECONDS,
            registry=registry,
        )
        self.skipped = Counter(
            "sluiceway_task_records_skipped",
            "Records left out because a converter or transform failed on them (errors.tolerance=all)",
            _TASK,
            registry=registry,
        )
        self.dead_lettered = Counter(
            "sluiceway_task_records_dead_lettered",
            "Skipped records a sink task wrote to its dead-letter topic",
            _TASK,
            registry=registry,
        )
        self.restarts = Counter(
            "sluiceway_task_restarts",
            "Times a task was run again after a failure (automatic restarts and new Spark sessions)",
            _TASK,
            registry=registry,
        )
        self.state = Gauge(
            "sluiceway_task_reported_state",
            "1, for the state this executor last reported for the task (one series per task; the "
            "control plane's sluiceway_task_state is what the cluster holds)",
            [*_TASK, "state"],
            registry=registry,
        )
        self.since_commit = Gauge(
            "sluiceway_task_seconds_since_last_commit",
            "Seconds since the task last committed a batch's offsets (since it came to this executor, "
            "before its first); empty batches commit nothing",
            _TASK,
            registry=registry,
        )
        self.lag = Gauge(
            "sluiceway_sink_task_consumer_lag",
            "Records of a partition a sink task has yet to commit: the partition's end offset, as its "
            "last plan fetched, minus the task's committed offset",
            [*_TASK, "topic", "partition"],
            registry=registry,
        )

    def task(self, connector: str, task: int) -> TaskMeter:
        """The meter of this task, the same one for every assignment of it while it stays here."""
        with self._lock:
            meter = self._meters.get((connector, task))
            if meter is None:
                meter = self._meters[(connector, task)] = TaskMeter(self, connector, task, self._clock)
            return meter

    def forget(self, connector: str, task: int) -> None:
        """The task left this executor: its series leave the registry."""
        with self._lock:
            meter = self._meters.pop((connector, task), None)
        if meter is not None:
            meter.close()

    def meters(self) -> list[TaskMeter]:
        with self._lock:
            return list(self._meters.values())


class TaskMeter:
    """One task's series; updated from its runner's thread and the task table's."""

    def __init__(
        self, metrics: ExecutorMetrics, connector: str, task: int, clock: Callable[[], float]
    ) -> None:
        self._metrics = metrics
        self.connector, self.task = connector, task
        self._labels = (connector, str(task))
        self._clock = clock
        self._lock = threading.Lock()
        self._partitions: set[tuple[str, int]] = set()
        self._state = ""
        self._started = self._last_commit = clock()
        self._committed_once = False
        self._restart_count = 0
        # (time, records read so far) after each committed batch, for the rate over RATE_WINDOW_S.
        self._read_total = 0
        self._samples: deque[tuple[float, int]] = deque()
        self.lag: dict[tuple[str, int], int] = {}
        labels = self._labels
        self._read = metrics.records_read.labels(*labels)
        self._written = metrics.records_written.labels(*labels)
        self._batches = metrics.batches.labels(*labels)
        self._skipped = metrics.skipped.labels(*labels)
        self._dead_lettered = metrics.dead_lettered.labels(*labels)
        self._restarts = metrics.restarts.labels(*labels)
        self._phases = {phase: metrics.batch_seconds.labels(*labels, phase) for phase in PHASES}
        metrics.since_commit.labels(*labels).set_function(lambda: self._clock() - self._last_commit)

    def reported(self, state: common_pb2.State.ValueType) -> None:
        """The task reported ``state`` to the control plane."""
        name = common_pb2.State.Name(state).removeprefix("STATE_")
        if state == common_pb2.STATE_RESTARTING:
            self._restarts.inc()
            self._restart_count += 1
        with self._lock:
            if self._state not in ("", name):
                self._metrics.state.remove(*self._labels, self._state)
            self._state = name
            self._metrics.state.labels(*self._labels, name).set(1)

    def committed(self, outcome: BatchOutcome, commit_seconds: float) -> None:
        """A batch whose offsets are committed (or that had none to commit)."""
        self._batches.inc()
        now = self._clock()
        steps = outcome.steps
        # Planned ahead (while the batch before committed) or on the batch's own path.
        plan = steps.get("plan", steps.get("plan_ahead"))
        if plan is not None:
            self._phases["plan"].observe(plan)
        if "write" in steps:
            self._phases["write"].observe(steps["write"])
        self._phases["commit"].observe(commit_seconds)
        read = outcome.read.records if outcome.read is not None else outcome.records
        if read:
            self._read.inc(read)
        with self._lock:
            if outcome.offsets:
                self._last_commit, self._committed_once = now, True
            self._read_total += read or 0
            self._samples.append((now, self._read_total))
            # Kept: the newest sample at or before the window's start, the base of the rate.
            while len(self._samples) > 1 and self._samples[1][0] <= now - RATE_WINDOW_S:
                self._samples.popleft()
        if outcome.read is not None and outcome.read.bytes:
            self._metrics.bytes_read.labels(*self._labels).inc(outcome.read.bytes)
        written = outcome.written.records if outcome.written is not None else None
        if written is None and read is not None and not outcome.empty:
            written = read - outcome.skipped
        if written:
            self._written.inc(written)
        if outcome.written is not None and outcome.written.bytes:
            self._metrics.bytes_written.labels(*self._labels).inc(outcome.written.bytes)
        if outcome.skipped:
            self._skipped.inc(outcome.skipped)
        if outcome.dead_letters:
            self._dead_lettered.inc(len(outcome.dead_letters))
        if outcome.backlog is not None:
            self._set_lag(outcome.backlog)

    def progress(self) -> common_pb2.TaskProgress:
        """The task's rate over the last minute, its lag (sinks) and its last commit, now."""
        now = self._clock()
        with self._lock:
            base_time, base_total = self._started, 0
            for sampled_at, total in self._samples:
                if sampled_at > now - RATE_WINDOW_S:
                    break
                base_time, base_total = sampled_at, total
            span = now - base_time
            progress = common_pb2.TaskProgress(
                records_per_second=(self._read_total - base_total) / span if span > 0 else 0.0,
                restarts=self._restart_count,
            )
            if self.lag or self._partitions:
                progress.lag = sum(self.lag.values())
            if self._committed_once:
                progress.last_commit_time.FromMilliseconds(int(self._last_commit * 1000))
        progress.measure_time.FromMilliseconds(int(now * 1000))
        return progress

    def _set_lag(self, backlog: Mapping[tuple[str, int], int]) -> None:
        with self._lock:
            gone = self._partitions - set(backlog)
            for topic, partition in gone:
                self._metrics.lag.remove(*self._labels, topic, str(partition))
            for (topic, partition), records in backlog.items():
                self._metrics.lag.labels(*self._labels, topic, str(partition)).set(records)
            self._partitions = set(backlog)
            self.lag = dict(backlog)

    def close(self) -> None:
        """Removes every series of the task."""
        metrics = self._metrics
        labels = {"connector": self.connector, "task": str(self.task)}
        for metric in (
            metrics.records_read,
            metrics.records_written,
            metrics.bytes_read,
            metrics.bytes_written,
            metrics.batches,
            metrics.batch_seconds,
            metrics.skipped,
            metrics.dead_lettered,
            metrics.restarts,
            metrics.state,
            metrics.since_commit,
            metrics.lag,
        ):
            metric.remove_by_labels(labels)
        with self._lock:
            self._partitions = set()
