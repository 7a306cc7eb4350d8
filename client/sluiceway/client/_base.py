"""Settings shared by the sync and asyncio clients: where the server is, default deadlines
and call metadata."""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any, Final, Protocol, TypeAlias

DEFAULT_TARGET: Final = "localhost:8083"
TARGET_ENV: Final = "SLUICEWAY_SERVER"
DEFAULT_TIMEOUT: Final = 30.0

Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]
ChannelOptions: TypeAlias = Sequence[tuple[str, Any]]


class _Unset(enum.Enum):
    UNSET = "UNSET"


# Marks a per-call `timeout` that was not given (None already means "no deadline").
UNSET: Final = _Unset.UNSET
TimeoutArg: TypeAlias = float | _Unset | None


def resolve_target(target: str | None) -> str:
    """The explicit target, else $SLUICEWAY_SERVER, else localhost:8083."""
    if target:
        return target
    return os.environ.get(TARGET_ENV) or DEFAULT_TARGET


def check_timeout(timeout: float | None) -> float | None:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
    return timeout


def call_timeout(timeout: TimeoutArg, default: float | None) -> float | None:
    """A call's overall deadline in seconds: its own `timeout` if given, else the client's."""
    if isinstance(timeout, _Unset):
        return default
    return check_timeout(timeout)


def call_metadata(metadata: Metadata) -> tuple[tuple[str, str | bytes], ...]:
    # gRPC rejects upper-case metadata keys at call time with a cryptic error; fail early.
    result = tuple((key, value) for key, value in metadata)
    for key, _ in result:
        if key != key.lower():
            raise ValueError(f"gRPC metadata keys must be lower case, got {key!r}")
    return result


class PagedRequest(Protocol):
    """A List request (AIP-158): the client sets its token to fetch the next page."""

    page_token: str


class PagedResponse(Protocol):
    """A List response: an empty `next_page_token` marks the last page."""

    @property
    def next_page_token(self) -> str: ...
