"""KIP-883: a deleted connector's `deleted()` callback.

Deleting a connector writes, before the tombstones, a `deleted-connector-{c}` record holding its
config (ConfigStore.remove_connector_config). When the reconciler sees the deletion of a connector
whose plugin runs, it stops the instance and hands it here, and the callback follows `stop()` on
that same object. A connector whose plugin does not run (stopped, paused, failed) is never started
just for the callback (a stopped connector is not started, KIP-875): a new object is initialized
with the recorded config and gets `deleted()` alone. The callback runs in the background, limited
by plugin.callback.timeout.ms, so it never holds up the deletion. Once it has returned, raised or
timed out, the record is tombstoned. A control plane that dies in between leaves the record, and the
next one to lead calls the callback again, on a new object as above — which is why plugins must keep
it idempotent.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from sluiceway.common.retry import RetryPolicy
from sluiceway.connect.config_providers import ConfigProviders
from sluiceway.connect.plugins import PluginNotFoundError, PluginRegistry
from sluiceway_server.herder.connector_instance import ConnectorInstance, PluginCallbackError
from sluiceway_server.storage import ClusterConfigState, ConfigStore

log = logging.getLogger(__name__)

# Outcomes kept for delete calls that wait, per connector name; the oldest are dropped.
_KEPT_OUTCOMES = 1000
# Tombstoning the record of a deleted() call that ran: five attempts, then it is left for the next
# leader (which calls deleted() once more).
_CLEAR_RETRY = RetryPolicy(initial=0.5, maximum=4.0, max_attempts=5)


class DeletedOutcome(enum.Enum):
    PENDING = "PENDING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    TIMED_OUT = "TIMED_OUT"


@dataclass(frozen=True)
class DeletedCallbackResult:
    outcome: DeletedOutcome
    # The trace of a raising callback, or what ran out of time.
    error: str = ""


PENDING = DeletedCallbackResult(DeletedOutcome.PENDING)


class DeletedCallbacks:
    """Runs the due deleted() callbacks on the control plane's event loop, one per connector at a
    time, and remembers how each went for delete calls that wait."""

    def __init__(
        self,
        *,
        config_store: ConfigStore,
        plugins: PluginRegistry,
        plugin_timeout: float,
        store_timeout: float = 30.0,
        providers: ConfigProviders | None = None,
    ) -> None:
        self.config_store = config_store
        self.plugins = plugins
        # A new instance resolves the recorded config's references for its context (ConnectorInstance).
        self.providers = providers or ConfigProviders()
        self.plugin_timeout = plugin_timeout
        self.store_timeout = store_timeout
        self._running: dict[str, asyncio.Task[DeletedCallbackResult]] = {}
        # The config each finished callback ran with: a reconcile that still sees its record (the
        # tombstone not read back yet) must not call it again.
        self._finished: OrderedDict[str, tuple[Mapping[str, str], DeletedCallbackResult]] = OrderedDict()

    async def left_over(self, snap: ClusterConfigState) -> list[str]:
        """At start-up: the deleted connectors whose callback did not finish under the previous
        leader, for the reconciler to call. A record for a connector that exists is dropped: the
        deletion never reached its tombstone, or the name was created again since, and deleted()
        could clean up what a live connector uses."""
        due: list[str] = []
        for name in snap.pending_deleted_callbacks:
            if not snap.contains(name):
                due.append(name)
                continue
            log.warning("connector %s exists: dropping the deleted() callback recorded for it", name)
            try:
                await asyncio.to_thread(self.config_store.remove_deleted_callback, name, self.store_timeout)
            except Exception:
                log.exception("connector %s: cannot drop its deleted() callback record", name)
        return due

    def due(self, name: str, config: Mapping[str, str]) -> bool:
        """Whether the callback recorded for `name` with `config` is neither running nor done."""
        finished = self._finished.get(name)
        return name not in self._running and (finished is None or finished[0] != config)

    def launch(self, name: str, config: Mapping[str, str], instance: ConnectorInstance | None) -> None:
        """Calls the connector's deleted() in the background: on `instance`, whose running plugin
        was stopped with `stop(deleting=True)`, or, without one, on a new instance over `config`
        that is initialized but never started."""
        if not self.due(name, config):
            return
        task = asyncio.get_running_loop().create_task(
            self._run(name, dict(config), instance), name=f"deleted-callback-{name}"
        )
        self._running[name] = task

    async def outcome(self, name: str) -> DeletedCallbackResult:
        """How the connector's last callback went, waiting for one that runs; PENDING if unknown."""
        task = self._running.get(name)
        if task is not None:
            return await asyncio.shield(task)
        finished = self._finished.get(name)
        return finished[1] if finished is not None else PENDING

    async def stop(self) -> None:
        """Abandons running callbacks; their records stay, so the next leader calls them again."""
        for task in list(self._running.values()):
            task.cancel()
        self._running.clear()

    async def _run(
        self, name: str, config: dict[str, str], instance: ConnectorInstance | None
    ) -> DeletedCallbackResult:
        try:
            result = await self._call(name, config, instance)
            self._finished[name] = (config, result)
            while len(self._finished) > _KEPT_OUTCOMES:
                self._finished.popitem(last=False)
            await self._clear(name, config)
            return result
        finally:
            self._running.pop(name, None)

    async def _call(
        self, name: str, config: Mapping[str, str], instance: ConnectorInstance | None
    ) -> DeletedCallbackResult:
        try:
            if instance is None:
                instance = self._fresh_instance(name, config)
            await instance.deleted()
        except PluginCallbackError as exc:
            log.warning("the deleted() callback of connector %s: %s", name, exc)
            outcome = DeletedOutcome.TIMED_OUT if exc.timed_out else DeletedOutcome.FAILED
            return DeletedCallbackResult(outcome, exc.trace)
        except PluginNotFoundError as exc:
            log.warning("connector %s: cannot call deleted(): %s", name, exc)
            return DeletedCallbackResult(DeletedOutcome.FAILED, str(exc))
        log.info("connector %s: deleted() returned", name)
        return DeletedCallbackResult(DeletedOutcome.SUCCEEDED)

    def _fresh_instance(self, name: str, config: Mapping[str, str]) -> ConnectorInstance:
        """An instance over the connector's last config that is never started: its deleted() runs
        on a new plugin object that is only initialized (ConnectorInstance.deleted)."""
        plugin = self.plugins.resolve(config.get("connector.class", ""))
        # Nothing to reconfigure or fail any more: the connector is gone.
        return ConnectorInstance(
            name, plugin, config, self.plugin_timeout, lambda: None, lambda e: None, providers=self.providers
        )

    async def _clear(self, name: str, config: Mapping[str, str]) -> None:
        """Tombstones the record, unless a newer deletion of the same name replaced it."""
        retry = _CLEAR_RETRY.start()
        while True:
            if self.config_store.snapshot().pending_deleted_callbacks.get(name) != config:
                return
            try:
                await asyncio.to_thread(self.config_store.remove_deleted_callback, name, self.store_timeout)
                return
            except Exception as exc:
                if not await retry.wait_async():
                    # The next leader will call deleted() once more: plugins keep it idempotent.
                    log.warning(
                        "connector %s: the deleted() callback ran but its record stays: %s", name, exc
                    )
                    return
