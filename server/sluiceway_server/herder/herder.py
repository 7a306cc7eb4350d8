"""The herder: the connector lifecycle the API asks for, on top of the Kafka-backed stores (the job
of Kafka Connect's DistributedHerder). Every replica's herder answers reads; only the leader's runs
the reconciliation and serves mutations, for the terms cluster/leadership.py gives it (`lead`,
`follow`).

Mutations write records to the config topic and wait until they are read back; the reconciler
(reconciler.py) then brings each connector — plugin instance, task configs, status — to what the
config topic says. Plugin code the API itself needs (validation, config definitions) runs through
plugin_calls.py; statuses are written through the shared StatusWriter.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from sluiceway.common.limits import echo
from sluiceway.connect.config import ConfigDef
from sluiceway.connect.config_providers import ConfigProviders, with_raw_values
from sluiceway.connect.plugins import PluginDesc, PluginNotFoundError, PluginRegistry, PluginType
from sluiceway.connect.validation import (
    ConfigInfos,
    validate_connector_config,
)
from sluiceway.connect.worker_policy import WorkerPolicy
from sluiceway.errors import Reason
from sluiceway_server.errors import (
    AbortedError,
    AlreadyExistsError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    ServerError,
    connector_not_found,
)
from sluiceway_server.herder.active_topics import ActiveTopicTracker
from sluiceway_server.herder.config_checks import (
    check_config_input,
    normalized,
    raise_config_errors,
    with_name,
)
from sluiceway_server.herder.deadlines import stage
from sluiceway_server.herder.deleted_callbacks import PENDING, DeletedCallbackResult
from sluiceway_server.herder.fields import FieldOf, map_field, patch_field, validate_connector_name
from sluiceway_server.herder.locks import KeyedLocks
from sluiceway_server.herder.masking import masked
from sluiceway_server.herder.offset_notices import committed_offsets_notices
from sluiceway_server.herder.offsets import OffsetManager
from sluiceway_server.herder.plugin_calls import PluginCalls, PluginDefinitions
from sluiceway_server.herder.reconciler import ConnectorReconciler, TaskScheduler, tasks_gone
from sluiceway_server.herder.views import (
    ConnectorInfo,
    ConnectorStatusView,
    InstanceStatusView,
    Notice,
    RestartPlan,
    TaskConfigView,
    TaskStatusView,
    connector_etag,
    planned_restart,
)
from sluiceway_server.herder.watchers import StatusWatchers
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.status_writer import StatusWriter
from sluiceway_server.storage import (
    ClusterConfigState,
    ConfigStore,
    ConnectorOffsetStorage,
    RestartRequest,
    StatusStore,
)
from sluiceway_server.storage.task_fencing import TaskFencer

log = logging.getLogger(__name__)
T = TypeVar("T")


class Herder:
    """The domain logic behind ConnectorService and PluginService, on plain Python types.

    It owns the connector lifecycle: validating and writing configs, target states and restart
    requests to the config topic; reads of configs (passwords masked), task configs and statuses
    from the stores' materialised state; and the status watchers. It drives the reconciler from
    its mutations and from the config topic's listener. Everything runs on the control plane's
    event loop: store writes run in worker threads and return once read back (so a read after a
    mutation sees it), and plugin code runs either on a connector's own thread (lifecycle
    callbacks) or on the bounded plugin-call pool (validation, config definitions), each time-limited
    by plugin.callback.timeout.ms, so no plugin can stall a request of another connector. Mutations
    of one connector are serialised by its lock; different connectors proceed independently.
    """

    def __init__(
        self,
        *,
        worker_id: str,
        config_store: ConfigStore,
        status_store: StatusStore,
        plugins: PluginRegistry,
        plugin_timeout: float,
        offset_storage: ConnectorOffsetStorage,
        store_timeout: float = 30.0,
        topic_tracking: bool = True,
        topic_tracking_reset: bool = True,
        policy: WorkerPolicy | None = None,
        fencer: TaskFencer | None = None,
        providers: ConfigProviders | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.config_store = config_store
        self.status_store = status_store
        self.plugins = plugins
        self.plugin_timeout = plugin_timeout
        self.store_timeout = store_timeout
        self.plugin_calls = PluginCalls(plugin_timeout)
        self.definitions = PluginDefinitions(self.plugin_calls)
        self.status = StatusWriter(status_store, worker_id, store_timeout)
        # The worker's rules for connectors (topic.creation.enable, internal topics, paths, overrides).
        self.policy = policy or WorkerPolicy()
        # Resolve ${provider:path:key} references wherever plugin code gets a config (none: refused).
        self.providers = providers or ConfigProviders()
        self.topics = ActiveTopicTracker(
            status_store=status_store,
            snapshot=self.snapshot,
            enabled=topic_tracking,
            allow_reset=topic_tracking_reset,
            store_timeout=store_timeout,
        )
        # Mutations and reconciliation of one connector take its lock; shared by every term.
        self.locks = KeyedLocks()
        self.reconciler = self._new_reconciler()
        self.offsets = OffsetManager(
            snapshot=self.snapshot,
            plugins=plugins,
            plugin_calls=self.plugin_calls,
            storage=offset_storage,
            locks=self.locks,
            scheduler=lambda: self.scheduler,
            fencer=fencer,
            providers=self.providers,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self.watchers = StatusWatchers()
        self._stopping = False
        self._leading = False

    # ------------------------------------------------------------------ life cycle

    def _new_reconciler(self) -> ConnectorReconciler:
        return ConnectorReconciler(
            config_store=self.config_store,
            status=self.status,
            topics=self.topics,
            plugins=self.plugins,
            plugin_timeout=self.plugin_timeout,
            post=self._post,
            locks=self.locks,
            store_timeout=self.store_timeout,
            providers=self.providers,
        )

    async def start(self, *, lead: bool = True) -> None:
        """Serve reads; with `lead`, also lead at once with a term above every recorded one (a
        control plane of its own; a cluster's replicas lead only when elected)."""
        self._loop = asyncio.get_running_loop()
        self.definitions.warm(self.plugins.connectors())
        self.status_store.add_listener(lambda change: self._post(lambda: self.watchers.publish(change)))
        if lead:
            await self.lead(self.status.previous_term() + 1)

    async def lead(self, term: int) -> None:
        """Start this replica's term: reconcile every connector, and follow the config topic."""
        # Statuses of earlier terms read as older than this term's.
        self.status.term = term
        if self._leading:
            return
        self._leading = True
        self.reconciler = self._new_reconciler()
        # Listen only after the initial read: restart requests already in the log are history.
        self.config_store.set_listener(self)
        snap = self.config_store.snapshot()
        self.reconciler.schedule_all(snap.connectors())
        for name in await self.reconciler.deleted_callbacks.left_over(snap):
            self.reconciler.schedule(name)

    async def follow(self) -> None:
        """End this replica's term: stop following the config topic and every plugin instance."""
        if not self._leading:
            return
        self._leading = False
        self.config_store.set_listener(None)
        await self.reconciler.stop()

    async def stop(self) -> None:
        self._stopping = True
        await self.follow()
        self.plugin_calls.close()

    @property
    def generation(self) -> int:
        """This replica's leadership term."""
        return self.status.term

    @property
    def scheduler(self) -> TaskScheduler | None:
        return self.reconciler.scheduler

    @scheduler.setter
    def scheduler(self, scheduler: TaskScheduler | None) -> None:
        self.reconciler.scheduler = scheduler

    # ------------------------------------------------------------------ config listener (consumer thread)

    def _post(self, fn: Callable[[], object]) -> None:
        if self._loop is not None and not self._stopping:
            self._loop.call_soon_threadsafe(fn)

    def on_connector_config_update(self, connector: str) -> None:
        self._post(lambda: self.reconciler.schedule(connector))

    def on_connector_config_remove(self, connector: str) -> None:
        self._post(lambda: self.reconciler.schedule(connector))

    def on_task_config_update(self, connector: str) -> None:
        self._post(lambda: self.reconciler.schedule(connector))

    def on_target_state_change(self, connector: str) -> None:
        self._post(lambda: self.reconciler.schedule(connector))

    def on_restart_request(self, request: RestartRequest) -> None:
        def register() -> None:
            self.reconciler.request_restart(
                self.restart_plan(request.connector, request.include_tasks, request.only_failed)
            )

        self._post(register)

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> ClusterConfigState:
        return self.config_store.snapshot()

    async def wait_for_position(self, position: int, timeout: float) -> None:
        """Read-your-writes: wait until this replica has applied the config log up to `position`."""
        if position <= self.snapshot().position:
            return
        with stage(f"reading the config topic up to position {position}"):
            await asyncio.to_thread(lambda: self.config_store.read_to_end(timeout))
        end = self.snapshot().position
        if end < position:
            # Read to its end, the log still has fewer records: no write ever returned this position.
            description = f"position {position} is past the end of the config log ({end})"
            raise InvalidArgumentError(
                f"Invalid min_config_position: {description}",
                reason=Reason.INVALID_REQUEST,
                violations=[FieldViolation("min_config_position", description)],
                metadata={"config_position": str(end)},
            )

    def connector_names(self) -> list[str]:
        return self.snapshot().connectors()

    def connector_type(self, config: Mapping[str, str]) -> ConnectorType:
        try:
            desc = self.plugins.resolve(config.get("connector.class", ""))
        except PluginNotFoundError:
            return ConnectorType.UNKNOWN
        return ConnectorType.SOURCE if desc.type is PluginType.SOURCE else ConnectorType.SINK

    async def connector_info(self, name: str) -> ConnectorInfo:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        target = snap.target_state(name) or TargetState.STARTED
        return ConnectorInfo(
            name=name,
            config=await self.masked(config, config),
            type=self.connector_type(config),
            tasks=tuple(range(len(snap.tasks(name)))),
            target_state=target,
            config_position=snap.position,
            etag=connector_etag(config, target),
        )

    def _check_etag(self, name: str, etag: str | None) -> None:
        """AIP-154: with an etag, the connector must exist in exactly the state it names."""
        if not etag:
            return
        snap = self.snapshot()
        config = snap.connector_config(name)
        current = (
            None if config is None else connector_etag(config, snap.target_state(name) or TargetState.STARTED)
        )
        if current != etag:
            state = "no longer exists" if current is None else "has changed"
            raise AbortedError(
                f"Connector {name} {state} since etag {etag} was read; read it again and retry",
                metadata={"connector": name, "etag": etag, "current_etag": current or ""},
            )

    async def masked(self, values: Mapping[str, str], connector_config: Mapping[str, str]) -> dict[str, str]:
        return await masked(self.plugins, self.definitions, values, connector_config)

    async def task_configs(self, name: str) -> list[TaskConfigView]:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        return [
            TaskConfigView(name, n, await self.masked(task, config))
            for n, task in enumerate(snap.tasks(name))
        ]

    def connector_status(self, name: str) -> ConnectorStatusView:
        snap = self.snapshot()
        config = snap.connector_config(name)
        if config is None:
            raise connector_not_found(name)
        connector = InstanceStatusView.of(self.status_store.get_connector(name))
        tasks = tuple(self._task_view(name, n) for n in range(len(snap.tasks(name))))
        return ConnectorStatusView(name, self.connector_type(config), connector, tasks)

    def instance_states(self) -> Iterator[tuple[str, int | None, State]]:
        """Every connector's state (task None) and every task's, as the status calls give them,
        without the plugin lookup a whole status view makes (the metrics read these each second)."""
        snap = self.snapshot()
        for name in snap.connectors():
            yield name, None, InstanceStatusView.of(self.status_store.get_connector(name)).state
            for task in range(len(snap.tasks(name))):
                yield name, task, self._task_view(name, task).status.state

    def task_status(self, name: str, task: int) -> TaskStatusView:
        snap = self.snapshot()
        if snap.connector_config(name) is None:
            raise connector_not_found(name)
        if not 0 <= task < len(snap.tasks(name)):
            raise NotFoundError(
                f"Task {task} of connector {name} not found",
                reason=Reason.TASK_NOT_FOUND,
                metadata={"connector": name, "task": str(task)},
            )
        return self._task_view(name, task)

    def _task_view(self, name: str, task: int) -> TaskStatusView:
        return TaskStatusView(name, task, InstanceStatusView.of(self.status_store.get_task(name, task)))

    async def validate(self, config: Mapping[str, str], plugin: str | None = None) -> ConfigInfos:
        """Validation calls the plugin's config() and validate(): off the loop, time-limited. It sees
        the config with its references resolved; the answer shows the raw values (with_raw_values)."""
        target = plugin or config.get("connector.class") or "the connector"

        def run() -> ConfigInfos:
            resolution = self.providers.try_resolve(config)
            infos = validate_connector_config(self.plugins, resolution.config, plugin, policy=self.policy)
            return with_raw_values(infos, config, resolution)

        return await self.plugin_calls.run(f"validation by {target}", run)

    async def plugin_definition(self, desc: PluginDesc) -> ConfigDef:
        """The plugin's combined config definition (cached; its config() runs once, off the loop)."""
        return await self.definitions.get(desc)

    def plugin(self, name: str) -> PluginDesc:
        try:
            return self.plugins.resolve(name)
        except PluginNotFoundError as exc:
            raise NotFoundError(str(exc), reason=Reason.PLUGIN_NOT_FOUND, metadata={"plugin": name}) from exc

    # ------------------------------------------------------------------ mutations

    async def _checked(
        self, name: str, config: Mapping[str, str], field: str, field_of: FieldOf
    ) -> dict[str, str]:
        """The config as it will be stored, once the plugin-free checks, normalisation and the
        plugin's validation passed (INVALID_ARGUMENT otherwise)."""
        check_config_input(name, config, field, field_of)
        try:
            definition: ConfigDef | None = await self.definitions.get(
                self.plugins.resolve(config.get("connector.class", ""))
            )
        except (PluginNotFoundError, ServerError):
            definition = None  # the validation below reports it
        stored = normalized(config, definition)
        with stage("validating the connector configuration"):
            raise_config_errors(name, await self.validate(stored), field_of)
        return stored

    async def _produced(self, info: ConnectorInfo) -> ConnectorInfo:
        """What a mutation answers: the connector as the mutation left it (`info`, read under its
        lock), with the tasks the reconciliation gave it if nothing has changed it since."""
        try:
            current = await self.connector_info(info.name)
        except ServerError:
            return info
        return current if current.etag == info.etag else info

    async def create_connector(
        self, name: str, config: Mapping[str, str], initial_state: TargetState, validate_only: bool = False
    ) -> ConnectorInfo:
        validate_connector_name(name, "connector_id")
        field_of = map_field("connector.config")
        full = with_name(name, config, "connector_id", field_of)
        async with self.locks[name]:
            if self.snapshot().contains(name):
                raise AlreadyExistsError(
                    f"Connector {echo(name)} already exists", metadata={"connector": name}
                )
            stored = await self._checked(name, full, "connector.config", field_of)
            notices = await self._offset_notices(name, stored, validate_only)
            if validate_only:
                return ConnectorInfo(
                    name,
                    await self.masked(stored, stored),
                    self.connector_type(stored),
                    (),
                    initial_state,
                    self.snapshot().position,
                    connector_etag(stored, initial_state),
                    notices,
                )
            with stage("writing the connector configuration to the config topic"):
                # KIP-980: a non-default initial state is written before the config.
                state = None if initial_state is TargetState.STARTED else initial_state
                await asyncio.to_thread(
                    lambda: self.config_store.put_connector_config(name, stored, state, self.store_timeout)
                )
            info = await self.connector_info(name)
        await self.reconciler.reconcile_now(name)
        return replace(await self._produced(info), notices=notices)

    async def _offset_notices(
        self, name: str, config: Mapping[str, str], validate_only: bool
    ) -> tuple[Notice, ...]:
        """Before a connector is created: a notice if offsets committed under its name exist."""
        kind = self.connector_type(config)
        storage = self.offsets.storage
        return await committed_offsets_notices(storage, name, config, kind, validate_only=validate_only)

    async def replace_connector_config(
        self, name: str, config: Mapping[str, str], etag: str | None = None
    ) -> tuple[ConnectorInfo, bool]:
        validate_connector_name(name, "name")
        full = with_name(name, config, "name", map_field("config"))
        async with self.locks[name]:
            self._check_etag(name, etag)
            created = not self.snapshot().contains(name)
            stored = await self._checked(name, full, "config", map_field("config"))
            notices = await self._offset_notices(name, stored, False) if created else ()
            with stage("writing the connector configuration to the config topic"):
                await asyncio.to_thread(
                    lambda: self.config_store.put_connector_config(name, stored, None, self.store_timeout)
                )
            info = await self.connector_info(name)
        await self.reconciler.reconcile_now(name)
        return replace(await self._produced(info), notices=notices), created

    async def patch_connector_config(
        self, name: str, set_values: Mapping[str, str], remove: Sequence[str], etag: str | None = None
    ) -> ConnectorInfo:
        field_of = patch_field(set_values, remove)
        async with self.locks[name]:
            current = self.snapshot().connector_config(name)
            if current is None:
                raise connector_not_found(name)
            self._check_etag(name, etag)
            if "name" in remove or ("name" in set_values and set_values["name"] != name):
                raise InvalidArgumentError(
                    f"A patch cannot change or remove the 'name' of connector {echo(name)}",
                    reason=Reason.INVALID_CONFIG,
                    violations=[FieldViolation(field_of("name"), "cannot be changed or removed by a patch")],
                    metadata={"connector": name, "config_keys": "name"},
                )
            patched = {k: v for k, v in current.items() if k not in set(remove)}
            patched.update(set_values)
            stored = await self._checked(name, patched, "set", field_of)
            if stored != dict(current):
                with stage("writing the connector configuration to the config topic"):
                    await asyncio.to_thread(
                        lambda: self.config_store.put_connector_config(name, stored, None, self.store_timeout)
                    )
            info = await self.connector_info(name)
        await self.reconciler.reconcile_now(name)
        return await self._produced(info)

    async def delete_connector(
        self, name: str, etag: str | None = None, *, delete_offsets: bool = False, wait: bool = False
    ) -> DeletedCallbackResult:
        """Delete the connector. With `delete_offsets`, stop it first, wait for its tasks to leave
        the executors and reset its offsets (KIP-875, as `reset` would), then delete it; if the
        reset fails, the connector stays STOPPED and is not deleted. With `wait` (implied by
        `delete_offsets`), return only once no executor runs a task of it any more and its
        deleted() callback (KIP-883) has ended; the result says how that went (PENDING without
        `wait`)."""
        async with self.locks[name]:
            if not self.snapshot().contains(name):
                raise connector_not_found(name)
            self._check_etag(name, etag)
            if delete_offsets:
                await self._write_stopped(name)
        if delete_offsets:
            await self.reconciler.reconcile_now(name)
            await tasks_gone(self.scheduler, name)
        async with self.locks[name]:
            if not self.snapshot().contains(name):
                raise connector_not_found(name)
            if delete_offsets:
                try:
                    with stage("resetting the offsets of the connector"):
                        await self.offsets.reset_locked(name)
                except ServerError as exc:
                    exc.message = f"{exc.message} Connector {name} is STOPPED now and was not deleted."
                    exc.args = (exc.message,)
                    raise
            config = self.snapshot().connector_config(name)
            with stage("writing the connector tombstone to the config topic"):
                await asyncio.to_thread(
                    lambda: self.config_store.remove_connector_config(
                        name, self.store_timeout, deleted_callback=config
                    )
                )
        await self.reconciler.reconcile_now(name)
        if not (wait or delete_offsets):
            return PENDING
        await tasks_gone(self.scheduler, name)
        with stage("waiting for the connector's deleted() callback"):
            return await self.reconciler.deleted_callbacks.outcome(name)

    async def _write_stopped(self, name: str) -> None:
        """The STOPPED target state, the empty task set first (as Kafka does: a crash in between
        leaves a RUNNING connector without tasks rather than a STOPPED one with tasks). The
        caller holds the connector's lock."""
        with stage("writing an empty set of task configs to the config topic"):
            await asyncio.to_thread(lambda: self.config_store.put_task_configs(name, [], self.store_timeout))
        with stage("writing the STOPPED target state to the config topic"):
            await asyncio.to_thread(
                lambda: self.config_store.put_target_state(name, TargetState.STOPPED, self.store_timeout)
            )

    async def set_target_state(self, name: str, target: TargetState) -> ConnectorInfo:
        async with self.locks[name]:
            snap = self.snapshot()
            if not snap.contains(name):
                raise connector_not_found(name)
            if target is TargetState.STOPPED:
                await self._write_stopped(name)
            else:
                with stage(f"writing the {target.value} target state to the config topic"):
                    await asyncio.to_thread(
                        lambda: self.config_store.put_target_state(name, target, self.store_timeout)
                    )
            info = await self.connector_info(name)
        await self.reconciler.reconcile_now(name)
        return await self._produced(info)

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
        async with self.locks[name]:
            if not self.snapshot().contains(name):
                raise connector_not_found(name)
            plan = self.restart_plan(name, include_tasks, only_failed)
            with stage("writing the restart request to the config topic"):
                await asyncio.to_thread(
                    lambda: self.config_store.put_restart_request(
                        name, include_tasks, only_failed, self.store_timeout
                    )
                )
            # The config listener registers the plan when it reads the record back; the reconcile
            # below (or the one the listener scheduled) carries it out exactly once.
            current = self.connector_status(name)
        planned = planned_restart(current, plan, int(time.time() * 1000), self.worker_id)
        await self.reconciler.reconcile_now(name)
        return planned

    async def restart_task(self, name: str, task: int) -> None:
        self.task_status(name, task)  # NOT_FOUND for unknown connector or task
        # Its executor restarts it under a new generation; a task no executor runs has nothing to restart.
        if self.scheduler is not None:
            self.scheduler.restart_tasks(name, [task])
