"""Reconciliation: each connector's plugin instance, task configs and status driven toward what the
config topic says. The herder's mutations and the config topic's listener only ask for it; this
module does it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Final, Protocol

from sluiceway.common.limits import MAX_TASK_CONFIG_RECORD_BYTES, MAX_TASK_CONFIGS_BYTES, MAX_TASKS, echo
from sluiceway.common.retry import Retry, RetryPolicy
from sluiceway.connect.config_providers import ConfigProviders
from sluiceway.connect.plugins import PluginNotFoundError, PluginRegistry
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.herder.connector_instance import ConnectorInstance, InstanceState, PluginCallbackError
from sluiceway_server.herder.deadlines import stage
from sluiceway_server.herder.deleted_callbacks import DeletedCallbacks
from sluiceway_server.herder.locks import KeyedLocks
from sluiceway_server.herder.views import RestartPlan
from sluiceway_server.model import State, TargetState
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import ClusterConfigState, ConfigStore, serde

log = logging.getLogger(__name__)

# A failed reconciliation (the store unreachable, say) is tried again until it succeeds: the change
# must not be lost. The count starts again after a success.
_RETRY: Final = RetryPolicy(initial=0.5, maximum=30.0)
# Connectors a new leader reconciles at once when it takes over. All of them at once (10,000 tasks
# on the loop) put every API call behind the whole start-up; a bounded number keeps the loop's
# queue short, and calls answer while connectors start.
STARTUP_CONCURRENCY: Final = 64


class TaskScheduler(Protocol):
    """What reconciliation needs from the executor coordinator (absent until it is wired)."""

    def request_rebalance(self) -> None: ...

    def restart_tasks(self, connector: str, tasks: Sequence[int]) -> None: ...

    def running_tasks(self, connector: str) -> Sequence[object]: ...

    async def wait_until_released(self, connector: str) -> None: ...


def _check_task_config_sizes(name: str, configs: Sequence[Mapping[str, str]]) -> None:
    """Every task config must fit a config-topic record, and all of them together a bound that keeps
    a connector's assignments (and its share of the config topic) in proportion; a connector over
    either is FAILED with the limit named, instead of failing inside Kafka on every retry."""
    total = 0
    for index, task_config in enumerate(configs):
        size = len(serde.dumps({"properties": dict(task_config)}))
        total += size
        if size > MAX_TASK_CONFIG_RECORD_BYTES:
            raise PluginCallbackError(
                "task_configs",
                name,
                ValueError(
                    f"task config {index} takes {size} bytes, more than the limit of "
                    f"{MAX_TASK_CONFIG_RECORD_BYTES} (max.task.config.record.bytes)"
                ),
            )
    if total > MAX_TASK_CONFIGS_BYTES:
        raise PluginCallbackError(
            "task_configs",
            name,
            ValueError(
                f"the {len(configs)} task configs take {total} bytes together, more than the limit of "
                f"{MAX_TASK_CONFIGS_BYTES} (max.task.configs.bytes)"
            ),
        )


async def tasks_gone(scheduler: TaskScheduler | None, connector: str) -> None:
    """Return once no executor holds a task of the connector (bounded by the caller's deadline)."""
    if scheduler is not None and scheduler.running_tasks(connector):
        with stage(f"waiting for the executors to stop the tasks of connector {connector}"):
            await scheduler.wait_until_released(connector)


class ConnectorReconciler:
    """Runs the connectors' plugin instances for the herder, one reconciliation at a time per
    connector.

    It owns the `ConnectorInstance` of every started connector, uses the per-connector locks (which the
    herder's mutations take too), pending restart plans and reconfiguration requests. A
    reconciliation reads the config snapshot and acts until the connector matches it: starts, stops
    or restarts the instance, publishes task configs, writes the connector's status. It is
    idempotent, so the config topic's listener and the mutations may both ask for it; a failure (the
    store unreachable, say) is retried with backoff rather than lost. Everything runs on the event
    loop; plugin callbacks run on each instance's own thread with the callback time limit, and
    store calls in worker threads.
    """

    def __init__(
        self,
        *,
        config_store: ConfigStore,
        status: StatusWriter,
        topics: ActiveTopicTracker,
        plugins: PluginRegistry,
        plugin_timeout: float,
        post: Callable[[Callable[[], object]], None],
        locks: KeyedLocks | None = None,
        store_timeout: float = 30.0,
        providers: ConfigProviders | None = None,
    ) -> None:
        self.config_store = config_store
        self.status = status
        self.topics = topics
        self.plugins = plugins
        self.plugin_timeout = plugin_timeout
        self.store_timeout = store_timeout
        self._post = post
        self.locks = locks if locks is not None else KeyedLocks()
        # Instances resolve their config's references with these before the plugin sees it.
        self.providers = providers or ConfigProviders()
        self.deleted_callbacks = DeletedCallbacks(
            config_store=config_store,
            plugins=plugins,
            plugin_timeout=plugin_timeout,
            store_timeout=store_timeout,
            providers=self.providers,
        )
        self.scheduler: TaskScheduler | None = None
        self._instances: dict[str, ConnectorInstance] = {}
        self._pending_restarts: dict[str, RestartPlan] = {}
        self._reconfigure_requested: set[str] = set()
        # Paused connectors whose start out of STOPPED failed, with the config it failed with: they
        # stay FAILED, as a failed running one does, until restarted, reconfigured or moved on.
        self._failed_pauses: dict[str, dict[str, str]] = {}
        # The failures in a row of each connector whose reconciliation keeps failing.
        self._retries: dict[str, Retry] = {}
        self._background: set[asyncio.Task[None]] = set()
        # What each connector's reconciliation is doing now, for DEADLINE_EXCEEDED messages.
        self._activity: dict[str, str] = {}
        self._stopping = False

    async def stop(self) -> None:
        self._stopping = True
        await self.deleted_callbacks.stop()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        for name in list(self._instances):
            instance = self._instances.pop(name)
            try:
                await instance.stop()
            except PluginCallbackError as exc:
                log.warning("stopping %s on shutdown: %s", name, exc)

    def request_restart(self, plan: RestartPlan) -> None:
        """Carry out this KIP-745 plan at the connector's next reconciliation, exactly once."""
        self._pending_restarts[plan.connector] = plan
        self.schedule(plan.connector)

    def schedule(self, name: str, delay: float = 0.0) -> asyncio.Task[None]:
        async def run() -> None:
            if delay:
                await asyncio.sleep(delay)
            await self._reconcile_locked(name)

        return self._in_background(run(), f"reconcile-{name}")

    def schedule_all(
        self, names: Sequence[str], concurrency: int = STARTUP_CONCURRENCY
    ) -> asyncio.Task[None]:
        """Reconciles ``names`` (a new leader's connectors), at most ``concurrency`` at a time, in
        a background task. A connector scheduled on its own meanwhile (a config change) is
        reconciled then too; the per-connector lock orders the two."""

        async def run() -> None:
            pending = iter(names)

            async def worker() -> None:
                for name in pending:
                    await self._reconcile_locked(name)

            await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(names))))))

        return self._in_background(run(), "reconcile-all")

    def _in_background(self, work: Coroutine[object, object, None], name: str) -> asyncio.Task[None]:
        """Runs ``work`` in a task the reconciler keeps until it ends (``stop`` cancels it)."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def reconcile_now(self, name: str) -> None:
        """Reconcile in a task of its own: a caller's deadline stops the wait, never the work half-way."""
        with stage(lambda: self._activity.get(name, "applying the change to the connector")):
            await asyncio.shield(self.schedule(name))

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
            async with self.locks[name]:
                await self._reconcile(name)
            if self.scheduler is not None:
                self.scheduler.request_rebalance()
        except asyncio.CancelledError:
            raise
        except Exception:
            # Store unavailable and the like: try again shortly rather than lose the change.
            retry = self._retries.get(name)
            if retry is None:
                retry = self._retries[name] = _RETRY.start()
            delay = retry.next_delay()
            assert delay is not None  # the policy has neither a deadline nor an attempt limit
            log.exception("reconciling connector %s failed; retrying in %.1fs", name, delay)
            if not self._stopping:
                self.schedule(name, delay)
        else:
            self._retries.pop(name, None)

    async def _reconcile(self, name: str) -> None:
        snap = self.config_store.snapshot()
        config = snap.connector_config(name)
        instance = self._instances.get(name)
        # Read, not popped: if this reconcile fails before acting on it, the retry still restarts.
        restart = self._pending_restarts.get(name)

        if config is None:
            self._pending_restarts.pop(name, None)
            self._failed_pauses.pop(name, None)
            callback = snap.pending_deleted_callbacks.get(name)
            due = callback is not None and self.deleted_callbacks.due(name, callback)
            # deleted() follows stop() on a running plugin; a plugin that is not running (failed,
            # or no instance: stopped, paused) is not started for it, DeletedCallbacks makes a new one.
            running = instance is not None and instance.state is InstanceState.STARTED
            stopped = await self._stop_instance(name, deleting=due and running)
            if due:
                assert callback is not None
                self.deleted_callbacks.launch(name, callback, stopped if running else None)
            await self.status.remove_connector(name)
            await self.topics.remove(name)
            return

        # The status before this reconciliation touches it: whether a paused connector is leaving STOPPED.
        prior = self.status.store.get_connector(name)
        target = snap.target_state(name) or TargetState.STARTED
        if target is not TargetState.PAUSED or (restart is not None and restart.restart_connector):
            self._failed_pauses.pop(name, None)
        if restart is not None and restart.restart_connector:
            await self.status.put_connector(name, State.RESTARTING)
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
                await asyncio.to_thread(self.config_store.put_task_configs, name, [], self.store_timeout)
            await self.status.put_connector(name, State.STOPPED)
            await self.status.remove_task_statuses(name, 0)
            return
        if target is TargetState.PAUSED:
            await self._reconcile_paused(name, config, snap, instance, prior.state if prior else None)
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

    async def _reconcile_paused(
        self,
        name: str,
        config: Mapping[str, str],
        snap: ClusterConfigState,
        instance: ConnectorInstance | None,
        prior: State | None,
    ) -> None:
        """A paused connector's plugin does not run; its tasks stay, paused.

        A connector paused while STOPPED has no tasks, and KIP-875 has that pause start it as a
        resume would (Kafka as shipped does not): its plugin is started, its task configs are
        published, then it is stopped again, and the executors get the tasks paused. The status
        topic tells this case apart, durably and whichever replica leads: the connector still
        shows STOPPED there, or FAILED when such a start failed. A failed one stays FAILED until
        restarted, reconfigured, resumed or stopped (a new leader tries once more). A connector
        created PAUSED (KIP-980) or paused while running generates nothing, as in Kafka."""
        failed = self._failed_pauses.get(name)
        if failed is not None:
            if failed == dict(config):
                return
            del self._failed_pauses[name]
        if instance is not None or snap.tasks(name) or prior not in (State.STOPPED, State.FAILED):
            if instance is not None:
                await self._stop_instance(name)
            await self.status.put_connector(name, State.PAUSED)
            return
        instance = await self._start_instance(name, config, announce=False)
        if instance is None or instance.state is not InstanceState.STARTED:
            # FAILED, written by _start_instance (no such plugin, or start() failed).
            self._failed_pauses[name] = dict(config)
            await self._stop_instance(name)  # lets the failed instance's thread go
            return
        try:
            configs = await self._generate_task_configs(name, instance, config)
        except PluginCallbackError as exc:
            self._failed_pauses[name] = dict(config)
            await self._stop_instance(name)
            await self.status.put_connector(name, State.FAILED, exc.trace, message=str(exc))
            return
        # Stopped before the write, so a failed write never leaves a paused connector's plugin running.
        await self._stop_instance(name)
        await self._write_task_configs(name, configs, snap)
        # Last: a failure before this leaves the connector STOPPED, so the retry generates again.
        await self.status.put_connector(name, State.PAUSED)

    async def _start_instance(
        self, name: str, config: Mapping[str, str], *, announce: bool = True
    ) -> ConnectorInstance | None:
        """Starts a new instance and writes RUNNING (unless not `announce`), or FAILED with the
        reason; returns None if the plugin does not exist, else the instance, STARTED or FAILED."""
        try:
            desc = self.plugins.resolve(config.get("connector.class", ""))
        except PluginNotFoundError as exc:
            await self.status.put_connector(name, State.FAILED, f"{exc}", message=str(exc))
            return None
        instance = ConnectorInstance(
            name,
            desc,
            config,
            self.plugin_timeout,
            on_reconfigure=lambda: self._post(lambda: self.request_reconfigure(name)),
            on_error=lambda error: self._post(lambda: self._connector_raised(name, error)),
            providers=self.providers,
        )
        self._instances[name] = instance
        try:
            with self._doing(name, "starting the connector"):
                await instance.start()
        except PluginCallbackError as exc:
            await self.status.put_connector(name, State.FAILED, exc.trace, message=str(exc))
            return instance
        if announce:
            await self.status.put_connector(name, State.RUNNING)
        return instance

    async def _stop_instance(self, name: str, *, deleting: bool = False) -> ConnectorInstance | None:
        """Stops the connector's instance, if it has one, and returns it. When `deleting`, its thread
        stays for the deleted() callback."""
        instance = self._instances.pop(name, None)
        if instance is None:
            return None
        try:
            with self._doing(name, "stopping the connector"):
                await instance.stop(deleting=deleting)
        except PluginCallbackError as exc:
            # A failing stop() must not keep the connector from stopping (KIP-875).
            log.warning("%s", exc)
        return instance

    def request_reconfigure(self, name: str) -> None:
        self._reconfigure_requested.add(name)
        self.schedule(name)

    def _connector_raised(self, name: str, error: BaseException) -> None:
        instance = self._instances.get(name)
        if instance is None:
            return
        failure = instance.callback_error("context.raise_error", error)
        instance.mark_failed(failure)
        self._schedule_status(name, State.FAILED, failure.trace, str(failure))

    def _schedule_status(self, name: str, state: State, trace: str | None, message: str) -> None:
        async def write() -> None:
            async with self.locks[name]:
                await self.status.put_connector(name, state, trace, message=message)

        self._in_background(write(), f"status-{name}")

    async def _publish_task_configs(
        self, name: str, instance: ConnectorInstance, config: Mapping[str, str], snap: ClusterConfigState
    ) -> None:
        try:
            configs = await self._generate_task_configs(name, instance, config)
        except PluginCallbackError as exc:
            instance.mark_failed(exc)
            await self.status.put_connector(name, State.FAILED, exc.trace, message=str(exc))
            return
        await self._write_task_configs(name, configs, snap)

    async def _generate_task_configs(
        self, name: str, instance: ConnectorInstance, config: Mapping[str, str]
    ) -> list[dict[str, str]]:
        """The task configs of the started `instance`, checked and completed for the config topic;
        raises PluginCallbackError when the plugin fails or what it made breaks a limit."""
        try:
            max_tasks = int(instance.resolved.get("tasks.max", "1"))
        except ValueError:
            max_tasks = 0
        if not 1 <= max_tasks <= MAX_TASKS:
            raise PluginCallbackError(
                "task_configs",
                name,
                ValueError(
                    f"tasks.max must be an integer from 1 to {MAX_TASKS} (max.tasks), "
                    f"got {echo(config.get('tasks.max', ''))}"
                ),
            )
        with self._doing(name, "generating task configs"):
            generated = await instance.task_configs(max_tasks)
        if len(generated) > max_tasks:
            raise PluginCallbackError(
                "task_configs",
                name,
                ValueError(
                    f"the connector generated {len(generated)} task configs, more than tasks.max={max_tasks}"
                ),
            )
        # As Kafka's Worker.connectorTaskConfigs: a task config names its task class and, for
        # sinks, topics.
        extra = {"task.class": await instance.task_class_name()}
        for key in ("topics", "topics.regex"):
            if config.get(key):
                extra[key] = config[key]
        configs = [{**task, **extra} for task in generated]
        _check_task_config_sizes(name, configs)
        return configs

    async def _write_task_configs(
        self, name: str, configs: Sequence[Mapping[str, str]], snap: ClusterConfigState
    ) -> None:
        """Writes the task configs unless the snapshot has exactly these."""
        if [dict(t) for t in snap.tasks(name)] != [dict(c) for c in configs]:
            with self._doing(name, "writing task configs to the config topic"):
                await asyncio.to_thread(self.config_store.put_task_configs, name, configs, self.store_timeout)
            await self.status.remove_task_statuses(name, len(configs))
