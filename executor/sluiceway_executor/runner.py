"""One thread per task: the loop of micro-batches, each followed by its offset commit
(docs/ARCHITECTURE.md §3).

A runner starts its task's pipeline and, on a thread of its own meanwhile, opens the task's offset
committer (which fences any earlier holder of the task's commits, see ``offset_commits.py``; a
committer opened for a pipeline that then fails to start commits nothing and is closed), reports
RUNNING once both are done, then runs one batch after another and commits each batch's offsets to
Kafka itself before the next batch (a pipeline that plans ahead plans that batch meanwhile, see
``PlansAhead``), and tells its host of each committed batch (the executor's metrics). A paused
assignment reports PAUSED and runs no pipeline, no committer and no batches. Offsets are committed
only after the batch's data is durable: a batch is committed whole or redone whole (at least once,
at most one duplicate batch per interruption).

The runner needs the control plane only to report its status and the topics it uses (``TaskHost``):
it goes on when the stream to the control plane is down. When a commit is FENCED, another executor
has taken the task over: the runner ends quietly, committing nothing more.

A run that fails is followed by another (``restarts.py`` decides when): after a lost Spark Connect
session, on a new session at once; after Kafka was unreachable (a transient error, a commit that ran
out of time), after a pause that grows up to 30 s; after the task's own error, as its automatic
restart policy says, or never, and then the task is FAILED. Meanwhile the task reports RESTARTING
with the failure's trace. Each new run starts from the offsets committed so far, so the batch that
failed is redone.

Stopping happens between batches: a batch in flight finishes its Spark job; whether its offsets
may still be committed depends on why the task stops (``stop(commit=...)``).

After an empty batch the runner pauses (growing up to ``max_poll_interval``), but never past the
moment a source task's next heartbeat (KIP-910) is due, so an idle task still sends heartbeat
records on time; they are committed like any batch's records.

A running task that has nothing to do (its source said it reached the end of its data, or its
batches have been empty for a while: ``pipelines/idle.py``) reports RUNNING again with a detail
and the time since when it is idle, and plain RUNNING once a batch brings records: a report on
each change, not on each batch.

A run counts the records its committed batches left out (``errors.tolerance=all``) and dead-lettered,
from 0; new counts go out with RUNNING at most every ``COUNTS_REPORT_INTERVAL_S`` (``_counts_due``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from sluiceway.api.v1 import common_pb2
from sluiceway.common.generations import generation_label
from sluiceway.common.log_context import bind_log_fields
from sluiceway.common.offsets import OffsetPair
from sluiceway.connect.config import ConfigException
from sluiceway.connect.config_providers import (
    ConfigProviders,
    ConfigProvidersError,
    ConfigReferenceError,
    hide_resolved,
)
from sluiceway.connect.restart_config import RestartPolicy
from sluiceway_executor.batch_traces import traced_batch
from sluiceway_executor.committer_opening import CommitterOpening
from sluiceway_executor.failures import FailureKind, classify
from sluiceway_executor.offset_commits import CommitOutcome, CommitStatus, CommitterFactory, OffsetCommitter
from sluiceway_executor.pipelines.idle import IDLE_AFTER_S, Idleness, IdleTracker
from sluiceway_executor.pipelines.pipeline import (
    BatchOutcome,
    Pipeline,
    PipelineFactory,
    PlansAhead,
    SchedulesHeartbeats,
    canonical,
)
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.restarts import Failure, Next, RestartSchedule, Step

__all__ = [
    "COUNTS_REPORT_INTERVAL_S",
    "DEFAULT_COMMIT_TIMEOUT_S",
    "CommitOutcome",
    "CommitRejected",
    "CommitStatus",
    "SessionKeeper",
    "TaskHost",
    "TaskRunner",
]

log = logging.getLogger(__name__)

DEFAULT_COMMIT_TIMEOUT_S: Final = 60.0
DEFAULT_POLL_INTERVAL_S: Final = 0.2
DEFAULT_MAX_POLL_INTERVAL_S: Final = 1.0
# The shortest time between two reports of a task's new skipped and dead-lettered counts.
COUNTS_REPORT_INTERVAL_S: Final = 5.0


class TaskHost(Protocol):
    """Where the runner reports to the control plane (the executor's agent, whichever attach stream
    is open) and its metrics. No call waits for the control plane or fails when it is unreachable."""

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
    ) -> None: ...

    def send_active_topics(self, spec: TaskSpec, topics: list[str]) -> None: ...

    def batch_committed(self, spec: TaskSpec, outcome: BatchOutcome, commit_seconds: float) -> None: ...


class SessionKeeper(Protocol):
    """The executor's Spark Connect session as the runner sees it (``spark_sessions.SparkSessions``):
    the session a new pipeline gets, a probe of it, and its replacement once it is lost."""

    def current(self) -> Any: ...

    def healthy(self, session: Any, timeout: float = ...) -> bool: ...

    def renew(self, broken: Any, cancel: threading.Event | None = None) -> Any | None: ...


class CommitRejected(Exception):  # noqa: N818 - names what happened, like CommitStatus.REJECTED
    """Kafka refused a batch's offset commit; ``transient`` when only Kafka's absence was at fault."""

    def __init__(self, error: str, *, transient: bool) -> None:
        super().__init__(error)
        self.transient = transient


class TaskRunner:
    """Runs one task assignment on its own thread until stopped or failed.

    ``predecessor`` is the runner of an earlier assignment of the same task: this runner first
    stops it (without committing: its generation is stale) and waits for it, so a task never runs
    twice at once on this executor; source offsets the predecessor committed carry over, as they
    are at least as recent as those the control plane put in this assignment.

    ``committer_factory`` builds the task's :class:`~sluiceway_executor.offset_commits.OffsetCommitter`.
    ``sessions`` lets a run that lost its Spark Connect session go on with a new one; without it such
    a run is tried again after a pause. ``counts_interval`` and ``clock`` pace count reports.
    """

    def __init__(
        self,
        spec: TaskSpec,
        host: TaskHost,
        factory: PipelineFactory,
        worker_config: Mapping[str, str],
        *,
        committer_factory: CommitterFactory,
        predecessor: TaskRunner | None = None,
        poll_interval: float = DEFAULT_POLL_INTERVAL_S,
        max_poll_interval: float = DEFAULT_MAX_POLL_INTERVAL_S,
        commit_timeout: float = DEFAULT_COMMIT_TIMEOUT_S,
        sessions: SessionKeeper | None = None,
        idle_after: float = IDLE_AFTER_S,
        counts_interval: float = COUNTS_REPORT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self._idle_after = idle_after
        self._sessions = sessions
        self._host = host
        self._factory = factory
        self._committer_factory = committer_factory
        self._worker_config = dict(worker_config)
        self._predecessor = predecessor
        self._poll_interval = poll_interval
        self._max_poll_interval = max(max_poll_interval, poll_interval)
        self._commit_timeout = commit_timeout
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._commit_allowed = True
        # KIP-558: topics already reported, so each is sent once (until a reset clears them).
        self._track_topics = worker_config.get("topic.tracking.enable", "true").strip().lower() == "true"
        self._reported_topics: set[str] = set()
        # Offsets this runner committed successfully, by canonical partition.
        self._committed: dict[str, OffsetPair] = {}
        # Each value a config reference was replaced by, kept out of failure traces (hide_resolved).
        self._substituted: dict[str, str] = {}
        self._thread = threading.Thread(target=self._run, name=f"task-{spec.name}", daemon=True)
        # When the current run reported RUNNING (None: it has not), and whether it completed a batch.
        self._running_since: float | None = None
        self._worked = False
        # The run's skipped and dead-lettered records; the counts last reported, and when (None: not
        # yet this run). The runner's thread alone uses them.
        self._counts_interval, self._clock = counts_interval, clock
        self._skipped = self._dead_lettered = 0
        self._sent_counts: tuple[int, int] = (0, 0)
        self._counts_sent_at: float | None = None
        self.failed = False
        # A commit came back FENCED: another executor runs the task now.
        self.fenced = False
        self.batches = 0

    @property
    def name(self) -> str:
        return self.spec.name

    def start(self) -> TaskRunner:
        self._thread.start()
        return self

    def stop(self, *, commit: bool) -> None:
        """Asks the task to stop after the batch in flight. With ``commit=False`` nothing more is
        committed, not even that batch (its data will be read and written again)."""
        with self._lock:
            if not commit:
                self._commit_allowed = False
            self._stopping.set()

    def join(self, timeout: float | None = None) -> bool:
        """Waits for the thread; True when it has ended."""
        if self._thread.ident is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def committed_offsets(self) -> list[OffsetPair]:
        """Source offsets committed by this runner (and carried over from its predecessors)."""
        with self._lock:
            return list(self._committed.values())

    # ------------------------------------------------------------------ the loop

    def _run(self) -> None:
        bind_log_fields(connector=self.spec.connector, task=self.spec.task_index)
        if self._predecessor is not None:
            self._predecessor.stop(commit=False)
            self._predecessor.join()
            carried = self._predecessor.committed_offsets()
            self._predecessor = None
            # Its offsets become this runner's: the first run starts from them, and a successor
            # takes them over in turn.
            with self._lock:
                self._committed.update({canonical(p): (p, o) for p, o in carried})
        if self._stopping.is_set():
            return
        if self.spec.paused:
            log.info("task %s (generation %s) is paused", self.name, generation_label(self.spec.generation))
            self._host.send_status(self.spec, common_pb2.STATE_PAUSED)
            self._stopping.wait()
            return
        try:
            policy = RestartPolicy.from_configs(self._worker_config, self.spec.connector_config)
        except ConfigException as exc:
            self._fail("its restart settings are malformed", f"Task {self.name} not started: {exc}")
            return
        schedule = RestartSchedule(policy, can_renew_session=self._sessions is not None)
        while not self._stopping.is_set():
            # Each run starts from the offsets committed so far (a source's are this runner's and
            # its predecessor's; a sink's are read back from Kafka by its new pipeline).
            self._start_from(self.committed_offsets())
            session = self._sessions.current() if self._sessions is not None else None
            failure = self._run_once(session)
            if failure is None:
                return
            if self._stopping.is_set():
                log.info("task %s failed while stopping (%s)\n%s", self.name, failure.what, failure.trace)
                return
            step = schedule.after(failure)
            if step.action is Next.GIVE_UP:
                self._fail(failure.what, failure.trace)
                return
            self._report_restarting(failure, step)
            if step.action is Next.RENEW_SESSION:
                assert self._sessions is not None
                if self._sessions.renew(session, cancel=self._stopping) is None:
                    return
            elif self._stopping.wait(step.delay):
                return

    def _report_restarting(self, failure: Failure, step: Step) -> None:
        trace = hide_resolved(failure.trace, self._substituted)
        if step.action is Next.RENEW_SESSION:
            plan = "running it again on a new Spark Connect session"
        elif step.attempt:
            plan = f"automatic restart {step.attempt} in {step.delay:.1f}s"
        else:
            plan = f"running it again in {step.delay:.1f}s, once its infrastructure answers"
        log.warning(
            "task %s (generation %s): %s (%s failure); %s\n%s",
            self.name,
            generation_label(self.spec.generation),
            failure.what,
            failure.kind.value,
            plan,
            trace,
        )
        next_ms = int((time.time() + step.delay) * 1000) if step.attempt else 0
        self._host.send_status(
            self.spec,
            common_pb2.STATE_RESTARTING,
            trace,
            restart_attempt=step.attempt,
            next_restart_ms=next_ms,
        )

    def _run_once(self, session: object | None) -> Failure | None:
        """One run of the task, from a new pipeline and committer to the end of its batch loop: None
        when it ended without failing (stopped, or taken over by another executor)."""
        self._running_since = None
        self._worked = False
        self._skipped = self._dead_lettered = 0
        self._sent_counts, self._counts_sent_at = (0, 0), None
        try:
            # The pipeline and the committer get the configs with their references resolved here, against
            # this executor's environment and files; self.spec keeps the raw assignment.
            resolved, self._substituted = self.spec.resolved(
                ConfigProviders.from_worker_config(self._worker_config)
            )
        except (ConfigReferenceError, ConfigProvidersError) as exc:
            return self._failure(
                "resolving the task's config references failed", f"Task {self.name} not started: {exc}"
            )
        try:
            pipeline = self._factory(resolved, self._worker_config)
        except Exception as exc:
            return self._failure("starting the task failed", traceback.format_exc(), exc, session)
        # The committer opens (a Kafka round trip or more) while the pipeline starts (for a sink,
        # reading what its files already hold).
        opening = CommitterOpening(
            self._committer_factory, resolved, self._worker_config, self._commit_timeout
        )
        began = time.monotonic()
        try:
            pipeline.start()
        except Exception as exc:
            failure = self._failure("starting the task failed", traceback.format_exc(), exc, session)
            self._stop_pipeline(pipeline)
            self._close_committer(opening.wait().committer)
            return failure
        pipeline_started = time.monotonic()
        committer: OffsetCommitter | None = None
        try:
            opened = opening.wait()
            committer = opened.committer
            try:
                if opened.error is not None:
                    raise opened.error
            except Exception as exc:
                # The committer gives up with TimeoutError when Kafka kept answering "try again".
                kind = FailureKind.INFRASTRUCTURE if isinstance(exc, TimeoutError) else None
                what = "opening the task's offset committer failed"
                return self._failure(what, traceback.format_exc(), exc, session, kind=kind)
            assert committer is not None, "opened without an error"
            log.debug(
                "task %s: pipeline started in %.3fs, committer opened in %.3fs (side by side)",
                self.name,
                pipeline_started - began,
                opened.seconds,
            )
            log.info("task %s started (generation %s)", self.name, generation_label(self.spec.generation))
            self._host.send_status(self.spec, common_pb2.STATE_RUNNING)
            self._running_since = time.monotonic()
            self._loop(pipeline, committer)
            return None
        except CommitRejected as exc:
            kind = FailureKind.INFRASTRUCTURE if exc.transient else FailureKind.TASK
            return self._failure("the offset commit failed", f"Offset commit failed: {exc}", kind=kind)
        except Exception as exc:
            return self._failure("a batch failed", traceback.format_exc(), exc, session)
        finally:
            self._close_committer(committer)
            self._stop_pipeline(pipeline)
            log.info("task %s stopped after %d batch(es)", self.name, self.batches)

    def _close_committer(self, committer: OffsetCommitter | None) -> None:
        if committer is None:
            return
        try:
            committer.close()
        except Exception:
            log.warning("closing the offset committer of task %s failed", self.name, exc_info=True)

    def _stop_pipeline(self, pipeline: Pipeline) -> None:
        try:
            pipeline.stop()
        except Exception:
            log.warning("stopping task %s failed", self.name, exc_info=True)

    def _failure(
        self,
        what: str,
        trace: str,
        exc: BaseException | None = None,
        session: object | None = None,
        *,
        kind: FailureKind | None = None,
    ) -> Failure:
        """The failure of this run; its kind, unless given, from ``exc`` (see failures.classify)."""
        if kind is None:
            sessions = self._sessions
            if exc is None:
                kind = FailureKind.TASK
            elif sessions is None or session is None:
                kind = classify(exc, lambda: True)
            else:
                kind = classify(exc, lambda: sessions.healthy(session))
        since = self._running_since
        ran_for = 0.0 if since is None else time.monotonic() - since
        return Failure(kind, what, trace, ran_for, self._worked)

    def _start_from(self, committed: list[OffsetPair]) -> None:
        """The next run's source offsets: the assignment's, overridden by ``committed``."""
        merged = {canonical(partition): (partition, offset) for partition, offset in self.spec.source_offsets}
        for partition, offset in committed:
            merged[canonical(partition)] = (partition, offset)
        self.spec = dataclasses.replace(self.spec, source_offsets=tuple(merged.values()))

    def _loop(self, pipeline: Pipeline, committer: OffsetCommitter) -> None:
        idle = self._poll_interval
        idleness = IdleTracker(self._idle_after)
        batch_id = 0
        while not self._stopping.is_set():
            started = time.monotonic()
            bind_log_fields(batch=batch_id)
            with traced_batch(self.spec, batch_id) as trace:
                outcome = pipeline.run_batch(batch_id)
                trace.ran(outcome)
                batch_id += 1
                self.batches = batch_id
                ran = time.monotonic()
                if not self._finish_batch(pipeline, committer, outcome):
                    return
                trace.committed()
            self._host.batch_committed(self.spec, outcome, time.monotonic() - ran)
            if idleness.observe(empty=outcome.empty, end_of_data=outcome.end_of_data):
                self._report_idleness(idleness.state)
            elif self._counts_due():
                self._report_running(idleness.state)
            ended = time.monotonic()
            if log.isEnabledFor(logging.DEBUG):
                steps = {**outcome.steps, "commit": ended - ran}
                log.debug(
                    "task %s batch %d: %s record(s), %d offset(s) in %.3fs (%s)",
                    self.name,
                    batch_id - 1,
                    "?" if outcome.records is None else outcome.records,
                    len(outcome.offsets),
                    ended - started,
                    ", ".join(f"{step} {seconds:.3f}s" for step, seconds in steps.items()),
                )
            if outcome.empty:
                self._stopping.wait(self._idle_pause(pipeline, idle))
                idle = min(idle * 2, self._max_poll_interval)
            else:
                idle = self._poll_interval

    def _report_idleness(self, state: Idleness | None) -> None:
        """RUNNING again, with why and since when the task is idle, or without (busy again)."""
        what = "has records to handle again" if state is None else f"is {state.detail}"
        log.info("task %s %s", self.name, what)
        self._report_running(state)

    def _counts_due(self) -> bool:
        """Whether the counts changed since last reported and may go out now: the first change at once,
        a later one ``counts_interval`` after the last report of new counts (or with an idleness one)."""
        sent_at = self._counts_sent_at
        if (self._skipped, self._dead_lettered) == self._sent_counts:
            return False
        return sent_at is None or self._clock() - sent_at >= self._counts_interval

    def _report_running(self, idle: Idleness | None) -> None:
        """RUNNING with the idle detail (``idle``; None while busy) and the record counts."""
        counts = (self._skipped, self._dead_lettered)
        if counts != self._sent_counts:
            self._sent_counts, self._counts_sent_at = counts, self._clock()
        self._host.send_status(
            self.spec,
            common_pb2.STATE_RUNNING,
            detail="" if idle is None else idle.detail,
            idle_since_ms=0 if idle is None else idle.since_ms,
            records_skipped=counts[0],
            records_dead_lettered=counts[1],
        )

    @staticmethod
    def _idle_pause(pipeline: Pipeline, idle: float) -> float:
        """The pause after an empty batch: ``idle``, or less when a heartbeat falls due sooner."""
        if isinstance(pipeline, SchedulesHeartbeats):
            left = pipeline.seconds_until_heartbeat()
            if left is not None:
                return min(idle, left)
        return idle

    def _finish_batch(self, pipeline: Pipeline, committer: OffsetCommitter, outcome: BatchOutcome) -> bool:
        """Commits the batch's offsets and reports its new topics; False when the task must end.
        Raises CommitRejected when Kafka refused the commit."""
        if outcome.offsets:
            with self._lock:
                allowed = self._commit_allowed
            if not allowed:
                log.info("task %s: stopping without committing its last batch", self.name)
                return False
            # The next batch is planned while this one commits (PlansAhead); nothing else touches
            # the pipeline until that plan is done.
            planning: threading.Thread | None = None
            if isinstance(pipeline, PlansAhead) and not self._stopping.is_set():
                planning = threading.Thread(
                    target=pipeline.plan_ahead, args=(outcome,), name=f"plan-{self.name}", daemon=True
                )
                planning.start()
            try:
                result: CommitOutcome = committer.commit(
                    list(outcome.offsets), self._commit_timeout, outcome.dead_letters
                )
            finally:
                if planning is not None:
                    planning.join()
            if result.status is CommitStatus.FENCED:
                self.fenced = True
                log.info(
                    "task %s (generation %s): another executor took the task over; stopping without "
                    "committing its last batch (%s)",
                    self.name,
                    generation_label(self.spec.generation),
                    result.error,
                )
                return False
            if result.status is CommitStatus.REJECTED:
                if self._stopping.is_set():
                    log.info("task %s: last commit refused while stopping: %s", self.name, result.error)
                    return False
                raise CommitRejected(result.error, transient=result.transient)
            with self._lock:
                self._committed.update({canonical(p): (p, o) for p, o in outcome.offsets})
            # Counted once committed: a batch whose commit failed is read again, failed records too.
            self._skipped += outcome.skipped
            self._dead_lettered += len(outcome.dead_letters)
            pipeline.committed(outcome)
        self._worked = True
        if self._track_topics:
            with self._lock:
                new_topics = sorted(set(outcome.topics) - self._reported_topics)
                self._reported_topics.update(new_topics)
            if new_topics:
                self._host.send_active_topics(self.spec, new_topics)
        return True

    def forget_reported_topics(self) -> None:
        """The connector's active topics were reset: report every topic again from the next batch."""
        with self._lock:
            self._reported_topics.clear()

    def _fail(self, what: str, trace: str) -> None:
        trace = hide_resolved(trace, self._substituted)
        self.failed = True
        log.error(
            "task %s (generation %s): %s\n%s", self.name, generation_label(self.spec.generation), what, trace
        )
        self._host.send_status(self.spec, common_pb2.STATE_FAILED, trace)
