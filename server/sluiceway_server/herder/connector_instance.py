"""One running `Connector` plugin instance on the leader. Every plugin callback runs in the
instance's own lane (one after another, on a thread the lane holds only while they run) under a
time limit, so a slow or hung plugin fails its own connector and never stalls the API or other
connectors (docs/ARCHITECTURE.md §8)."""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import traceback
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeVar

from sluiceway.common.log_context import log_fields
from sluiceway.connect import Connector
from sluiceway.connect.config_providers import (
    ConfigProviders,
    ConfigReferenceError,
    hide_resolved,
    reverse_transform,
)
from sluiceway.connect.plugins import PluginDesc
from sluiceway_server.herder.callback_lane import CallbackLane

log = logging.getLogger(__name__)
T = TypeVar("T")


class PluginCallbackError(Exception):
    """A plugin callback raised or timed out; `trace` is what goes to the status topic."""

    def __init__(
        self,
        callback: str,
        connector: str,
        cause: BaseException | None,
        timeout: float | None = None,
        *,
        message: str | None = None,
    ):
        if message is not None:
            trace = message
        elif cause is None:
            message = f"Connector {connector}: {callback}() did not return within {timeout:.1f}s"
            trace = message
        else:
            message = f"Connector {connector}: {callback}() failed: {type(cause).__name__}: {cause}"
            trace = "".join(traceback.format_exception(cause))
        super().__init__(message)
        self.callback = callback
        self.timed_out = cause is None
        self.trace = trace

    @classmethod
    def unresolved(cls, connector: str, error: ConfigReferenceError) -> PluginCallbackError:
        """The connector's config references did not resolve, so start() was not called. The
        message (also the trace) names keys, providers and files, never a value."""
        return cls("start", connector, error, message=f"Connector {connector}: not started: {error}")


class _UnresolvedError(Exception):
    """Carries a ConfigReferenceError out of `start`'s thread without its traceback."""

    def __init__(self, error: ConfigReferenceError) -> None:
        super().__init__(str(error))
        self.error = error


class InstanceState(enum.Enum):
    INIT = "INIT"
    STARTED = "STARTED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


class _Context:
    """The ConnectorContext handed to the plugin; calls arrive from plugin threads."""

    def __init__(self, on_reconfigure: Callable[[], None], on_error: Callable[[BaseException], None]) -> None:
        self._on_reconfigure = on_reconfigure
        self._on_error = on_error
        # Replaced as a whole (never mutated) once the instance has resolved its config.
        self.resolved: Mapping[str, str] = MappingProxyType({})

    def config(self) -> Mapping[str, str]:
        return self.resolved

    def request_task_reconfiguration(self) -> None:
        self._on_reconfigure()

    def raise_error(self, error: BaseException) -> None:
        self._on_error(error)


