"""Spark Python data sources (`pyspark.sql.datasource`) through which record I/O happens inside
Spark. Each is registered on a Spark Connect session with `spark.dataSource.register(cls)`; the
server's Python workers import this package, so it must be installed where Spark runs.

The names below are loaded on first use: every Python worker Spark starts for a session imports
the module of the one data source it runs, and importing the others too cost each such process
about a sixth of a second more (the source-task source brings in the connector SDK)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluiceway_executor.datasources.kafka import KafkaDataSource
    from sluiceway_executor.datasources.registry import register
    from sluiceway_executor.datasources.source_task import SourceTaskDataSource

__all__ = ["KafkaDataSource", "SourceTaskDataSource", "register"]

_HOMES = {
    "KafkaDataSource": "sluiceway_executor.datasources.kafka",
    "SourceTaskDataSource": "sluiceway_executor.datasources.source_task",
    "register": "sluiceway_executor.datasources.registry",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
