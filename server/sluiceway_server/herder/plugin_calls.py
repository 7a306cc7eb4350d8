"""Plugin code the API needs answers from: config validation and config definitions.

Neither may run on the event loop (a slow plugin would stall every RPC), and neither may run
without a time limit (a hung plugin would hold its caller for ever). `PluginCalls` runs such code
on a small pool of its own, each call limited by `plugin.callback.timeout.ms`; a call that overruns
is abandoned (a Python thread cannot be interrupted) and its caller gets PLUGIN_TIMEOUT. The pool is
bounded, so hung calls cannot multiply threads: at worst they fill the pool and later calls time
out waiting for it.

`PluginDefinitions` keeps each plugin class's combined config definition (framework keys plus the
plugin's own `config()`), computed once per class through `PluginCalls`: reads that mask passwords
and `GetPluginConfigDefinition` then never call plugin code again. A failure is remembered for a
while so that a plugin whose `config()` hangs costs one time-out per period, not one per read.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sluiceway.connect.config import ConfigDef
from sluiceway.connect.plugins import PluginDesc
from sluiceway.connect.validation import connector_config_def
from sluiceway.errors import Reason
from sluiceway_server.errors import FailedPreconditionError, PluginTimeoutError, ServerError

log = logging.getLogger(__name__)
T = TypeVar("T")

POOL_SIZE = 4
# How long a failed definition is served from memory before config() is tried again.
FAILURE_RETRY_SECONDS = 60.0


class PluginCalls:
    """Runs plugin code off the event loop, on a bounded pool, each call time-limited."""

    def __init__(self, timeout: float, workers: int = POOL_SIZE) -> None:
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="plugin-call")

    async def run(self, what: str, fn: Callable[[], T]) -> T:
        """`fn()` in the pool; PluginTimeoutError naming `what` when it overruns. Its exceptions
        reach the caller unchanged."""
        future = asyncio.get_running_loop().run_in_executor(self._pool, fn)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except TimeoutError:
            raise PluginTimeoutError(what, self.timeout) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class PluginDefinitions:
    """The combined config definition of each plugin class, computed once, off the event loop."""

    def __init__(self, calls: PluginCalls, clock: Callable[[], float] = time.monotonic) -> None:
        self._calls = calls
        self._clock = clock
        self._definitions: dict[type, ConfigDef] = {}
        self._failures: dict[type, tuple[float, ServerError]] = {}
        self._loading: dict[type, asyncio.Task[ConfigDef]] = {}

    async def get(self, desc: PluginDesc) -> ConfigDef:
        """The plugin's definition; PluginTimeoutError or FailedPreconditionError when its
        `config()` hangs or fails (remembered for FAILURE_RETRY_SECONDS)."""
        cached = self._definitions.get(desc.cls)
        if cached is not None:
            return cached
        failure = self._failures.get(desc.cls)
        if failure is not None and self._clock() - failure[0] < FAILURE_RETRY_SECONDS:
            raise failure[1]
        loading = self._loading.get(desc.cls) or self._start_load(desc)
        # A caller that gives up (its deadline) must not cancel the load others share.
        return await asyncio.shield(loading)

    def warm(self, descs: Iterable[PluginDesc]) -> None:
        """Start loading these definitions in the background (at start-up, so reads find them)."""
        for desc in descs:
            if desc.cls not in self._definitions and desc.cls not in self._loading:
                self._start_load(desc).add_done_callback(functools.partial(_log_failure, desc.class_name))

    def _start_load(self, desc: PluginDesc) -> asyncio.Task[ConfigDef]:
        task = asyncio.get_running_loop().create_task(self._load(desc), name=f"definition-{desc.class_name}")
        self._loading[desc.cls] = task
        return task

    async def _load(self, desc: PluginDesc) -> ConfigDef:
        try:
            definition = await self._calls.run(
                f"config() of plugin {desc.class_name}", lambda: connector_config_def(desc)
            )
        except ServerError as exc:
            self._failures[desc.cls] = (self._clock(), exc)
            raise
        except Exception as exc:
            error = FailedPreconditionError(
                f"config() of plugin {desc.class_name} failed: {type(exc).__name__}: {exc}",
                reason=Reason.CONNECTOR_ERROR,
                metadata={"plugin": desc.class_name},
            )
            self._failures[desc.cls] = (self._clock(), error)
            raise error from exc
        finally:
            self._loading.pop(desc.cls, None)
        self._failures.pop(desc.cls, None)
        self._definitions[desc.cls] = definition
        return definition


def _log_failure(plugin: str, task: asyncio.Task[ConfigDef]) -> None:
    if not task.cancelled() and isinstance(task.exception(), ServerError):
        log.warning("config definition of plugin %s: %s", plugin, task.exception())
