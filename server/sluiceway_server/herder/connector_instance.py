"""One running `Connector` plugin instance on the leader. Every plugin callback runs on the
instance's own thread under a time limit, so a slow or hung plugin fails its own connector
and never stalls the API or other connectors (docs/ARCHITECTURE.md §8)."""

from __future__ import annotations

import asyncio
import enum
import logging
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sluiceway.connect import Connector
from sluiceway.connect.plugins import PluginDesc

log = logging.getLogger(__name__)
T = TypeVar("T")


class PluginCallbackError(Exception):
    """A plugin callback raised or timed out; `trace` is what goes to the status topic."""

    def __init__(
        self, callback: str, connector: str, cause: BaseException | None, timeout: float | None = None
    ):
        if cause is None:
            message = f"Connector {connector}: {callback}() did not return within {timeout:.1f}s"
            trace = message
        else:
            message = f"Connector {connector}: {callback}() failed: {type(cause).__name__}: {cause}"
            trace = "".join(traceback.format_exception(cause))
        super().__init__(message)
        self.callback = callback
        self.timed_out = cause is None
        self.trace = trace


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

    def request_task_reconfiguration(self) -> None:
        self._on_reconfigure()

    def raise_error(self, error: BaseException) -> None:
        self._on_error(error)


class ConnectorInstance:
    def __init__(
        self,
        name: str,
        plugin: PluginDesc,
        config: Mapping[str, str],
        timeout: float,
        on_reconfigure: Callable[[], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        self.name = name
        self.plugin = plugin
        self.config = dict(config)
        self.timeout = timeout
        self.state = InstanceState.INIT
        self.failure: PluginCallbackError | None = None
        # One thread per instance: callbacks of one connector are ordered, others are unaffected.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"connector-{name}")
        self._connector: Connector | None = None
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
            raise PluginCallbackError(callback, self.name, exc) from exc

    async def start(self) -> None:
        def run() -> None:
            connector = self.plugin.new_instance()
            connector.initialize(self._context)
            connector.start(dict(self.config))
            self._connector = connector

        try:
            await self._call("start", run)
        except PluginCallbackError as exc:
            self._fail(exc)
            raise
        self.state = InstanceState.STARTED

    async def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        connector = self._require_connector()
        configs = await self._call("task_configs", lambda: connector.task_configs(max_tasks))
        return [{str(k): str(v) for k, v in c.items()} for c in configs]

    def task_class_name(self) -> str:
        connector = self._require_connector()
        cls = connector.task_class()
        return f"{cls.__module__}.{cls.__qualname__}"

    async def stop(self) -> None:
        """Stop the plugin if it was started; failures are logged and reported to the caller."""
        connector, self._connector = self._connector, None
        was_started = self.state is InstanceState.STARTED
        self.state = InstanceState.STOPPED
        try:
            if connector is not None and was_started:
                await self._call("stop", connector.stop)
        finally:
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
