"""A span for each batch a task runs (sluiceway.common.tracing), with a child span for its offset
commit. The span is made once the batch is over, from the times the runner noted: an idle task
runs an empty batch every poll interval, and those are left out rather than flooding the collector.
A batch that failed is always kept, marked failed with its exception. Spark fuses reading,
converting and writing into one job, so those appear as the pipeline's step seconds on the batch
span (``sluiceway.batch.<step>_seconds``), not as spans of their own."""

from __future__ import annotations

from types import TracebackType
from typing import Final

from sluiceway.common import tracing
from sluiceway_executor.pipelines.pipeline import BatchOutcome
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["BatchTrace", "traced_batch"]

BATCH_SPAN: Final = "sluiceway.batch"
COMMIT_SPAN: Final = "sluiceway.batch.commit"


class BatchTrace:
    """The runner's notes on one batch: when it began, ran and committed; the span is made on exit."""

    def __init__(self, spec: TaskSpec, batch_id: int) -> None:
        self._spec = spec
        self._batch_id = batch_id
        self._began = tracing.now_ns()
        self._ran: int | None = None
        self._committed: int | None = None
        self._outcome: BatchOutcome | None = None

    def ran(self, outcome: BatchOutcome) -> None:
        """The batch's data is durable; its offsets are committed next."""
        self._outcome, self._ran = outcome, tracing.now_ns()

    def committed(self) -> None:
        self._committed = tracing.now_ns()

    def __enter__(self) -> BatchTrace:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is None and not _worked(self._outcome):
            return
        ended = tracing.now_ns()
        span = tracing.start_span(BATCH_SPAN, attributes=self._attributes(), start_ns=self._began)
        if span is None:  # tracing was turned off meanwhile
            return
        if error is not None:
            span.record_exception(error)
            tracing.end_span(span, f"{type(error).__name__}: {error}", end_ns=ended)
            return
        if self._ran is not None and self._committed is not None:
            with tracing.current(span):
                commit = tracing.start_span(COMMIT_SPAN, attributes=self._names(), start_ns=self._ran)
            if commit is not None:
                tracing.end_span(commit, end_ns=self._committed)
        span.set_attribute("sluiceway.batch.committed", self._committed is not None)
        tracing.end_span(span, end_ns=ended)

    def _names(self) -> dict[str, str | int | float | bool]:
        return {
            tracing.ATTRIBUTE_CONNECTOR: self._spec.connector,
            tracing.ATTRIBUTE_TASK: self._spec.task_index,
            tracing.ATTRIBUTE_BATCH: self._batch_id,
        }

    def _attributes(self) -> dict[str, str | int | float | bool]:
        attributes = self._names()
        outcome = self._outcome
        if outcome is None:
            return attributes
        if outcome.records is not None:
            attributes["sluiceway.batch.records"] = outcome.records
        for side, tally in (("read", outcome.read), ("written", outcome.written)):
            if tally is not None:
                attributes[f"sluiceway.batch.records_{side}"] = tally.records
                if tally.bytes is not None:
                    attributes[f"sluiceway.batch.bytes_{side}"] = tally.bytes
        attributes["sluiceway.batch.offsets"] = len(outcome.offsets)
        if outcome.skipped:
            attributes["sluiceway.batch.records_skipped"] = outcome.skipped
        if outcome.dead_letters:
            attributes["sluiceway.batch.records_dead_lettered"] = len(outcome.dead_letters)
        for step, seconds in outcome.steps.items():
            attributes[f"sluiceway.batch.{step}_seconds"] = round(seconds, 6)
        return attributes


def _worked(outcome: BatchOutcome | None) -> bool:
    """Whether a batch moved anything: offsets to commit, records failed, or records counted (a
    batch that cannot tell its records counts as work)."""
    if outcome is None:
        return False
    if outcome.offsets or outcome.skipped or outcome.dead_letters:
        return True
    tallies = [tally.records for tally in (outcome.read, outcome.written) if tally is not None]
    if tallies:
        return any(tallies)
    return outcome.records != 0


class _NoTrace:
    """What the runner holds while tracing is off: every note is dropped at once."""

    def ran(self, outcome: BatchOutcome) -> None:
        pass

    def committed(self) -> None:
        pass

    def __enter__(self) -> _NoTrace:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        pass


_NO_TRACE: Final = _NoTrace()


def traced_batch(spec: TaskSpec, batch_id: int) -> BatchTrace | _NoTrace:
    """The notes of batch ``batch_id`` of ``spec``'s task; one shared do-nothing object while tracing
    is off, so an untraced executor allocates nothing per batch."""
    return BatchTrace(spec, batch_id) if tracing.tracing_on() else _NO_TRACE
