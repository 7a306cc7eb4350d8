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

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

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

# The worker's defaults, which a connector that sets none of the keys runs with.
WORKER_RESTART_DEFAULTS: Final[Mapping[str, str]] = {
    RESTART_ENABLE_CONFIG: "true",
    RESTART_BACKOFF_INITIAL_MS_CONFIG: "1000",
    RESTART_BACKOFF_MAX_MS_CONFIG: "60000",
    RESTART_MAX_ATTEMPTS_CONFIG: "-1",
}

# How far a pause may stray from its nominal length either way (0.2: between 80% and 120%).
JITTER: Final = 0.2

_UNSET = "Unset or empty: the worker's value"
_DOCS: Final[Mapping[str, str]] = {
    RESTART_ENABLE_CONFIG: (
        "Whether a task that fails by an error of its connector or of its data is started again by "
        f"its executor after a pause (false: it stays FAILED until restarted by hand). {_UNSET} "
        "(default true)."
    ),
    RESTART_BACKOFF_INITIAL_MS_CONFIG: (
        "The pause, in milliseconds, before the first automatic restart of a failed task; each "
        "further restart in a row waits twice as long as the one before, up to "
        f"task.restart.backoff.max.ms, and every pause is varied by up to 20% either way. {_UNSET} "
        "(default 1000)."
    ),
    RESTART_BACKOFF_MAX_MS_CONFIG: (
        "The longest pause, in milliseconds, before an automatic restart (before the 20% variation). "
        "A task that then runs this long without failing counts its restarts from zero again. "
        f"{_UNSET} (default 60000)."
    ),
    RESTART_MAX_ATTEMPTS_CONFIG: (
        "How many automatic restarts in a row a failing task gets before it stays FAILED: -1 for no "
        f"limit, 0 for none. {_UNSET} (default -1)."
    ),
}


def _definition(defaults: Mapping[str, Any]) -> ConfigDef:
    def key(name: str, kind: ConfigType, minimum: int | None, order: int, display: str) -> ConfigDef:
        validator: Validator | None = None if minimum is None else Range.at_least(minimum)
        default = defaults[name]
        if default is None and validator is not None:
            validator = Nullable(validator)
        return definition.define(
            name,
            kind,
            default,
            validator,
            Importance.LOW,
            _DOCS[name],
            RESTART_GROUP,
            order,
            Width.SHORT,
            display,
        )

    definition = ConfigDef()
    key(RESTART_ENABLE_CONFIG, ConfigType.BOOLEAN, None, 1, "Restart failed tasks")
    key(RESTART_BACKOFF_INITIAL_MS_CONFIG, ConfigType.LONG, 1, 2, "First restart pause (ms)")
    key(RESTART_BACKOFF_MAX_MS_CONFIG, ConfigType.LONG, 1, 3, "Longest restart pause (ms)")
    key(RESTART_MAX_ATTEMPTS_CONFIG, ConfigType.INT, -1, 4, "Restarts in a row")
    return definition


def restart_config_def() -> ConfigDef:
    """The keys as a connector sets them: each optional, unset meaning the worker's value."""
    return _definition(dict.fromkeys(WORKER_RESTART_DEFAULTS))


@functools.cache
def _worker_config_def() -> ConfigDef:
    # Built once: every task run reads its policy through it.
    typed = _definition(dict.fromkeys(WORKER_RESTART_DEFAULTS)).parse(WORKER_RESTART_DEFAULTS)
    return _definition(typed)


@dataclass(frozen=True)
class RestartPolicy:
    """How a task's executor restarts it after its own failures (see the module doc)."""

    enabled: bool = True
    backoff_initial_ms: int = 1000
    backoff_max_ms: int = 60000
    max_attempts: int = -1

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
        values = _worker_config_def().parse(chosen)
        return cls(
            enabled=bool(values[RESTART_ENABLE_CONFIG]),
            backoff_initial_ms=int(values[RESTART_BACKOFF_INITIAL_MS_CONFIG]),
            backoff_max_ms=int(values[RESTART_BACKOFF_MAX_MS_CONFIG]),
            max_attempts=int(values[RESTART_MAX_ATTEMPTS_CONFIG]),
        )

    def allows(self, attempt: int) -> bool:
        """Whether automatic restart number ``attempt`` (1 for the first in a row) may happen."""
        return self.enabled and (self.max_attempts < 0 or attempt <= self.max_attempts)

    def delay_ms(self, attempt: int, variation: float = 1.0) -> int:
        """The pause before restart number ``attempt``: the initial pause doubled for each earlier
        attempt, capped at the maximum, times ``variation`` (kept within 1 ± JITTER)."""
        # The exponent is capped: past 2**40 the maximum has long been reached.
        nominal = min(self.backoff_initial_ms << min(max(attempt - 1, 0), 40), self.backoff_max_ms)
        factor = min(max(variation, 1.0 - JITTER), 1.0 + JITTER)
        return round(nominal * factor)

    @property
    def stable_after_s(self) -> float:
        """How long a task must run without failing for its count of restarts to start again."""
        return self.backoff_max_ms / 1000.0


def check_worker_restart_config(worker_config: Mapping[str, str]) -> None:
    """Raises ConfigException when a worker's `task.restart.*` key is malformed."""
    RestartPolicy.from_configs(worker_config)
