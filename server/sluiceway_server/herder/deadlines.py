"""Deadlines of API calls: a request names the stage it is in, so that when the caller's deadline
passes, DEADLINE_EXCEEDED says what the request was doing (Kafka Connect's "Request timed out"
with the herder's current stage)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from sluiceway_server.errors import RequestTimeoutError

T = TypeVar("T")

# What a request is doing, shared by the request and the tasks it spawns (contexts are copied,
# the trail object is not). A stage may be a callable: the request then reports what the
# connector's reconciliation is doing.
Stage = str | Callable[[], str]


class _StageTrail:
    def __init__(self) -> None:
        self.stages: list[Stage] = ["processing the request"]
        # The innermost stage when the deadline cancelled the request (the stack unwinds after).
        self.at_cancel: str | None = None


def _render(item: Stage) -> str:
    return item() if callable(item) else item


_trail: contextvars.ContextVar[_StageTrail | None] = contextvars.ContextVar("stage_trail", default=None)


@contextlib.contextmanager
def stage(description: Stage) -> Iterator[None]:
    """Names what a request is doing, for the DEADLINE_EXCEEDED message (Kafka's TickThreadStage)."""
    trail = _trail.get()
    if trail is None:
        yield
        return
    trail.stages.append(description)
    try:
        yield
    except asyncio.CancelledError:
        if trail.at_cancel is None:
            trail.at_cancel = _render(description)
        raise
    finally:
        trail.stages.pop()


async def with_deadline(coro: Awaitable[T], timeout: float | None) -> T:
    """Await `coro` within the caller's remaining time; DEADLINE_EXCEEDED names the current stage."""
    trail = _StageTrail()
    token = _trail.set(trail)
    try:
        return await asyncio.wait_for(coro, timeout)
    except TimeoutError:
        raise RequestTimeoutError(trail.at_cancel or _render(trail.stages[-1])) from None
    finally:
        _trail.reset(token)
