"""Per-connector locks that exist only while they are used."""

from __future__ import annotations

import asyncio
from types import TracebackType


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _Held:
    """`async with locks[name]:` — counts itself in before it waits, so the entry outlives it."""

    __slots__ = ("_key", "_locks")

    def __init__(self, locks: KeyedLocks, key: str) -> None:
        self._locks = locks
        self._key = key

    async def __aenter__(self) -> None:
        entry = self._locks._join(self._key)
        try:
            await entry.lock.acquire()
        except BaseException:
            self._locks._leave(self._key, entry)
            raise

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        entry = self._locks._entries[self._key]
        entry.lock.release()
        self._locks._leave(self._key, entry)


class KeyedLocks:
    """One asyncio.Lock per key, for the herder's mutations and the reconciler.

    A name's entry is created by its first user and dropped when the last holder or waiter leaves,
    so the table holds only names in use right now: calls naming millions of connectors that do not
    exist leave nothing behind. Event-loop only, like asyncio.Lock.
    """

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __getitem__(self, key: str) -> _Held:
        return _Held(self, key)

    def __len__(self) -> int:
        return len(self._entries)

    def _join(self, key: str) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        return entry

    def _leave(self, key: str, entry: _Entry) -> None:
        entry.users -= 1
        if entry.users == 0 and self._entries.get(key) is entry:
            del self._entries[key]
