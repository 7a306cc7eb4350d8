"""The tasks an executor runs, kept across attach streams (docs/ARCHITECTURE.md §6).

:class:`TaskTable` owns every :class:`~sluiceway_executor.runner.TaskRunner` of the process: the
current runner of each task, and the retiring ones that were told to stop and have not ended yet.
Runners commit their offsets to Kafka themselves, so they do not depend on the stream to the
control plane: when it breaks they keep running, and the agent attaches again. The table is the
runners' ``TaskHost``: a status report goes out through the stream open at the time, and is also
remembered (with the generation and fingerprint of the assignment) so that the next ``Hello``
lists every task with its last state (and, when RUNNING, its idle detail and record counts). While
no stream is open, reports are only remembered and active-topic reports are dropped; after each
Welcome every runner reports its topics again. The table also keeps the executor's metrics of its
tasks (``task_metrics.py``): the state each reported, the batches each committed; a task's series
go when the task leaves the executor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.common.generations import generation_label
from sluiceway_executor.offset_commits import CommitterFactory
from sluiceway_executor.pipelines.pipeline import BatchOutcome, PipelineFactory
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import (
    DEFAULT_COMMIT_TIMEOUT_S,
    DEFAULT_MAX_POLL_INTERVAL_S,
    DEFAULT_POLL_INTERVAL_S,
    SessionKeeper,
    TaskRunner,
)
from sluiceway_executor.task_metrics import ExecutorMetrics

__all__ = ["Outlet", "TaskTable"]

log = logging.getLogger(__name__)


class Outlet(Protocol):
    """An attach stream's way out: False when the stream is closed (the message is dropped)."""

    def send(self, message: executor_pb2.ExecutorMessage) -> bool: ...


@dataclass(frozen=True)
class _Reported:
    generation: int
    state: common_pb2.State.ValueType
    trace: str
    detail: str = ""
    idle_since_ms: int = 0
    records_skipped: int = 0
    records_dead_lettered: int = 0


