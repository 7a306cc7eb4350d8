"""Fencing the offset commits of tasks.

Executors commit a task's offsets through a transactional producer whose `transactional.id` is
`task_transactional_id(group.id, connector, task)`, on the cluster `offset_commit_config` names.
Calling `init_transactions` on a new producer with the same id bumps the id's epoch: the broker then
refuses every later commit of the producer that held it (and aborts a transaction it left open).
The control plane does this before a task can run elsewhere after its executor was declared dead,
and before KIP-875 changes a stopped connector's offsets, so that an executor that still runs such
a task cannot commit over what comes next.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from confluent_kafka import KafkaException, Producer

from sluiceway.common.kafka_errors import error_of, transient_exception
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway.connect.config_providers import ConfigProviders, ConfigProvidersError
from sluiceway.connect.kafka_clients import connect_first, offset_commit_config, task_transactional_id
from sluiceway_server.config import DEFAULTS
from sluiceway_server.storage.status_store import StatusStore

log = logging.getLogger(__name__)

# init_transactions again after an error that passes by itself (a connection the broker dropped, a
# transaction coordinator moving or loading, a concurrent transaction being aborted), within the
# fencer's timeout for the task.
_RETRY: Final = RetryPolicy(initial=0.2, maximum=0.2, transient=transient_exception)
ProducerFactory = Callable[[dict[str, Any]], Producer]


class TaskFencer:
    """Takes over the transactional ids of tasks, fencing whoever held them.

    Each `fence` runs in a worker thread (never on the event loop): for each task in turn, a fresh
    producer with the task's transactional id calls `init_transactions`, retrying retriable errors
    until `timeout` has passed for that task, and is closed. It raises the Kafka error (or
    TimeoutError) of the first task it could not fence; the tasks before it stay fenced. Fencing a
    task that nobody holds is harmless: the id's epoch just moves on.
    """

    def __init__(
        self,
        worker_config: Mapping[str, str],
        *,
        status_store: StatusStore | None = None,
        timeout: float = 30.0,
        producer_factory: ProducerFactory = Producer,
    ) -> None:
        self.worker_config = dict(worker_config)
        self.group_id = self.worker_config.get("group.id") or DEFAULTS["group.id"]
        try:
            # The connector's client overrides may be ${provider:path:key} references.
            self._providers = ConfigProviders.from_worker_config(worker_config)
        except ConfigProvidersError:
            self._providers = ConfigProviders()  # WorkerConfig.validate reports the key
        self._status_store = status_store
        self.timeout = timeout
        self._producer_factory = producer_factory

    async def fence(
        self, connector: str, connector_config: Mapping[str, str], tasks: Iterable[int], *, source: bool
    ) -> None:
        """Fence these tasks of the connector; returns once every one of them is fenced."""
        numbers = sorted(set(tasks))
        if not numbers:
            return
        await asyncio.to_thread(self._fence_all, connector, connector_config, numbers, source)

    async def fence_connector(
        self, connector: str, connector_config: Mapping[str, str], *, task_count: int, source: bool
    ) -> list[int]:
        """Fence every task of the connector that may have committed, and return their numbers:
        0 up to the largest of `task_count`, the connector's `tasks.max` and the highest task number
        with a status record plus one. (A stopped connector has no task configs and no task
        statuses left, so `tasks.max` is what still bounds the tasks it ran, unless it was lowered
        since.)"""
        count = max(task_count, _tasks_max(self._providers.try_resolve(connector_config).config))
        if self._status_store is not None:
            count = max(count, *(record.task + 1 for record in self._status_store.tasks(connector)), 0)
        numbers = list(range(count))
        await self.fence(connector, connector_config, numbers, source=source)
        return numbers

    def _fence_all(
        self, connector: str, connector_config: Mapping[str, str], numbers: list[int], source: bool
    ) -> None:
        resolved = self._providers.try_resolve(connector_config).config
        settings = offset_commit_config(self.worker_config, resolved, source=source)
        started = time.monotonic()
        for number in numbers:
            self._fence_one(task_transactional_id(self.group_id, connector, number), settings)
        log.info(
            "fenced the offset commits of %d task(s) of connector %s in %.2fs",
            len(numbers),
            connector,
            time.monotonic() - started,
        )

    def _fence_one(self, transactional_id: str, settings: Mapping[str, str]) -> None:
        deadline = Deadline(self.timeout)
        producer = self._producer_factory(
            {
                **settings,
                "transactional.id": transactional_id,
                "client.id": f"sluiceway-fence-{transactional_id}",
                "logger": log,
            }
        )
        try:
            connect_first(producer, deadline.remaining())
            retry = _RETRY.start(deadline)
            while True:
                try:
                    producer.init_transactions(deadline.remaining(at_least=0.1))
                    log.debug("fenced transactional id %s", transactional_id)
                    return
                except KafkaException as exc:
                    if not retry.again(exc):
                        raise
                    log.info(
                        "fencing transactional id %s failed (%s); retrying", transactional_id, error_of(exc)
                    )
        finally:
            producer.close()


def _tasks_max(connector_config: Mapping[str, str]) -> int:
    try:
        return max(int(connector_config.get("tasks.max", "1").strip()), 0)
    except ValueError:
        return 1
