"""Released tasks on their way back to the planner: each is recorded UNASSIGNED under a new
generation and, when its executor may still be running it, fenced, before it may be placed again;
and the coordinator's status writes in the background, which its stop() waits for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Final

from sluiceway.common.retry import RetryPolicy
from sluiceway_server.cluster.members import LIVE_STATES, desired_tasks
from sluiceway_server.model import ConnectorType, State, TaskId
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage.task_fencing import TaskFencer

log = logging.getLogger(__name__)

# Fencing released tasks again, until it succeeds (they may not be placed before) or the term ends.
_FENCE_RETRY: Final = RetryPolicy(initial=0.5, maximum=10.0)

Background = Callable[[Coroutine[Any, Any, None], str, str], "asyncio.Task[None]"]


class BackgroundWrites:
    """Status writes run as tasks of their own, so a caller that is cancelled (a stream's teardown)
    does not cut one short; `wait` returns once every one has finished. A failure is logged."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None], name: str, what: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                log.warning("%s failed: %s", what, finished.exception())

        task.add_done_callback(done)
        return task

    async def wait(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


class Releases:
    """The coordinator's released tasks that may not be placed yet (`held`), and the generation
    each task was last released under in this term.

    `hold` records the tasks UNASSIGNED through `background` (status writes the coordinator's
    stop() waits for) and then, with `fence`, fences them through the TaskFencer, retrying until it
    succeeds or the task's connector is gone; stop() cancels that. When a batch of tasks is free
    again, `on_free` is called (the coordinator wakes its waiters and rebalances). Runs on the
    event loop.
    """

    def __init__(
        self,
        *,
        status: StatusWriter,
        snapshot: Callable[[], Any],
        connector_type: Callable[[Mapping[str, str]], ConnectorType],
        fencer: TaskFencer | None,
        background: Background,
        next_generation: Callable[[], int],
        on_free: Callable[[], None],
    ) -> None:
        self._status = status
        self._snapshot = snapshot
        self._connector_type = connector_type
        self.fencer = fencer
        self._background = background
        self._next_generation = next_generation
        self._on_free = on_free
        # Released tasks not yet placeable, by the executor they were released from.
        self.held: dict[TaskId, str] = {}
        self._generations: dict[TaskId, int] = {}
        self._fences: set[asyncio.Task[None]] = set()
        self._stopping = False

    def floor(self, task: TaskId) -> int:
        """The latest generation the task was recorded or released under: an executor that reports
        it under an older one on attach no longer holds it."""
        record = self._status.store.get_task(task.connector, task.task)
        return max(record.generation if record else 0, self._generations.get(task, 0))

    def hold(self, tasks: Mapping[TaskId, str], *, fence: bool, why: str) -> None:
        """Keep these tasks (task → the executor released from) from being placed until each that
        is still desired is recorded UNASSIGNED under a new generation and, with `fence`, each whose
        connector still exists is fenced."""
        if not tasks:
            self._on_free()
            return
        generations = {task: self._next_generation() for task in tasks}
        self._generations.update(generations)
        self.held.update(tasks)

        async def record() -> None:
            try:
                for task, worker in tasks.items():
                    # The statuses of a stopped or deleted connector's tasks are removed by the
                    # herder (as are those past a shrunk task set): none is written back for them.
                    if task in desired_tasks(self._snapshot()):
                        await self._status.put_task(
                            task.connector, task.task, State.UNASSIGNED, None, worker, generations[task]
                        )
            finally:
                if fence and self.fencer is not None and not self._stopping:
                    fencing = asyncio.get_running_loop().create_task(
                        self._fence(self.fencer, set(tasks), why), name=f"fence-{why}"
                    )
                    self._fences.add(fencing)
                    fencing.add_done_callback(self._fences.discard)
                else:
                    self._free(tasks)

        self._background(record(), f"release-{why}", f"recording the tasks of {why} as UNASSIGNED")

    def hold_leftovers(self, unplaced: Iterable[TaskId], members: Mapping[str, object]) -> list[TaskId]:
        """Of these unplaced tasks, hold (and fence) those the status topic shows RUNNING or PAUSED
        on an executor that is not a member (one that ran them under an earlier leader and has not
        come back), and return them."""
        store = self._status.store
        leftovers: dict[TaskId, str] = {}
        for task in unplaced:
            record = store.get_task(task.connector, task.task)
            if record is not None and record.state in LIVE_STATES and record.worker_id not in members:
                leftovers[task] = record.worker_id
        if leftovers:
            log.info(
                "fencing %s before placing them: the status topic shows them on executors not attached",
                [t.name for t in leftovers],
            )
            self.hold(leftovers, fence=True, why="tasks of executors not attached")
        return list(leftovers)

    def _free(self, tasks: Iterable[TaskId]) -> None:
        for task in tasks:
            self.held.pop(task, None)
        self._on_free()

    async def _fence(self, fencer: TaskFencer, tasks: set[TaskId], why: str) -> None:
        pending = set(tasks)
        retry = _FENCE_RETRY.start()
        try:
            while pending:
                failures: list[tuple[list[TaskId], Exception]] = []
                for connector in sorted({t.connector for t in pending}):
                    chosen = sorted(t for t in pending if t.connector == connector)
                    config = self._snapshot().connector_config(connector)
                    if config is None:
                        pending.difference_update(chosen)  # deleted: nothing will run them again
                        continue
                    try:
                        await fencer.fence(
                            connector,
                            config,
                            [t.task for t in chosen],
                            source=self._connector_type(config) is ConnectorType.SOURCE,
                        )
                    except Exception as exc:
                        failures.append((chosen, exc))
                    else:
                        pending.difference_update(chosen)
                if pending:
                    delay = retry.next_delay()
                    assert delay is not None  # the policy has neither a deadline nor an attempt limit
                    for failed, error in failures:
                        log.warning(
                            "fencing %s (%s) failed, retrying in %.1fs: %s",
                            [t.name for t in failed],
                            why,
                            delay,
                            error,
                        )
                    await asyncio.sleep(delay)
        finally:
            self._free(tasks)

    async def stop(self) -> None:
        """Stop fencing: tasks still held stay unplaced (the coordinator is going away)."""
        self._stopping = True
        fences = list(self._fences)
        for task in fences:
            task.cancel()
        await asyncio.gather(*fences, return_exceptions=True)
