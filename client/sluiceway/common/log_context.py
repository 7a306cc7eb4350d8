"""Fields a log line carries because of where it was written, not what it says: the connector, the
task and (in an executor) the batch it was written for. JSON logs (`--log-format json`) show them
as fields of their own, so a log search can select one connector's or task's lines without parsing
messages.

The fields live in a context variable: `bind_log_fields` sets them for the rest of the current
thread (a task runner's thread, a connector's own thread), `log_fields` for a block (one API call,
which runs in an asyncio task of its own and so in a context of its own). `LogContextFilter` copies
them onto each record."""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from types import MappingProxyType
from typing import Final

__all__ = ["LogContextFilter", "bind_log_fields", "current_log_fields", "log_fields"]

_EMPTY: Final[MappingProxyType[str, object]] = MappingProxyType({})
_FIELDS: contextvars.ContextVar[MappingProxyType[str, object]] = contextvars.ContextVar(
    "sluiceway_log_fields", default=_EMPTY
)


def current_log_fields() -> MappingProxyType[str, object]:
    return _FIELDS.get()


def bind_log_fields(**fields: object) -> None:
    """Adds ``fields`` (a None value removes one) for the rest of the current context: a thread's
    lifetime when called at its start."""
    merged = {**_FIELDS.get(), **fields}
    _FIELDS.set(MappingProxyType({k: v for k, v in merged.items() if v is not None}))


@contextlib.contextmanager
def log_fields(**fields: object) -> Iterator[None]:
    """Adds ``fields`` for the block only."""
    merged = {**_FIELDS.get(), **fields}
    token = _FIELDS.set(MappingProxyType({k: v for k, v in merged.items() if v is not None}))
    try:
        yield
    finally:
        _FIELDS.reset(token)


class LogContextFilter(logging.Filter):
    """Copies the current fields onto each record (as `extra=` would); a field the call itself gave
    in `extra=` wins. Lets every record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _FIELDS.get().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True
