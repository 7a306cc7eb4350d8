"""`ConfigChanges`: which connectors the config topic's records changed, by position, so a reader
that derived something per connector from an earlier snapshot redoes only those connectors.

The leader's rebalance derives each connector's wanted tasks from the config snapshot. Walking all
connectors of every new snapshot made each create cost time in proportion to the connectors held
(at 10,000 connectors, half of the leader's loop went to that walk while clients created more).
The config store notes here, for each record that can change a connector's config, target state
or committed task set, the position after it and the connector; `ClusterConfigState.changed_since`
answers from it.

Only the newest `keep` changes are kept; a reader whose snapshot is older than that is told
nothing is known (None) and walks everything once again.
"""

from __future__ import annotations

import bisect
import threading
from typing import Final

__all__ = ["ConfigChanges"]

DEFAULT_KEEP: Final = 100_000


class ConfigChanges:
    """An append-only journal of (position, connector), trimmed to the newest ``keep`` entries.
    Positions are those of `ClusterConfigState.position`: a record at offset ``o`` is noted at
    ``o + 1``, and must be noted in increasing order."""

    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self._keep = max(keep, 1)
        self._lock = threading.Lock()
        self._positions: list[int] = []
        self._connectors: list[str] = []
        # Changes at or below this position are no longer all known.
        self._forgotten_up_to = 0

    def note(self, position: int, connector: str) -> None:
        """The record before ``position`` may have changed ``connector``. A position below the
        last one noted (a record read again) is noted at the last one, which keeps the journal
        sorted and the change visible to the next reader."""
        with self._lock:
            if self._positions and position < self._positions[-1]:
                position = self._positions[-1]
            self._positions.append(position)
            self._connectors.append(connector)
            if len(self._positions) > 2 * self._keep:
                cut = len(self._positions) - self._keep
                self._forgotten_up_to = self._positions[cut - 1]
                del self._positions[:cut]
                del self._connectors[:cut]

    def since(self, start: int, end: int) -> set[str] | None:
        """The connectors changed by records after position ``start`` up to ``end`` (included);
        None when some of those changes are no longer kept."""
        if end <= start:
            return set()
        with self._lock:
            if start < self._forgotten_up_to:
                return None
            first = bisect.bisect_right(self._positions, start)
            last = bisect.bisect_right(self._positions, end)
            return set(self._connectors[first:last])
