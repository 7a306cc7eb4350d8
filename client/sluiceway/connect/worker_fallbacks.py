"""Connector keys that stand for a worker key of the same name: `heartbeat.interval.ms`,
`heartbeat.records.topic` (KIP-910) and the `task.restart.*` keys. A connector that leaves one unset
or empty runs with the worker's value; KIP-910 says so of `heartbeat.records.topic`, and the restart
keys follow the same rule. Validation checks an empty value as if unset, and everything that uses
the keys reads it so (``connector_setting``); the worker's own value may not be empty."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sluiceway.connect.config import java_trim
from sluiceway.connect.framework_config import HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_RECORDS_TOPIC_CONFIG
from sluiceway.connect.restart_config import WORKER_RESTART_DEFAULTS

__all__ = ["WORKER_FALLBACK_KEYS", "connector_setting"]

WORKER_FALLBACK_KEYS: Final = frozenset(
    {HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_RECORDS_TOPIC_CONFIG, *WORKER_RESTART_DEFAULTS}
)


def connector_setting(config: Mapping[str, str], key: str) -> str | None:
    """The connector's own value of ``key`` (one of WORKER_FALLBACK_KEYS), trimmed as parsing trims
    it; None when the connector leaves it unset or empty, so that the worker's value applies."""
    raw = config.get(key)
    value = java_trim(raw) if raw is not None else ""
    return value or None