class ConnectorInstance:
    """One connector's `Connector` plugin object on the control plane, from `start` to `stop`.

    Owns the plugin object (made in `start`, dropped in `stop`), a copy of the config it was started
    with as stored (`config`, with its `${provider:path:key}` references) and as the plugin got it
    (`resolved`, resolved by `providers` before the plugin first sees it), its state (INIT,
    STARTED, STOPPED or FAILED, with the `failure` that made it FAILED), and a `CallbackLane` of
    its own (`connector-NAME`), in which the plugin's `start`, `task_configs`, `task_class`, `stop`
    and `deleted` run, on a thread of the shared `LanePool` taken only while they run.

    Threading: the reconciler calls the methods on the control plane's event loop. The coroutines hand
    the plugin code to the instance's lane and await it, so the loop never runs it. The
    `ConnectorContext` given to the plugin calls `on_reconfigure` and `on_error` on
    whichever thread the plugin calls it from, so both must be safe to call from any thread (the
    reconciler's post their work to the event loop).

    Guarantees: the callbacks of one instance run one after another, in the order they were called,
    and never behind another connector's (the pool starts a thread when a lane has waited 50 ms), so
    a slow plugin holds up only its own connector. Each is limited to `timeout` seconds
    (`plugin.callback.timeout.ms`): past it the caller gets a `PluginCallbackError` with
    `timed_out` set, while the thread, which cannot be interrupted, goes on with the callback and
    any later callback of this instance waits behind it. A callback that raises reaches the caller
    as a `PluginCallbackError` carrying the trace for the status topic. A failed `start` leaves the
    instance FAILED; a failed `task_configs` does not change the state (the caller decides, with
    `mark_failed`). `stop` calls the plugin's `stop()` only if `start` succeeded and the instance is
    still STARTED, and at most once; afterwards the state is STOPPED whatever `stop()` did, and the
    lane takes no more callbacks (not waiting for one still running). `deleted` (KIP-883) never
    calls `start()`: it runs on the object `stop(deleting=True)` stopped, or on a new object that
    is only initialized, with the config resolved for its context.
    """

    def __init__(
        self,
        name: str,
        plugin: PluginDesc,
        config: Mapping[str, str],
        timeout: float,
        on_reconfigure: Callable[[], None],
        on_error: Callable[[BaseException], None],
        providers: ConfigProviders | None = None,
    ) -> None:
        self.name = name
        self.plugin = plugin
        self.config = dict(config)
        self.providers = providers or ConfigProviders()
        # The config the plugin gets: `config` with its references resolved (set by `start`), and
        # each value a reference was replaced by, kept out of failure messages and traces.
        self.resolved = dict(config)
        self._substituted: dict[str, str] = {}
        self.timeout = timeout
        self.state = InstanceState.INIT
        self.failure: PluginCallbackError | None = None
        # A lane of its own: callbacks of one connector are ordered, others are unaffected, and no
        # thread is held between callbacks. Its log lines carry the connector's name as a field of
        # their own (JSON logs).
        self._executor = CallbackLane(f"connector-{name}", functools.partial(log_fields, connector=name))
        self._connector: Connector | None = None
        # The stopped plugin object, kept for deleted() when the connector is being deleted.
        self._last: Connector | None = None
        self._context = _Context(on_reconfigure, on_error)

    async def _call(self, callback: str, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, fn)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except TimeoutError:
            # The thread cannot be interrupted; abandon it with this instance.
            raise PluginCallbackError(callback, self.name, None, self.timeout) from None
        except Exception as exc:
            raise self.callback_error(callback, exc) from exc

    def callback_error(self, callback: str, cause: BaseException) -> PluginCallbackError:
        """The failure of a callback that raised `cause`, with what the plugin may have echoed of
        the resolved config turned back into its references."""
        error = PluginCallbackError(callback, self.name, cause)
        error.args = (hide_resolved(str(error), self._substituted),)
        error.trace = hide_resolved(error.trace, self._substituted)
        return error

    def _resolve(self) -> None:
        """Resolves the config's references for the plugin (in the instance's lane: a file
        provider reads files)."""
        resolution = self.providers.try_resolve(self.config)
        if resolution.problems:
            raise _UnresolvedError(ConfigReferenceError(resolution.problems))
        self.resolved, self._substituted = resolution.config, resolution.substituted
        self._context.resolved = MappingProxyType(dict(self.resolved))

    def _initialized(self) -> Connector:
        connector = self.plugin.new_instance()
        connector.initialize(self._context)
        return connector

    async def start(self) -> None:
        def run() -> None:
            self._resolve()
            connector = self._initialized()
            connector.start(dict(self.resolved))
            self._connector = connector

        try:
            await self._call("start", run)
        except PluginCallbackError as exc:
            if isinstance(exc.__cause__, _UnresolvedError):
                exc = PluginCallbackError.unresolved(self.name, exc.__cause__.error)
            self._fail(exc)
            raise exc from None
        self.state = InstanceState.STARTED

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        connector = self._require_connector()
        configs = await self._call("task_configs", lambda: connector.task_configs(max_tasks))
        # As stored: a key copied from a config value that holds references gets the references back.
        return reverse_transform(self.config, [{str(k): str(v) for k, v in c.items()} for c in configs])

    async def task_class_name(self) -> str:
        connector = self._require_connector()
        cls = await self._call("task_class", connector.task_class)
        return f"{cls.__module__}.{cls.__qualname__}"

    async def stop(self, *, deleting: bool = False) -> None:
        """Stop the plugin if it was started; failures are logged and reported to the caller. When
        ``deleting``, the lane stays open for `deleted()`, which must follow."""
        connector, self._connector = self._connector, None
        was_started = self.state is InstanceState.STARTED
        if connector is not None and was_started:
            # Only an object that was running and gets stop() now is kept for deleted(); a failed
            # one is not, so deleted() gets a new object instead.
            self._last = connector
        self.state = InstanceState.STOPPED
        try:
            if connector is not None and was_started:
                await self._call("stop", connector.stop)
        finally:
            if not deleting:
                self._executor.shutdown(wait=False)

    async def deleted(self) -> None:
        """KIP-883: the plugin's `deleted()`, then the lane is closed. It runs on the object that
        `stop(deleting=True)` stopped if there is one; otherwise (the instance was never started,
        or its plugin failed) on a new object that is initialized, its context holding the resolved
        config, but not started. A config whose references do not resolve fails it without a call
        to the plugin, with a message naming the keys."""

        def run() -> None:
            connector = self._last
            if connector is None:
                self._resolve()
                connector = self._initialized()
            connector.deleted()

        try:
            await self._call("deleted", run)
        except PluginCallbackError as exc:
            if isinstance(exc.__cause__, _UnresolvedError):
                error = exc.__cause__.error
                message = f"Connector {self.name}: deleted() not called: {error}"
                raise PluginCallbackError("deleted", self.name, error, message=message) from None
            raise
        finally:
            self._last = None
            self._executor.shutdown(wait=False)

    def mark_failed(self, error: PluginCallbackError) -> None:
        self._fail(error)

    def _fail(self, error: PluginCallbackError) -> None:
        self.state = InstanceState.FAILED
        self.failure = error

    def _require_connector(self) -> Connector:
        if self._connector is None:
            raise PluginCallbackError("task_configs", self.name, RuntimeError("connector is not started"))
        return self._connector
