"""The replicas a client may call, one channel each, and which one its calls go to now.

Calls stick to one replica, so a client holds one connection at a time. A failed call that
says the replica may be gone (UNAVAILABLE: refused, reset, shutting down, cut off from the
leader; DEADLINE_EXCEEDED: hung or unreachable) moves the client on to the next address, and the
retry of that call goes there. Any replica answers any call (mutations are forwarded to the
leader, whose request-id cache answers a retried mutation once), so the move is always safe. The
channels are opened when first used: a replica never needed costs nothing.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Final, Generic, TypeVar

import grpc

__all__ = ["MOVE_ON_CODES", "Replica", "Replicas"]

_S = TypeVar("_S")

# The codes after which the next call (or retry) goes to another replica.
MOVE_ON_CODES: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@dataclasses.dataclass(frozen=True, slots=True)
class Replica(Generic[_S]):
    """One address and what was opened for it (its channel and stubs)."""

    index: int
    address: str
    stubs: _S


class Replicas(Generic[_S]):
    """The addresses of a client, in order, and the one its calls use now. Thread-safe: a
    blocking client may be shared by threads."""

    def __init__(self, addresses: Sequence[str], open_replica: Callable[[str], _S]) -> None:
        if not addresses:
            raise ValueError("no control-plane address given")
        self.addresses = tuple(addresses)
        self._open = open_replica
        self._opened: dict[int, _S] = {}
        self._index = 0
        self._lock = threading.Lock()

    def current(self) -> Replica[_S]:
        """The replica calls go to now, its channel opened if this is its first call."""
        with self._lock:
            index = self._index
            stubs = self._opened.get(index)
            if stubs is None:
                stubs = self._opened[index] = self._open(self.addresses[index])
            return Replica(index, self.addresses[index], stubs)

    def failed(self, replica: Replica[_S], code: grpc.StatusCode | None) -> None:
        """A call to `replica` ended with `code`: move on if the code says the replica may be
        gone. Only from the replica still in use, so calls that failed together move on once."""
        if code not in MOVE_ON_CODES or len(self.addresses) == 1:
            return
        with self._lock:
            if self._index == replica.index:
                self._index = (self._index + 1) % len(self.addresses)

    def opened(self) -> list[_S]:
        """What was opened so far (to close it)."""
        with self._lock:
            return list(self._opened.values())
