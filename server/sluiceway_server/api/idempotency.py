"""`request_id` de-duplication: a retried mutation with the same id gets the first call's
response instead of acting twice (AIP-155). In memory, per replica, bounded."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf.message import Message

from sluiceway_server.herder.errors import FieldViolation, InvalidArgumentError

R = TypeVar("R", bound=Message)


@dataclass
class _Entry:
    fingerprint: bytes
    future: asyncio.Future[Any]
    created: float


class RequestIdCache:
    def __init__(self, capacity: int = 10_000, ttl: float = 3600.0) -> None:
        self._capacity = capacity
        self._ttl = ttl
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    def _evict(self, now: float) -> None:
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if len(self._entries) <= self._capacity and now - entry.created < self._ttl:
                break
            del self._entries[key]

    async def run(self, method: str, request: Message, call: Callable[[], Awaitable[R]]) -> R:
        request_id: str = getattr(request, "request_id", "")
        if not request_id:
            return await call()
        unkeyed = type(request)()
        unkeyed.CopyFrom(request)
        unkeyed.ClearField("request_id")
        fingerprint = unkeyed.SerializeToString(deterministic=True)
        key = (method, request_id)
        now = time.monotonic()
        self._evict(now)
        entry = self._entries.get(key)
        if entry is not None:
            if entry.fingerprint != fingerprint:
                raise InvalidArgumentError(
                    f"request_id {request_id!r} was already used for a different {method} request",
                    reason="REQUEST_ID_REUSED",
                    violations=[FieldViolation("request_id", "already used for a different request")],
                )
            result: R = await asyncio.shield(entry.future)
            return result
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._entries[key] = _Entry(fingerprint, future, now)
        try:
            response = await call()
        except BaseException as exc:
            # Failures are not remembered: a retry of a failed call runs again.
            self._entries.pop(key, None)
            if not future.done():
                future.set_exception(exc)
                future.exception()  # mark retrieved; concurrent duplicates re-raise it
            raise
        future.set_result(response)
        return response
