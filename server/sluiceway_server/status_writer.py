"""Connector and task statuses written to the status topic, for the herder (connectors) and the
executor coordinator (tasks)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from sluiceway.common.secrets import redact_url_credentials
from sluiceway_server.model import State
from sluiceway_server.storage import ConnectorStatusRecord, StatusStore, TaskStatusRecord
from sluiceway_server.storage.status_store import add_recent_error

log = logging.getLogger(__name__)


def _is_new_failure(current: TaskStatusRecord | None, record: TaskStatusRecord) -> bool:
    """Whether a task status adds to its error history: FAILED, or RESTARTING with a trace (a task
    waiting for an automatic restart, or for Spark Connect or Kafka to return), unless it repeats
    the status recorded now (an executor reporting its tasks again as it attaches)."""
    if not (record.state is State.FAILED or (record.state is State.RESTARTING and record.trace)):
        return False
    return current is None or (
        current.state,
        current.trace,
        current.generation,
        current.restart_attempt,
    ) != (record.state, record.trace, record.generation, record.restart_attempt)


def _redacted(text: str | None) -> str | None:
    return None if text is None else redact_url_credentials(text)


class StatusWriter:
    """The one writer of statuses in a control plane.

    It owns the rules a status record follows: a FAILED status, and a task's RESTARTING status with
    a trace, add an entry to the instance's bounded error history (kept across later states), a
    connector status carries this replica's id
    and its term as generation, and a write that would change nothing is skipped. It runs on the
    event loop; each store call runs in a worker thread and returns once the record has been read
    back from the status topic, so a read that follows sees it. Traces and messages are written with
    the credentials inside URLs redacted (`redact_url_credentials`), whoever reported them.
    """

    def __init__(self, status_store: StatusStore, worker_id: str, store_timeout: float = 30.0) -> None:
        self.store = status_store
        self.worker_id = worker_id
        self.store_timeout = store_timeout
        # This replica's leadership term: the generation of the connector statuses it writes.
        self.term = 0

    def previous_term(self) -> int:
        """The highest term recorded in the status topic. Connector statuses carry the term itself;
        task statuses carry assignment generations, whose high 32 bits are the term."""
        terms = [0]
        for connector in self.store.connectors():
            record = self.store.get_connector(connector)
            if record is not None:
                terms.append(record.generation)
            terms.extend(task.generation >> 32 for task in self.store.tasks(connector))
        return max(terms)

    async def put_connector(
        self, name: str, state: State, trace: str | None = None, message: str | None = None
    ) -> None:
        trace, message = _redacted(trace), _redacted(message)
        current = self.store.get_connector(name)
        history = current.recent_errors if current is not None else ()
        if state is State.FAILED:
            history = add_recent_error(history, trace, self.worker_id, message=message)
        record = ConnectorStatusRecord(name, state, trace, self.worker_id, self.term, history)
        if current == record:
            return
        await asyncio.to_thread(self.store.put_connector, record, self.store_timeout)

    async def put_task(
        self,
        connector: str,
        task: int,
        state: State,
        trace: str | None,
        worker_id: str,
        generation: int,
        worker_principal: str = "",
        *,
        restart_attempt: int = 0,
        next_restart_ms: int = 0,
        detail: str = "",
        idle_since_ms: int = 0,
        records_skipped: int = 0,
        records_dead_lettered: int = 0,
    ) -> None:
        """`worker_principal` is who the executor `worker_id` attached as, for a status it reported;
        `restart_attempt` and `next_restart_ms` describe the automatic restart a RESTARTING task
        waits for; `detail` and `idle_since_ms` why and since when a RUNNING task is idle;
        `records_skipped` and `records_dead_lettered` the records a RUNNING task left out, and
        wrote to its dead-letter topic, since it started."""
        trace = _redacted(trace)
        current = self.store.get_task(connector, task)
        history = current.recent_errors if current is not None else ()
        record = TaskStatusRecord(
            connector,
            task,
            state,
            trace,
            worker_id,
            generation,
            history,
            worker_principal=worker_principal,
            restart_attempt=restart_attempt,
            next_restart_ms=next_restart_ms,
            detail=detail,
            idle_since_ms=idle_since_ms,
            records_skipped=records_skipped,
            records_dead_lettered=records_dead_lettered,
        )
        if _is_new_failure(current, record):
            history = add_recent_error(history, trace, worker_id, message="task failed")
            record = dataclasses.replace(record, recent_errors=history)
        await asyncio.to_thread(self.store.put_task, record, self.store_timeout)

    async def remove_task_statuses(self, connector: str, keep: int) -> None:
        """Tombstone the statuses of the connector's tasks numbered `keep` and up."""
        for record in self.store.tasks(connector):
            if record.task >= keep:
                await asyncio.to_thread(self.store.remove_task, connector, record.task, self.store_timeout)

    async def remove_connector(self, connector: str) -> None:
        """Tombstone the statuses of a deleted connector and of its tasks (its active topics are
        the ActiveTopicTracker's)."""
        if self.store.get_connector(connector) is not None or self.store.tasks(connector):
            await asyncio.to_thread(self.store.remove_connector, connector, self.store_timeout)
