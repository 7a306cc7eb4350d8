"""Logging for the `sluiceway` processes (control plane and executor): one handler on stderr, as
text or as one JSON object per line (`--log-format`), with credentials inside URLs redacted from
every record (`RedactingFilter`). A JSON line also carries the connector, task and batch it was
written for as fields of their own (`sluiceway.common.log_context`)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from sluiceway.common.log_context import LogContextFilter
from sluiceway.common.secrets import redact_url_credentials

__all__ = ["JsonFormatter", "RedactingFilter", "configure_logging"]

_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """Rewrites each record before it is formatted: its rendered message, its exception and stack
    text and its string `extra=` fields, with the password of every `scheme://user:password@host`
    (and of `password=` URL parameters) hidden. Lets every record through."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True  # a record whose arguments do not fit its message: the handler reports it
        redacted = redact_url_credentials(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_url_credentials(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_url_credentials(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _RESERVED and isinstance(value, str):
                setattr(record, key, redact_url_credentials(value))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and any `extra=` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        if record.exc_text:
            entry["exception"] = record.exc_text
        elif record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = record.stack_info
        return json.dumps(entry, default=str)


def configure_logging(level: str, fmt: str) -> None:
    """Replaces the root logger's handlers with one on stderr; `fmt` is "json" or "text"."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(LogContextFilter())
    handler.addFilter(RedactingFilter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
