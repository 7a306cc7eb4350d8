"""The log levels of this process's Python loggers, read and set in Kafka Connect's words (KIP-495's
`/admin/loggers`): TRACE, DEBUG, INFO, WARN, ERROR, FATAL and OFF.

Python has no TRACE and no OFF: TRACE is level 5 (below DEBUG, so everything DEBUG logs and more),
OFF is above CRITICAL (nothing is logged). A level set here lasts until the process restarts."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["LEVELS", "LogLevelError", "LogLevels", "LoggerLevel", "UnknownLoggerError"]

ROOT: Final = "root"
_TRACE: Final = 5
_OFF: Final = logging.CRITICAL + 10
LEVELS: Final[Mapping[str, int]] = {
    "TRACE": _TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": _OFF,
}

# Records at TRACE print their level by that name.
logging.addLevelName(_TRACE, "TRACE")


class LogLevelError(ValueError):
    """A level that is none of LEVELS."""


class UnknownLoggerError(LookupError):
    """No logger of that name exists in this process."""


@dataclass(frozen=True)
class LoggerLevel:
    """A logger's name, the level it logs at, and when this module last set it (ms since the epoch;
    None for a level from start-up)."""

    name: str
    level: str
    last_modified_ms: int | None


def _level_name(level: int) -> str:
    """The Kafka Connect word for a Python level: the highest word at or below it."""
    if level >= _OFF:
        return "OFF"
    fitting = [(value, word) for word, value in LEVELS.items() if value <= level]
    return max(fitting)[1] if fitting else "TRACE"


def _existing(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


class LogLevels:
    """Reads and sets levels. Threading: any thread; the times of changes are kept under a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modified: dict[str, int] = {}

    def _entry(self, name: str, logger: logging.Logger) -> LoggerLevel:
        with self._lock:
            modified = self._modified.get(name)
        return LoggerLevel(name, _level_name(logger.getEffectiveLevel()), modified)

    def all(self) -> list[LoggerLevel]:
        """The root logger and every logger with a level of its own, `root` first, then by name."""
        named = sorted(
            (name, logger)
            for name, logger in logging.Logger.manager.loggerDict.items()
            if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET
        )
        return [self._entry(ROOT, logging.getLogger()), *(self._entry(n, lg) for n, lg in named)]

    def get(self, name: str) -> LoggerLevel:
        logger = _existing(name)
        if logger is None:
            raise UnknownLoggerError(f"No logger named {name!r} exists in this replica")
        return self._entry(name, logger)

    def set(self, name: str, level: str) -> list[str]:
        """Sets `name` (created when missing) and every logger below it that has a level of its
        own to `level`; the names set, sorted."""
        value = LEVELS.get(level.strip().upper())
        if value is None:
            raise LogLevelError(f"Unknown log level {level!r}; use one of {', '.join(LEVELS)}")
        if not name or name != name.strip():
            raise LogLevelError(f"A logger name must be non-empty without surrounding spaces, got {name!r}")
        target = logging.getLogger() if name == ROOT else logging.getLogger(name)
        prefix = "" if name == ROOT else f"{name}."
        below = [
            (child_name, child)
            for child_name, child in logging.Logger.manager.loggerDict.items()
            if isinstance(child, logging.Logger)
            and child_name.startswith(prefix)
            and child.level != logging.NOTSET
            and child is not target
        ]
        now = int(time.time() * 1000)
        target.setLevel(value)
        changed = [name]
        for child_name, child in below:
            child.setLevel(value)
            changed.append(child_name)
        with self._lock:
            for changed_name in changed:
                self._modified[changed_name] = now
        return sorted(changed)
