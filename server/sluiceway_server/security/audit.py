"""The audit log: one JSON line per mutation, with who called, what, on which connector and how it
ended; never a config value. Lines go to the logger `sluiceway.audit` and, when audit.log.file is
set, to that file too."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

from sluiceway_server.security.principals import Principal

__all__ = ["AUDIT_LOGGER", "AuditLog"]

AUDIT_LOGGER = "sluiceway.audit"


class AuditLog:
    """Writes audit lines. Threading: called on the event loop; each line is one logging call, so
    lines from concurrent calls never interleave."""

    def __init__(self, file: str = "") -> None:
        self._log = logging.getLogger(AUDIT_LOGGER)
        self._log.setLevel(logging.INFO)
        self._handler: logging.Handler | None = None
        if file:
            Path(file).parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(file, encoding="utf-8")
            handler.setFormatter(logging.Formatter("%(message)s"))
            self._log.addHandler(handler)
            self._handler = handler

    def record(
        self, principal: Principal | None, method: str, connector: str, outcome: str, peer: str
    ) -> None:
        """One line; `principal` None for a caller that did not authenticate."""
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "principal": principal.name if principal is not None else "",
            "role": principal.role.value if principal is not None else "",
            "via": principal.via if principal is not None else "unauthenticated",
            "method": method.rsplit("/", 1)[-1],
            "connector": connector,
            "outcome": outcome,
            "peer": peer,
        }
        self._log.info(json.dumps(line, sort_keys=False))

    def close(self) -> None:
        if self._handler is not None:
            self._log.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
