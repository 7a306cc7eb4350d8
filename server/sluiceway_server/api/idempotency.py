"""`request_id` de-duplication: a retried mutation with the same id gets the first call's
response instead of acting twice (AIP-155). In the leader's memory, bounded; with `Answers`, each
answer is also recorded where a later leader finds it (the cluster topic), so a retry that reaches
the next leader after a failover gets the same answer too."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.protobuf.message import Message

from sluiceway.errors import Reason
from sluiceway_server.errors import FieldViolation, InvalidArgumentError

R = TypeVar("R", bound=Message)
log = logging.getLogger(__name__)


class Answers(Protocol):
    """Answers recorded beyond this process (cluster/answers.py)."""

    def lookup(self, method: str, request_id: str, max_age: float) -> tuple[str, bytes] | None:
        """(fingerprint, serialized response) of a recorded answer younger than max_age seconds."""
        ...

    async def record(self, method: str, request_id: str, fingerprint: str, response: bytes) -> None: ...


@dataclass
class _Entry:
    fingerprint: bytes
    future: asyncio.Future[Any]
    created: float


class RequestIdCache:
    def __init__(
        self,
        capacity: int = 10_000,
        ttl: float = 3600.0,
        answers: Answers | None = None,
        response_types: Mapping[str, type[Message]] | None = None,
    ) -> None:
        self._capacity = capacity
        self._ttl = ttl
        self._answers = answers
        # Method name -> its response message class, to read a recorded answer back.
        self._response_types = dict(response_types or {})
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
                    reason=Reason.REQUEST_ID_REUSED,
                    violations=[FieldViolation("request_id", "already used for a different request")],
                )
            result: R = await asyncio.shield(entry.future)
            return result
        recorded = self._recorded(method, request_id, fingerprint)
        if recorded is not None:
            return recorded  # type: ignore[return-value]  # the method's own response type
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._entries[key] = _Entry(fingerprint, future, now)
        # The call runs in a task of its own: a caller that goes away (its connection, or the
        # replica that forwarded it, died) must not stop a mutation half-way, written but not
        # answered, or its retry would act again. The retry waits for this answer instead.
        work = asyncio.ensure_future(self._settle(method, request_id, fingerprint, key, future, call))
        work.add_done_callback(_retrieve)
        return await asyncio.shield(work)

    async def _settle(
        self,
        method: str,
        request_id: str,
        fingerprint: bytes,
        key: tuple[str, str],
        future: asyncio.Future[Any],
        call: Callable[[], Awaitable[R]],
    ) -> R:
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
        if self._answers is not None and method in self._response_types:
            try:
                await self._answers.record(
                    method, request_id, _digest(fingerprint), response.SerializeToString()
                )
            except Exception as exc:
                # The mutation took effect; only a retry after a failover would act again.
                log.warning("recording the answer to %s %s failed: %s", method, request_id, exc)
        return response

    def _recorded(self, method: str, request_id: str, fingerprint: bytes) -> Message | None:
        """An answer an earlier leader recorded for this request, if any (REQUEST_ID_REUSED when
        the id came with another request)."""
        response_type = self._response_types.get(method)
        if self._answers is None or response_type is None:
            return None
        found = self._answers.lookup(method, request_id, self._ttl)
        if found is None:
            return None
        recorded_fingerprint, payload = found
        if recorded_fingerprint != _digest(fingerprint):
            raise InvalidArgumentError(
                f"request_id {request_id!r} was already used for a different {method} request",
                reason=Reason.REQUEST_ID_REUSED,
                violations=[FieldViolation("request_id", "already used for a different request")],
            )
        return response_type.FromString(payload)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Marks the outcome of a call whose caller left as seen (its failure is the caller's and
    any retry's, not an unhandled one)."""
    if not task.cancelled():
        task.exception()


def _digest(fingerprint: bytes) -> str:
    return hashlib.sha256(fingerprint).hexdigest()
