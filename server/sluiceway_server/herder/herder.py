"""The herder: connector lifecycle on top of the Kafka-backed stores (the job of Kafka Connect's
DistributedHerder). Leader election is not built: the replica acts as the leader of its group.

Mutations write records to the config topic and wait until they are read back; the
replica then *reconciles* each connector — the plugin instance, its task configs and its
status — towards what the config topic says. Reconciliation is idempotent and is also
driven by config-topic updates, so whoever wrote a record, the outcome is the same.
Per-connector locks keep one connector's slow plugin from blocking the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Protocol, TypeVar

from sluiceway.connect.plugins import PluginDesc, PluginNotFoundError, PluginRegistry, PluginType
from sluiceway.connect.validation import ConfigInfos, password_keys, validate_connector_config
from sluiceway_server.herder.connector_instance import ConnectorInstance, InstanceState, PluginCallbackError
from sluiceway_server.herder.errors import (
    AlreadyExistsError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    RequestTimeoutError,
    UnavailableError,
    connector_not_found,
)
from sluiceway_server.herder.views import (
    ConnectorInfo,
    ConnectorStatusView,
    InstanceStatusView,
    RestartPlan,
    TaskConfigView,
    TaskStatusView,
)
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import (
    ClusterConfigState,
    ConfigStore,
    ConnectorStatusRecord,
    ErrorEntry,
    RestartRequest,
    StatusChange,
    StatusStore,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

# Kafka masks password values with this literal.
HIDDEN = "[hidden]"
MAX_RECENT_ERRORS = 10
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# What a request is doing, shared by the request and the tasks it spawns (contexts are copied,
# the trail object is not). A stage may be a callable: the request then reports what the
# connector's reconciliation is doing.
Stage = str | Callable[[], str]


class _StageTrail:
    def __init__(self) -> None:
        self.stages: list[Stage] = ["processing the request"]
        # The innermost stage when the deadline cancelled the request (the stack unwinds after).
        self.at_cancel: str | None = None


def _render(item: Stage) -> str:
    return item() if callable(item) else item


_trail: contextvars.ContextVar[_StageTrail | None] = contextvars.ContextVar("stage_trail", default=None)


@contextlib.contextmanager
def stage(description: Stage) -> Iterator[None]:
    """Names what a request is doing, for the DEADLINE_EXCEEDED message (Kafka's TickThreadStage)."""
    trail = _trail.get()
    if trail is None:
        yield
        return
    trail.stages.append(description)
    try:
        yield
    except asyncio.CancelledError:
        if trail.at_cancel is None:
            trail.at_cancel = _render(description)
        raise
    finally:
        trail.stages.pop()


def validate_connector_name(name: str, field: str) -> None:
    """Kafka's rules (non-empty, no ISO control characters) plus no '/' so resource names stay unambiguous."""
    problem = None
    if not name or not name.strip():
        problem = "must not be empty or blank"
    elif name != name.strip():
        problem = "must not start or end with whitespace"
    elif _CONTROL_CHARS.search(name):
        problem = "must not contain ISO control characters"
    elif "/" in name:
        problem = "must not contain '/'"
    elif len(name) > 249:
        problem = "must be at most 249 characters"
    if problem:
        raise InvalidArgumentError(
            f"Invalid connector name {name!r}: {problem}",
            reason="INVALID_REQUEST",
            violations=[FieldViolation(field, f"connector name {problem}")],
        )


class TaskScheduler(Protocol):
    """What the herder needs from the executor coordinator (absent until it is wired)."""

    def request_rebalance(self) -> None: ...

    def restart_tasks(self, connector: str, tasks: Sequence[int]) -> None: ...

    def forget_connector(self, connector: str) -> None: ...


class Herder:
    def __init__(
        self,
        *,
        worker_id: str,
        config_store: ConfigStore,
        status_store: StatusStore,
        plugins: PluginRegistry,
        plugin_timeout: float,
        store_timeout: float = 30.0,
    ) -> None:
        self.worker_id = worker_id
        self.config_store = config_store
        self.status_store = status_store
        self.plugins = plugins
        self.plugin_timeout = plugin_timeout
        self.store_timeout = store_timeout
        self.generation = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._instances: dict[str, ConnectorInstance] = {}
        self._pending_restarts: dict[str, RestartPlan] = {}
        self._reconfigure_requested: set[str] = set()
        self._retry_backoff: dict[str, float] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._subscribers: set[asyncio.Queue[StatusChange]] = set()
        # What each connector's reconciliation is doing now, for DEADLINE_EXCEEDED messages.
        self._activity: dict[str, str] = {}
        self._stopping = False
        self.scheduler: TaskScheduler | None = None

    # ------------------------------------------------------------------ life cycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        # A generation above every one recorded, so statuses of earlier runs read as older.
        self.generation = self._previous_term() + 1
        self.status_store.add_listener(lambda change: self._post(lambda: self._fan_out(change)))
        # Listen only after the initial read: restart requests already in the log are history.
        self.config_store.set_listener(self)
        for name in self.config_store.snapshot().connectors():
            self._schedule(name)

    async def stop(self) -> None:
        self._stopping = True
        self.config_store.set_listener(None)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for name in list(self._instances):
            instance = self._instances.pop(name)
            try:
                await instance.stop()
            except PluginCallbackError as exc:
                log.warning("stopping %s on shutdown: %s", name, exc)

    def _previous_term(self) -> int:
        """The highest leadership term recorded in the status topic. Connector statuses carry the
        term itself; task statuses carry assignment generations, whose high 32 bits are the term."""
        terms = [0]
        for connector in self.status_store.connectors():
            record = self.status_store.get_connector(connector)
            if record is not None:
                terms.append(record.generation)
            terms.extend(task.generation >> 32 for task in self.status_store.tasks(connector))
        return max(terms)

    # ------------------------------------------------------------------ status watchers

    def subscribe(self) -> asyncio.Queue[StatusChange]:
        """Status changes from now on; pair with unsubscribe(). Slow readers lose nothing (unbounded)."""
        queue: asyncio.Queue[StatusChange] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[StatusChange]) -> None:
        self._subscribers.discard(queue)

    def _fan_out(self, change: StatusChange) -> None:
        for queue in self._subscribers:
            queue.put_nowait(change)

    # ------------------------------------------------------------------ config listener (consumer thread)

    def _post(self, fn: Callable[[], object]) -> None:
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(fn)

    def on_connector_config_update(self, connector: str) -> None:
        self._post(lambda: self._schedule(connector))

    def on_connector_config_remove(self, connector: str) -> None:
        self._post(lambda: self._schedule(connector))

    def on_task_config_update(self, connector: str) -> None:
        self._post(lambda: self._schedule(connector))

    def on_target_state_change(self, connector: str) -> None:
        self._post(lambda: self._schedule(connector))

    def on_restart_request(self, request: RestartRequest) -> None:
        def register() -> None:
            self._pending_restarts[request.connector] = self.restart_plan(
                request.connector, request.include_tasks, request.only_failed
            )
            self._schedule(request.connector)

        self._post(register)

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> ClusterConfigState:
        return self.config_store.snapshot()

    async def wait_for_position(self, position: int, timeout: float) -> None:
        """Read-your-writes: wait until this replica has applied the config log up to `position`."""
        if position <= self.snapshot().position:
            return
        with stage(f"reading the config topic up to position {position}"):
            await self._blocking(lambda: self.config_store.read_to_end(timeout))
        if self.snapshot().position < position:
            raise UnavailableError(
                f"This replica has applied the config log up to {self.snapshot().position}, "
                f"not {position} yet"
            )

    def connector_names(self) -> list[str]:
        return self.snapshot().connectors()

    def connector_type(self, config: Mapping[str, str]) -> ConnectorType:
        try:
            desc = self.plugins.resolve(config.get("connector.class", ""))
        except PluginNotFoundError:
            return ConnectorType.UNKNOWN
        return ConnectorType.SOURCE if desc.type is PluginType.SOURCE else ConnectorType.SINK

    def connector_info(self, name: str) -> ConnectorInfo:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        return ConnectorInfo(
            name=name,
            config=self.masked(config, config),
            type=self.connector_type(config),
            tasks=tuple(range(len(snap.tasks(name)))),
            target_state=snap.target_state(name) or TargetState.STARTED,
            config_position=snap.position,
        )

    def masked(self, values: Mapping[str, str], connector_config: Mapping[str, str]) -> dict[str, str]:
        """Password-typed values of the connector's plugin replaced by Kafka's "[hidden]"."""
        try:
            secret = password_keys(self.plugins, connector_config)
        except Exception:  # an uninstalled plugin must not make the config unreadable
            secret = set()
        return {k: (HIDDEN if k in secret else v) for k, v in values.items()}

    def task_configs(self, name: str) -> list[TaskConfigView]:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        return [TaskConfigView(name, n, self.masked(task, config)) for n, task in enumerate(snap.tasks(name))]

    def connector_status(self, name: str) -> ConnectorStatusView:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        record = self.status_store.get_connector(name)
        connector = InstanceStatusView(State.UNASSIGNED) if record is None else InstanceStatusView.of(record)
        tasks = tuple(self._task_view(name, n) for n in range(len(snap.tasks(name))))
        return ConnectorStatusView(name, self.connector_type(config), connector, tasks)

    def task_status(self, name: str, task: int) -> TaskStatusView:
        snap = self.snapshot()
        if snap.connector_config(name) is None:
            raise connector_not_found(name)
        if not 0 <= task < len(snap.tasks(name)):
            raise NotFoundError(
                f"Task {task} of connector {name} not found",
                reason="TASK_NOT_FOUND",
                metadata={"connector": name, "task": str(task)},
            )
        return self._task_view(name, task)

    def _task_view(self, name: str, task: int) -> TaskStatusView:
        # A task with no status record has not been picked up by an executor: UNASSIGNED.
        record = self.status_store.get_task(name, task)
        if record is None:
            return TaskStatusView(name, task, InstanceStatusView(State.UNASSIGNED))
        return TaskStatusView(name, task, InstanceStatusView.of(record))

    def validate(self, config: Mapping[str, str], plugin: str | None = None) -> ConfigInfos:
        return validate_connector_config(self.plugins, config, plugin)

    def plugin(self, name: str) -> PluginDesc:
        try:
            return self.plugins.resolve(name)
        except PluginNotFoundError as exc:
            raise NotFoundError(str(exc), reason="PLUGIN_NOT_FOUND", metadata={"plugin": name}) from exc

    # ------------------------------------------------------------------ mutations

    def _check_config(self, name: str, config: Mapping[str, str]) -> None:
        infos = self.validate(config)
        if infos.error_count:
            violations = [
                FieldViolation(key, message)
                for key, messages in infos.errors().items()
                for message in messages
            ]
            summary = "; ".join(f"{v.field}: {v.description}" for v in violations)
            raise InvalidArgumentError(
                f"Config of connector {name} has {infos.error_count} error(s): {summary}",
                reason="INVALID_CONFIG",
                violations=violations,
                metadata={"connector": name, "error_count": str(infos.error_count)},
            )

    @staticmethod
    def _with_name(name: str, config: Mapping[str, str], field: str) -> dict[str, str]:
        if "name" in config and config["name"] != name:
            raise InvalidArgumentError(
                f"The config's name {config['name']!r} differs from the connector name {name!r} "
                "of the request",
                reason="INVALID_CONFIG",
                violations=[FieldViolation("name", f"must equal the connector name {name!r} ({field})")],
            )
        return {**config, "name": name}

    async def create_connector(
        self, name: str, config: Mapping[str, str], initial_state: TargetState, validate_only: bool = False
    ) -> ConnectorInfo:
        validate_connector_name(name, "connector_id")
        full = self._with_name(name, config, "connector_id")
        async with self._locks[name]:
            if self.snapshot().contains(name):
                raise AlreadyExistsError(f"Connector {name} already exists", metadata={"connector": name})
            with stage("validating the connector configuration"):
                await self._blocking(lambda: self._check_config(name, full))
            if validate_only:
                return ConnectorInfo(
                    name,
                    self.masked(full, full),
                    self.connector_type(full),
                    (),
                    initial_state,
                    self.snapshot().position,
                )
            with stage("writing the connector configuration to the config topic"):
                # KIP-980: a non-default initial state is written before the config.
                state = None if initial_state is TargetState.STARTED else initial_state
                await self._blocking(
                    lambda: self.config_store.put_connector_config(name, full, state, self.store_timeout)
                )
        await self._reconcile_now(name)
        return self.connector_info(name)

    async def replace_connector_config(
        self, name: str, config: Mapping[str, str]
    ) -> tuple[ConnectorInfo, bool]:
        validate_connector_name(name, "name")
        full = self._with_name(name, config, "name")
        async with self._locks[name]:
            created = not self.snapshot().contains(name)
            with stage("validating the connector configuration"):
                await self._blocking(lambda: self._check_config(name, full))
            with stage("writing the connector configuration to the config topic"):
                await self._blocking(
                    lambda: self.config_store.put_connector_config(name, full, None, self.store_timeout)
                )
        await self._reconcile_now(name)
        return self.connector_info(name), created

    async def patch_connector_config(
        self, name: str, set_values: Mapping[str, str], remove: Sequence[str]
    ) -> ConnectorInfo:
        async with self._locks[name]:
            current = self.snapshot().connector_config(name)
            if current is None:
                raise connector_not_found(name)
            if "name" in remove or ("name" in set_values and set_values["name"] != name):
                raise InvalidArgumentError(
                    f"A patch cannot change or remove the 'name' of connector {name}",
                    reason="INVALID_CONFIG",
                    violations=[FieldViolation("name", "cannot be changed or removed by a patch")],
                )
            patched = {k: v for k, v in current.items() if k not in set(remove)}
            patched.update(set_values)
            with stage("validating the connector configuration"):
                await self._blocking(lambda: self._check_config(name, patched))
            if patched != dict(current):
                with stage("writing the connector configuration to the config topic"):
                    await self._blocking(
                        lambda: self.config_store.put_connector_config(
                            name, patched, None, self.store_timeout
                        )
                    )
        await self._reconcile_now(name)
        return self.connector_info(name)

    async def delete_connector(self, name: str) -> None:
        async with self._locks[name]:
            if not self.snapshot().contains(name):
                raise connector_not_found(name)
            with stage("writing the connector tombstone to the config topic"):
                await self._blocking(
                    lambda: self.config_store.remove_connector_config(name, self.store_timeout)
                )
        await self._reconcile_now(name)

    async def set_target_state(self, name: str, target: TargetState) -> ConnectorInfo:
        async with self._locks[name]:
            snap = self.snapshot()
            if not snap.contains(name):
                raise connector_not_found(name)
            if target is TargetState.STOPPED:
                # As Kafka does: empty task set first, so a crash in between leaves a RUNNING connector
                # without tasks rather than a STOPPED one with tasks.
                with stage("writing an empty set of task configs to the config topic"):
                    await self._blocking(
                        lambda: self.config_store.put_task_configs(name, [], self.store_timeout)
                    )
            with stage(f"writing the {target.value} target state to the config topic"):
                await self._blocking(
                    lambda: self.config_store.put_target_state(name, target, self.store_timeout)
                )
        await self._reconcile_now(name)
        return self.connector_info(name)

    def restart_plan(self, name: str, include_tasks: bool, only_failed: bool) -> RestartPlan:
        snap = self.snapshot()
        record = self.status_store.get_connector(name)
        restart_connector = not only_failed or (record is not None and record.state is State.FAILED)
        tasks: list[int] = []
        if include_tasks:
            for n in range(len(snap.tasks(name))):
                task = self.status_store.get_task(name, n)
                if not only_failed or (task is not None and task.state is State.FAILED):
                    tasks.append(n)
        return RestartPlan(name, restart_connector, tuple(tasks))

    async def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> ConnectorStatusView:
        """KIP-745. Returns the status as planned: what restarts shows RESTARTING."""
        async with self._locks[name]:
            if not self.snapshot().contains(name):
                raise connector_not_found(name)
            plan = self.restart_plan(name, include_tasks, only_failed)
            with stage("writing the restart request to the config topic"):
                await self._blocking(
                    lambda: self.config_store.put_restart_request(
                        name, include_tasks, only_failed, self.store_timeout
                    )
                )
            # The config listener registers the plan when it reads the record back; the reconcile
            # below (or the one the listener scheduled) carries it out exactly once.
        current = self.connector_status(name)
        restarting = InstanceStatusView(
            State.RESTARTING, self.worker_id, None, self.generation, update_time_ms=int(time.time() * 1000)
        )
        planned = ConnectorStatusView(
            name,
            current.type,
            restarting if plan.restart_connector else current.connector,
            tuple(
                TaskStatusView(name, t.task, restarting) if t.task in plan.tasks else t for t in current.tasks
            ),
        )
        await self._reconcile_now(name)
        return planned

    async def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)  # NOT_FOUND for unknown connector or task
        # Its executor restarts it under a new generation; a task no executor runs has nothing to restart.
        if self.scheduler is not None:
            self.scheduler.restart_tasks(name, [task])

    # ------------------------------------------------------------------ reconciliation

    async def _blocking(self, fn: Callable[[], T]) -> T:
        """Run a blocking store call off the event loop."""
        return await asyncio.to_thread(fn)

    def _schedule(self, name: str, delay: float = 0.0) -> asyncio.Task[None]:
        async def run() -> None:
            if delay:
                await asyncio.sleep(delay)
            await self._reconcile_locked(name)

        task = asyncio.get_running_loop().create_task(run(), name=f"reconcile-{name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _reconcile_now(self, name: str) -> None:
        """Reconcile in a task of its own: a caller's deadline stops the wait, never the work half-way."""
        with stage(lambda: self._activity.get(name, "applying the change to the connector")):
            await asyncio.shield(self._schedule(name))

    @contextlib.contextmanager
    def _doing(self, name: str, description: str) -> Iterator[None]:
        previous = self._activity.get(name)
        self._activity[name] = description
        try:
            yield
        finally:
            if previous is None:
                self._activity.pop(name, None)
            else:
                self._activity[name] = previous

    async def _reconcile_locked(self, name: str) -> None:
        if self._stopping:
            return
        try:
            async with self._locks[name]:
                await self._reconcile(name)
            if self.scheduler is not None:
                self.scheduler.request_rebalance()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Store unavailable and the like: try again shortly rather than lose the change.
            delay = min(self._retry_backoff.get(name, 0.25) * 2, 30.0)
            self._retry_backoff[name] = delay
            log.exception("reconciling connector %s failed; retrying in %.1fs", name, delay)
            if not self._stopping:
                self._schedule(name, delay)
        else:
            self._retry_backoff.pop(name, None)

    async def _reconcile(self, name: str) -> None:
        snap = self.snapshot()
        config = snap.connector_config(name)
        instance = self._instances.get(name)
        # Read, not popped: if this reconcile fails before acting on it, the retry still restarts.
        restart = self._pending_restarts.get(name)

        if config is None:
            self._pending_restarts.pop(name, None)
            if self.scheduler is not None:
                self.scheduler.forget_connector(name)
            if instance is not None:
                await self._stop_instance(name)
            if self.status_store.get_connector(name) is not None or self.status_store.tasks(name):
                await self._blocking(lambda: self.status_store.remove_connector(name, self.store_timeout))
            if self.status_store.topics(name):
                await self._blocking(lambda: self.status_store.remove_topics(name, self.store_timeout))
            return

        target = snap.target_state(name) or TargetState.STARTED
        if restart is not None and restart.restart_connector:
            await self._put_connector_status(name, State.RESTARTING)
            if instance is not None:
                await self._stop_instance(name)
                instance = None
        if restart is not None:
            self._pending_restarts.pop(name, None)
            if restart.tasks and self.scheduler is not None:
                self.scheduler.restart_tasks(name, restart.tasks)
        if instance is not None and instance.config != dict(config):
            log.info("connector %s reconfigured; restarting it", name)
            await self._stop_instance(name)
            instance = None

        if target is TargetState.STOPPED:
            if instance is not None:
                await self._stop_instance(name)
            if snap.tasks(name):
                await self._blocking(lambda: self.config_store.put_task_configs(name, [], self.store_timeout))
            await self._put_connector_status(name, State.STOPPED)
            await self._remove_task_statuses(name, 0)
            return
        if target is TargetState.PAUSED:
            if instance is not None:
                await self._stop_instance(name)
            await self._put_connector_status(name, State.PAUSED)
            return

        # STARTED
        fresh = False
        if instance is None:
            instance = await self._start_instance(name, config)
            if instance is None:
                return
            fresh = True
        if instance.state is not InstanceState.STARTED:
            return  # FAILED stays FAILED until restarted, stopped or reconfigured
        if (
            fresh
            or name in self._reconfigure_requested
            or (snap.tasks(name) == () and name in snap.inconsistent)
        ):
            self._reconfigure_requested.discard(name)
            await self._publish_task_configs(name, instance, config, snap)

    async def _start_instance(self, name: str, config: Mapping[str, str]) -> ConnectorInstance | None:
        try:
            desc = self.plugins.resolve(config.get("connector.class", ""))
        except PluginNotFoundError as exc:
            await self._put_connector_status(name, State.FAILED, f"{exc}", message=str(exc))
            return None
        instance = ConnectorInstance(
            name,
            desc,
            config,
            self.plugin_timeout,
            on_reconfigure=lambda: self._post(lambda: self._request_reconfigure(name)),
            on_error=lambda error: self._post(lambda: self._connector_raised(name, error)),
        )
        self._instances[name] = instance
        try:
            with self._doing(name, "starting the connector"):
                await instance.start()
        except PluginCallbackError as exc:
            await self._put_connector_status(name, State.FAILED, exc.trace, message=str(exc))
            return instance
        await self._put_connector_status(name, State.RUNNING)
        return instance

    async def _stop_instance(self, name: str) -> None:
        instance = self._instances.pop(name, None)
        if instance is None:
            return
        try:
            with self._doing(name, "stopping the connector"):
                await instance.stop()
        except PluginCallbackError as exc:
            # A failing stop() must not keep the connector from stopping (KIP-875).
            log.warning("%s", exc)

    def _request_reconfigure(self, name: str) -> None:
        self._reconfigure_requested.add(name)
        self._schedule(name)

    def _connector_raised(self, name: str, error: BaseException) -> None:
        instance = self._instances.get(name)
        if instance is None:
            return
        failure = PluginCallbackError("context.raise_error", name, error)
        instance.mark_failed(failure)
        self._schedule_status(name, State.FAILED, failure.trace, str(failure))

    def _schedule_status(self, name: str, state: State, trace: str | None, message: str) -> None:
        async def write() -> None:
            async with self._locks[name]:
                await self._put_connector_status(name, state, trace, message=message)

        task = asyncio.get_running_loop().create_task(write())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _publish_task_configs(
        self, name: str, instance: ConnectorInstance, config: Mapping[str, str], snap: ClusterConfigState
    ) -> None:
        try:
            max_tasks = int(config.get("tasks.max", "1"))
        except ValueError:
            max_tasks = 0
        try:
            if max_tasks < 1:
                raise PluginCallbackError(
                    "task_configs",
                    name,
                    ValueError(f"tasks.max must be a positive integer, got {config.get('tasks.max')!r}"),
                )
            with self._doing(name, "generating task configs"):
                generated = await instance.task_configs(max_tasks)
            if len(generated) > max_tasks:
                raise PluginCallbackError(
                    "task_configs",
                    name,
                    ValueError(
                        f"the connector generated {len(generated)} task configs, "
                        f"more than tasks.max={max_tasks}"
                    ),
                )
            task_class = instance.task_class_name()
        except PluginCallbackError as exc:
            instance.mark_failed(exc)
            await self._put_connector_status(name, State.FAILED, exc.trace, message=str(exc))
            return
        # As Kafka's Worker.connectorTaskConfigs: a task config names its task class and, for sinks, topics.
        extra = {"task.class": task_class}
        for key in ("topics", "topics.regex"):
            if config.get(key):
                extra[key] = config[key]
        configs = [{**task, **extra} for task in generated]
        if [dict(t) for t in snap.tasks(name)] != configs:
            with self._doing(name, "writing task configs to the config topic"):
                await self._blocking(
                    lambda: self.config_store.put_task_configs(name, configs, self.store_timeout)
                )
            await self._remove_task_statuses(name, len(configs))

    async def _remove_task_statuses(self, name: str, keep: int) -> None:
        for record in self.status_store.tasks(name):
            if record.task >= keep:
                await self._blocking(
                    functools.partial(self.status_store.remove_task, name, record.task, self.store_timeout)
                )

    async def _put_connector_status(
        self, name: str, state: State, trace: str | None = None, message: str | None = None
    ) -> None:
        current = self.status_store.get_connector(name)
        history = current.recent_errors if current is not None else ()
        if state is State.FAILED:
            first_line = (trace or "").strip().splitlines()[:1]
            entry = ErrorEntry(
                int(time.time() * 1000), message or "".join(first_line), trace or "", self.worker_id
            )
            history = (entry, *history)[:MAX_RECENT_ERRORS]
        record = ConnectorStatusRecord(name, state, trace, self.worker_id, self.generation, history)
        if current == record:
            return
        await self._blocking(lambda: self.status_store.put_connector(record, self.store_timeout))


async def with_deadline(coro: Awaitable[T], timeout: float | None) -> T:
    """Await `coro` within the caller's remaining time; DEADLINE_EXCEEDED names the current stage."""
    trail = _StageTrail()
    token = _trail.set(trail)
    try:
        return await asyncio.wait_for(coro, timeout)
    except TimeoutError:
        raise RequestTimeoutError(trail.at_cancel or _render(trail.stages[-1])) from None
    finally:
        _trail.reset(token)
