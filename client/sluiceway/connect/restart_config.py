"""Automatic restarts of failed tasks: the `task.restart.*` keys and the policy an executor follows.

A task that fails by its own doing (an error of its connector or of the data) is started again by
its executor after a pause: the first pause is `task.restart.backoff.initial.ms`, each later one
twice the one before, never above `task.restart.backoff.max.ms`, and each varied by up to a fifth
either way so tasks that failed together do not come back together. `task.restart.max.attempts`
bounds how many automatic restarts a task gets in a row (-1: no bound); once they are used up, or
with `task.restart.enable=false`, the task stays FAILED until someone restarts it. A task that runs
longer than the longest pause without failing starts counting from zero again, and so does one an
operator restarts. Losing Spark Connect or a Kafka broker is not the task's failure: the executor
waits for them without counting an attempt (see ``sluiceway_executor.failures``).

Every key is a worker key (the default for all connectors, sent to executors in Welcome) and a
connector key that, when set, wins for that connector's tasks; a connector value that is empty counts
as unset. A worker value may not be empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sluiceway.common.retry import RetryPolicy
from sluiceway.connect.config import (
    ConfigDef,
    ConfigType,
    Importance,
    Nullable,
    Range,
    Validator,
    Width,
    java_trim,
)

__all__ = [
    "RESTART_BACKOFF_INITIAL_MS_CONFIG",
    "RESTART_BACKOFF_MAX_MS_CONFIG",
    "RESTART_ENABLE_CONFIG",
    "RESTART_GROUP",
    "RESTART_MAX_ATTEMPTS_CONFIG",
    "WORKER_RESTART_CONFIG_DEF",
    "WORKER_RESTART_DEFAULTS",
    "RestartPolicy",
    "check_worker_restart_config",
    "restart_config_def",
]

RESTART_GROUP: Final = "Automatic Restarts"
RESTART_ENABLE_CONFIG: Final = "task.restart.enable"
RESTART_BACKOFF_INITIAL_MS_CONFIG: Final = "task.restart.backoff.initial.ms"
RESTART_BACKOFF_MAX_MS_CONFIG: Final = "task.restart.backoff.max.ms"
RESTART_MAX_ATTEMPTS_CONFIG: Final = "task.restart.max.attempts"

# How far a pause may stray from its nominal length either way (0.2: between 80% and 120%).
JITTER: Final = 0.2

# Each key once: its type, the lowest value it accepts (None: no bound), the worker's default
# (which a connector that leaves the key unset runs with) and its display name.
_KEYS: Final = (
    (RESTART_ENABLE_CONFIG, ConfigType.BOOLEAN, None, "true", "Restart failed tasks"),
    (RESTART_BACKOFF_INITIAL_MS_CONFIG, ConfigType.LONG, 1, "1000", "First restart pause (ms)"),
    (RESTART_BACKOFF_MAX_MS_CONFIG, ConfigType.LONG, 1, "60000", "Longest restart pause (ms)"),
    (RESTART_MAX_ATTEMPTS_CONFIG, ConfigType.INT, -1, "-1", "Restarts in a row"),
)

# The worker's defaults as config text.
WORKER_RESTART_DEFAULTS: Final[Mapping[str, str]] = {name: default for name, _, _, default, _ in _KEYS}

# What the keys mean in a connector config, where each may be left unset.
_CONNECTOR_DOCS: Final[Mapping[str, str]] = {
    RESTART_ENABLE_CONFIG: (
        "Whether a task that fails by an error of its connector or of its data is started again by "
        "its executor after a pause (false: it stays FAILED until restarted by hand)."
    ),
    RESTART_BACKOFF_INITIAL_MS_CONFIG: (
        "The pause, in milliseconds, before the first automatic restart of a failed task; each "
        "further restart in a row waits twice as long as the one before, up to "
        "task.restart.backoff.max.ms, and every pause is varied by up to 20% either way."
    ),
    RESTART_BACKOFF_MAX_MS_CONFIG: (
        "The longest pause, in milliseconds, before an automatic restart (before the 20% variation). "
        "A task that then runs this long without failing counts its restarts from zero again."
    ),
    RESTART_MAX_ATTEMPTS_CONFIG: (
        "How many automatic restarts in a row a failing task gets before it stays FAILED: -1 for no "
        "limit, 0 for none."
    ),
}

# What the keys mean in the worker config (docs/CONFIGURATION.md's settings table is made from these).
_WORKER_DOCS: Final[Mapping[str, str]] = {
    RESTART_ENABLE_CONFIG: (
        "whether a task that fails by its own error (its connector's or its data's) is started again "
        "by its executor ([When a task fails](OPERATIONS.md#when-a-task-fails)); a connector's own key wins"
    ),
    RESTART_BACKOFF_INITIAL_MS_CONFIG: (
        "the pause before the first automatic restart; each next one doubles, every pause varied by "
        "up to 20% either way; a connector's own key wins"
    ),
    RESTART_BACKOFF_MAX_MS_CONFIG: (
        "the longest pause; a task that then runs this long without failing counts from zero again; "
        "a connector's own key wins"
    ),
    RESTART_MAX_ATTEMPTS_CONFIG: (
        "automatic restarts in a row before the task stays FAILED: `-1` no limit, `0` none; a "
        "connector's own key wins"
    ),
}


def _definition(*, worker: bool) -> ConfigDef:
    """The four keys, as the worker declares them (with its defaults) or as a connector does (each
    optional, unset meaning the worker's value)."""
    definition = ConfigDef()
    for order, (name, kind, minimum, default, display) in enumerate(_KEYS, start=1):
        validator: Validator | None = None if minimum is None else Range.at_least(minimum)
        if worker:
            documentation = _WORKER_DOCS[name]
        else:
            documentation = f"{_CONNECTOR_DOCS[name]} Unset or empty: the worker's value (default {default})."
            validator = None if validator is None else Nullable(validator)
        definition.define(
            name,
            kind,
            default if worker else None,
            validator,
            Importance.LOW,
            documentation,
            RESTART_GROUP,
            order,
            Width.SHORT,
            display,
        )
    return definition


WORKER_RESTART_CONFIG_DEF: Final = _definition(worker=True)
"""The keys as the worker declares them, built once: part of the worker's settings
(``sluiceway.connect.worker_settings``), and what every task run parses its policy with. Read only."""


def restart_config_def() -> ConfigDef:
    """The keys as a connector sets them: each optional, unset meaning the worker's value."""
    return _definition(worker=False)


def _worker_default(name: str) -> Any:
    return WORKER_RESTART_CONFIG_DEF.keys()[name].default


@dataclass(frozen=True)
class RestartPolicy:
    """How a task's executor restarts it after its own failures (see the module doc)."""

    enabled: bool = _worker_default(RESTART_ENABLE_CONFIG)
    backoff_initial_ms: int = _worker_default(RESTART_BACKOFF_INITIAL_MS_CONFIG)
    backoff_max_ms: int = _worker_default(RESTART_BACKOFF_MAX_MS_CONFIG)
    max_attempts: int = _worker_default(RESTART_MAX_ATTEMPTS_CONFIG)

    @classmethod
    def from_configs(
        cls, worker_config: Mapping[str, str], connector_config: Mapping[str, str] | None = None
    ) -> RestartPolicy:
        """The policy of a connector's tasks: each key from ``connector_config`` when set there and
        not empty, else from ``worker_config``, else its default. Raises ConfigException naming a bad
        key, among them an empty worker value (which would otherwise hide the default silently)."""
        chosen = {name: worker_config[name] for name in WORKER_RESTART_DEFAULTS if name in worker_config}
        for name in WORKER_RESTART_DEFAULTS:
            value = java_trim((connector_config or {}).get(name) or "")
            if value:
                chosen[name] = value
        values = WORKER_RESTART_CONFIG_DEF.parse(chosen)
        return cls(
            enabled=bool(values[RESTART_ENABLE_CONFIG]),
            backoff_initial_ms=int(values[RESTART_BACKOFF_INITIAL_MS_CONFIG]),
            backoff_max_ms=int(values[RESTART_BACKOFF_MAX_MS_CONFIG]),
            max_attempts=int(values[RESTART_MAX_ATTEMPTS_CONFIG]),
        )

    def allows(self, attempt: int) -> bool:
        """Whether automatic restart number ``attempt`` (1 for the first in a row) may happen."""
        return self.enabled and (self.max_attempts < 0 or attempt <= self.max_attempts)

    @property
    def pauses(self) -> RetryPolicy:
        """The pauses as the shared retry policy: from the initial pause, doubling, capped at the
        maximum, each varied by up to JITTER either way (the executor's RestartSchedule runs it)."""
        return RetryPolicy(
            initial=self.backoff_initial_ms / 1000.0, maximum=self.backoff_max_ms / 1000.0, jitter=JITTER
        )

    def delay_ms(self, attempt: int, variation: float = 1.0) -> int:
        """The pause before restart number ``attempt``, times ``variation`` (kept within 1 ± JITTER)."""
        factor = min(max(variation, 1.0 - JITTER), 1.0 + JITTER)
        return round(self.pauses.nominal(attempt) * 1000.0 * factor)

    @property
    def stable_after_s(self) -> float:
        """How long a task must run without failing for its count of restarts to start again."""
        return self.backoff_max_ms / 1000.0


def check_worker_restart_config(worker_config: Mapping[str, str]) -> None:
    """Raises ConfigException when a worker's `task.restart.*` key is malformed."""
    RestartPolicy.from_configs(worker_config)
