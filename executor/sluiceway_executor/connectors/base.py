"""The part of a connector that every built-in plugin wrote out the same way.

It stays here rather than in the SDK (``sluiceway.connect``): it answers ``version()`` with
Sluiceway's own version, which is right only for the plugins shipped with Sluiceway, and the rest
(check the config, keep it, copy it to each task) is a few lines a plugin author writes as easily.
"""

from __future__ import annotations

from collections.abc import Mapping

import sluiceway
from sluiceway.connect import AbstractConfig, Connector

__all__ = ["BuiltInConnector"]


class BuiltInConnector(Connector):
    """A connector whose ``start`` parses its config with ``config()`` (so a bad value fails the
    start) and keeps it, with nothing running in the background, and whose tasks each get a copy of
    that config. Put it before ``SourceConnector`` or ``SinkConnector`` among the bases.

    A subclass still names its ``config()`` and ``task_class()``; it overrides ``task_configs``
    when its tasks need something of their own or when one task is all it can use, and ``_on_start``
    to check keys against each other or to log what it was started with.
    """

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        self._on_start(AbstractConfig(self.config(), props))
        self._props = dict(props)

    def _on_start(self, config: AbstractConfig) -> None:
        """Called by ``start`` with the parsed config, before it is kept; raising refuses it."""

    def stop(self) -> None:
        """Nothing runs in the background."""

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props) for _ in range(max_tasks)]