class TaskTable:
    """Every task runner of the executor, and the runners' way to the control plane."""

    def __init__(
        self,
        pipeline_factory: PipelineFactory,
        committer_factory: CommitterFactory,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL_S,
        max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL_S,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_S,
        sessions: SessionKeeper | None = None,
        metrics: ExecutorMetrics | None = None,
    ) -> None:
        self._pipeline_factory = pipeline_factory
        self.metrics = metrics if metrics is not None else ExecutorMetrics("", "")
        self._sessions = sessions
        self._committer_factory = committer_factory
        self._poll_interval = poll_interval
        self._max_poll_interval = max_poll_interval
        self._commit_timeout = commit_timeout
        self._lock = threading.Lock()
        self._runners: dict[str, TaskRunner] = {}
        # Runners told to stop that have not ended yet: a new assignment of the task waits for them.
        self._retiring: dict[str, TaskRunner] = {}
        # The last status each current runner reported, for the next Hello.
        self._reported: dict[str, _Reported] = {}
        self._outlet: Outlet | None = None

    # ------------------------------------------------------------------ the stream

    def connect(self, outlet: Outlet, hello: executor_pb2.Hello) -> None:
        """Fills ``hello.running_tasks``, sends it as the stream's first message and makes the
        stream the one reports go through, in one step: a status reported meanwhile is either in
        the Hello or sent after it."""
        with self._lock:
            del hello.running_tasks[:]
            hello.running_tasks.extend(self._running_tasks())
            outlet.send(executor_pb2.ExecutorMessage(hello=hello))
            self._outlet = outlet

    def disconnect(self, outlet: Outlet) -> None:
        """The stream closed: reports are only remembered until the next one opens."""
        with self._lock:
            if self._outlet is outlet:
                self._outlet = None

    def _running_tasks(self) -> list[executor_pb2.RunningTask]:
        """The tasks to list in a Hello: every current runner still running, and every one that
        failed (the leader keeps a failed task where it failed). A runner that ended for another
        reason (another executor took its task over) runs nothing."""
        tasks = []
        for name, runner in sorted(self._runners.items()):
            if not (runner.alive or runner.failed):
                continue
            spec = runner.spec
            reported = self._reported.get(name)
            if reported is None or reported.generation != spec.generation:
                # Still starting: it will be running (or paused) unless it fails, which it reports.
                state = common_pb2.STATE_PAUSED if spec.paused else common_pb2.STATE_RUNNING
                reported = _Reported(spec.generation, state, "")
            task = executor_pb2.RunningTask(
                task=name,
                generation=spec.generation,
                fingerprint=spec.fingerprint,
                state=reported.state,
                trace=reported.trace,
                detail=reported.detail,
                records_skipped=reported.records_skipped,
                records_dead_lettered=reported.records_dead_lettered,
            )
            if reported.idle_since_ms > 0:
                task.idle_since.FromMilliseconds(reported.idle_since_ms)
            tasks.append(task)
        return tasks

    # ------------------------------------------------------------------ TaskHost

    def send_status(
        self,
        spec: TaskSpec,
        state: common_pb2.State.ValueType,
        trace: str = "",
        *,
        restart_attempt: int = 0,
        next_restart_ms: int = 0,
        detail: str = "",
        idle_since_ms: int = 0,
        records_skipped: int = 0,
        records_dead_lettered: int = 0,
    ) -> None:
        report = executor_pb2.TaskStatusReport(
            task=spec.name,
            generation=spec.generation,
            state=state,
            trace=trace,
            restart_attempt=restart_attempt,
            detail=detail,
            records_skipped=records_skipped,
            records_dead_lettered=records_dead_lettered,
        )
        if next_restart_ms > 0:
            report.next_restart_time.FromMilliseconds(next_restart_ms)
        if idle_since_ms > 0:
            report.idle_since.FromMilliseconds(idle_since_ms)
        message = executor_pb2.ExecutorMessage(task_status=report)
        with self._lock:
            current = self._runners.get(spec.name)
            if current is not None and current.spec.generation == spec.generation:
                self.metrics.task(spec.connector, spec.task_index).reported(state)
                self._reported[spec.name] = _Reported(
                    spec.generation,
                    state,
                    trace,
                    detail,
                    idle_since_ms,
                    records_skipped,
                    records_dead_lettered,
                )
            outlet = self._outlet
        if outlet is not None:
            outlet.send(message)

    def send_active_topics(self, spec: TaskSpec, topics: list[str]) -> None:
        with self._lock:
            outlet = self._outlet
        if outlet is not None:
            outlet.send(
                executor_pb2.ExecutorMessage(
                    active_topics=executor_pb2.ActiveTopicsReport(
                        task=spec.name, generation=spec.generation, topics=topics
                    )
                )
            )

    def batch_committed(self, spec: TaskSpec, outcome: BatchOutcome, commit_seconds: float) -> None:
        with self._lock:
            # A runner told to stop may still commit its last batch; its task's series are gone.
            if spec.name not in self._runners:
                return
            meter = self.metrics.task(spec.connector, spec.task_index)
        meter.committed(outcome, commit_seconds)

    def progress_reports(self) -> list[executor_pb2.TaskProgressReport]:
        """The progress of every running task that is not paused, for the next heartbeat."""
        with self._lock:
            specs = [r.spec for r in self._runners.values() if r.alive and not r.spec.paused]
            meters = [(spec, self.metrics.task(spec.connector, spec.task_index)) for spec in specs]
        return [
            executor_pb2.TaskProgressReport(
                task=spec.name, generation=spec.generation, progress=meter.progress()
            )
            for spec, meter in meters
        ]

    # ------------------------------------------------------------------ reading

    def running(self) -> list[str]:
        """The tasks whose runner is still running (a runner that is stopping included)."""
        with self._lock:
            return sorted(name for name, runner in self._runners.items() if runner.alive)

    def runner(self, task: str) -> TaskRunner | None:
        with self._lock:
            return self._runners.get(task)

    # ------------------------------------------------------------------ the leader's orders

    def assign(self, specs: Iterable[TaskSpec], worker_config: Mapping[str, str]) -> None:
        """Starts a runner per new task. A task already running is left alone when the assignment
        repeats what it runs; otherwise its new runner first stops the old one (see TaskRunner)."""
        for spec in specs:
            with self._lock:
                current = self._runners.get(spec.name)
                if current is not None and current.spec.same_work(spec) and not current.stopping:
                    continue
                existing = current or self._retiring.get(spec.name)
                runner = TaskRunner(
                    spec,
                    self,
                    self._pipeline_factory,
                    worker_config,
                    committer_factory=self._committer_factory,
                    predecessor=existing,
                    poll_interval=self._poll_interval,
                    max_poll_interval=self._max_poll_interval,
                    commit_timeout=self._commit_timeout,
                    sessions=self._sessions,
                )
                self._runners[spec.name] = runner
                self._reported.pop(spec.name, None)
            log.info(
                "%s %s (generation %s%s)",
                "restarting" if existing is not None else "starting",
                spec.name,
                generation_label(spec.generation),
                ", paused" if spec.paused else "",
            )
            runner.start()

    def revoke(self, tasks: list[str], then: Callable[[], None]) -> None:
        """Stops these tasks between batches, letting the batch in flight commit (the generation is
        current until the leader has the acknowledgement), and calls ``then`` once they ended."""
        with self._lock:
            runners = [self._runners[name] for name in tasks if name in self._runners]
        self._retire(runners, commit=True, then=then)

    def keep_only(self, adopted: Iterable[str]) -> list[str]:
        """After a Welcome: stops, without committing, every task the leader did not adopt (it runs
        elsewhere now, or no longer exists); returns their names."""
        keep = set(adopted)
        with self._lock:
            runners = [runner for name, runner in self._runners.items() if name not in keep]
        self._retire(runners, commit=False)
        return sorted(runner.name for runner in runners)

    def release_all(self) -> None:
        """Fenced by the leader: every task stops at once without committing, the retiring ones too."""
        with self._lock:
            runners = [*self._runners.values(), *self._retiring.values()]
        self._retire(runners, commit=False)

    def forget_topics(self, connector: str | None = None) -> None:
        """Runners (of ``connector``, or all) report the topics they use again (KIP-558)."""
        with self._lock:
            runners = [*self._runners.values(), *self._retiring.values()]
        for runner in runners:
            if connector is None or runner.spec.connector == connector:
                runner.forget_reported_topics()

    def stop_all(self, timeout: float | None = None) -> bool:
        """Shutting down: every task stops between batches, committing its batch in flight. Waits up
        to ``timeout`` (None: for as long as it takes); True when every runner has ended."""
        with self._lock:
            runners = [*self._runners.values(), *self._retiring.values()]
        for runner in runners:
            runner.stop(commit=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        for runner in runners:
            runner.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        return not any(runner.alive for runner in runners)

    def _retire(
        self, runners: list[TaskRunner], *, commit: bool, then: Callable[[], None] | None = None
    ) -> None:
        """Moves the current ones among ``runners`` to retiring, asks all of them to stop and, on a
        thread of its own, waits for them, forgets them and calls ``then``."""
        with self._lock:
            for runner in runners:
                # A runner already retiring keeps its place: the one there may be a newer one (which
                # waits for it in turn), and a new assignment must wait for the newest.
                if self._runners.get(runner.name) is runner:
                    del self._runners[runner.name]
                    self._reported.pop(runner.name, None)
                    self._retiring[runner.name] = runner
                    self.metrics.forget(runner.spec.connector, runner.spec.task_index)
        for runner in runners:
            runner.stop(commit=commit)
        if not runners and then is None:
            return

        def wait() -> None:
            for runner in runners:
                runner.join()
            with self._lock:
                for runner in runners:
                    if self._retiring.get(runner.name) is runner:
                        del self._retiring[runner.name]
            if then is not None:
                then()

        threading.Thread(target=wait, name="retiring", daemon=True).start()
