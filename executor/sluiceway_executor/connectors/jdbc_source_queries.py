"""JdbcSource's SQL and offsets, without Spark or a database: what a batch asks the database, and
how a table's position is kept as a source offset.

A batch of an incrementing or timestamp mode is two queries. The first (``bounds_query``) finds
the position of the last of the next rows after the committed position, in the mode's order, as
many as the batch may take (the executor's batch limit, never above ``batch.max.rows``; in
incrementing mode without counting them when their values' range shows they fit); the
second (``batch_query``) reads the rows from the committed position up to and including that one.
The range is fixed before any row is read, so a retried batch reads the same rows, and every row
that shares the last timestamp comes in the same batch. Both queries order and limit in the
database; nothing but the one bound row comes back to Python.

Timestamps are compared in the database in UTC (the reader's PostgreSQL session is set to UTC), and
kept as microseconds since the epoch. Offsets use the keys of Kafka's JDBC source connector:
``incrementing`` (the last value), ``timestamp`` (milliseconds since the epoch) and
``timestamp_nanos`` (the nanoseconds within that second), so offsets carry over in both directions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from sluiceway.connect.batch_config import DEFAULT_BATCH_MAX_RECORDS
from sluiceway_executor.connectors.jdbc_common import is_int

__all__ = [
    "INCREMENTING_FIELD",
    "MODES",
    "MODE_BULK",
    "MODE_INCREMENTING",
    "MODE_TIMESTAMP",
    "MODE_TIMESTAMP_INCREMENTING",
    "QUERY_FIELD",
    "QUERY_PARTITION",
    "TABLE_FIELD",
    "TIMESTAMP_FIELD",
    "TIMESTAMP_NANOS_FIELD",
    "Position",
    "SourceQueries",
    "offset_fields",
    "timestamp_literal",
]

MODE_BULK: Final = "bulk"
MODE_INCREMENTING: Final = "incrementing"
MODE_TIMESTAMP: Final = "timestamp"
MODE_TIMESTAMP_INCREMENTING: Final = "timestamp+incrementing"
MODES: Final = (MODE_BULK, MODE_INCREMENTING, MODE_TIMESTAMP, MODE_TIMESTAMP_INCREMENTING)

# Source partitions: {"table": name} per table, {"query": "query"} for the one custom query.
TABLE_FIELD: Final = "table"
QUERY_FIELD: Final = "query"
QUERY_PARTITION: Final[Mapping[str, str]] = {QUERY_FIELD: QUERY_FIELD}

INCREMENTING_FIELD: Final = "incrementing"
TIMESTAMP_FIELD: Final = "timestamp"
TIMESTAMP_NANOS_FIELD: Final = "timestamp_nanos"

# Names of the bound query's output columns.
_INCREMENTING_OUT: Final = "incrementing"
_MICROS_OUT: Final = "micros"
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


def uses_incrementing(mode: str) -> bool:
    return mode in (MODE_INCREMENTING, MODE_TIMESTAMP_INCREMENTING)


def uses_timestamp(mode: str) -> bool:
    return mode in (MODE_TIMESTAMP, MODE_TIMESTAMP_INCREMENTING)


def offset_fields(mode: str) -> tuple[str, ...]:
    """The keys of an offset in ``mode``; bulk mode keeps no offset."""
    fields: tuple[str, ...] = ()
    if uses_timestamp(mode):
        fields += (TIMESTAMP_FIELD, TIMESTAMP_NANOS_FIELD)
    if uses_incrementing(mode):
        fields += (INCREMENTING_FIELD,)
    return fields


@dataclass(frozen=True)
class Position:
    """How far a table has been copied: the last incrementing value and/or the last timestamp
    (microseconds since the epoch, UTC), as the mode uses them."""

    incrementing: int | None = None
    micros: int | None = None

    def to_offset(self) -> dict[str, int]:
        offset: dict[str, int] = {}
        if self.micros is not None:
            offset[TIMESTAMP_FIELD] = self.micros // 1000
            offset[TIMESTAMP_NANOS_FIELD] = (self.micros % 1_000_000) * 1000
        if self.incrementing is not None:
            offset[INCREMENTING_FIELD] = self.incrementing
        return offset

    @classmethod
    def from_offset(cls, mode: str, offset: Mapping[str, Any] | None) -> Position | None:
        """The position an offset records for ``mode``; None (copy from the start) when there is no
        offset or it lacks a key the mode needs (it was written in another mode). A key of the
        wrong type raises ValueError."""
        if offset is None:
            return None
        for name in (INCREMENTING_FIELD, TIMESTAMP_FIELD, TIMESTAMP_NANOS_FIELD):
            value = offset.get(name)
            if value is not None and not is_int(value):
                raise ValueError(f"the offset's '{name}' is {value!r}, not an integer")
        incrementing = offset.get(INCREMENTING_FIELD) if uses_incrementing(mode) else None
        micros: int | None = None
        if uses_timestamp(mode):
            millis = offset.get(TIMESTAMP_FIELD)
            nanos = offset.get(TIMESTAMP_NANOS_FIELD)
            if millis is not None:
                # timestamp_nanos, when present, holds the whole fraction of the second.
                micros = millis * 1000 if nanos is None else (millis // 1000) * 1_000_000 + nanos // 1000
        if (uses_incrementing(mode) and incrementing is None) or (uses_timestamp(mode) and micros is None):
            return None
        return cls(incrementing=incrementing, micros=micros)


def timestamp_literal(micros: int) -> str:
    """An SQL timestamp literal for ``micros`` since the epoch, as a UTC wall time."""
    moment = _EPOCH + timedelta(microseconds=micros)
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


@dataclass(frozen=True)
class SourceQueries:
    """The SQL of one source partition. ``source`` is a table name or, for a custom query, the
    query itself; names were checked to be SQL identifiers before they get here."""

    mode: str
    source: str
    is_query: bool = False
    incrementing_column: str | None = None
    timestamp_columns: Sequence[str] = ()
    delay_ms: int = 0
    max_rows: int = DEFAULT_BATCH_MAX_RECORDS

    @property
    def _from(self) -> str:
        return f"({self.source}) AS sluiceway_query" if self.is_query else self.source

    @property
    def _timestamp(self) -> str:
        columns = list(self.timestamp_columns)
        return columns[0] if len(columns) == 1 else f"COALESCE({', '.join(columns)})"

    @property
    def _incrementing(self) -> str:
        return self.incrementing_column or ""

    def _order(self) -> list[str]:
        order = [self._timestamp] if uses_timestamp(self.mode) else []
        return order + ([self._incrementing] if uses_incrementing(self.mode) else [])

    def _after(self, after: Position | None) -> list[str]:
        if after is None:
            return []
        inc, ts = self._incrementing, self._timestamp
        if self.mode == MODE_INCREMENTING:
            return [f"{inc} > {int(after.incrementing or 0)}"]
        literal = timestamp_literal(int(after.micros or 0))
        if self.mode == MODE_TIMESTAMP:
            return [f"{ts} > {literal}"]
        return [f"({ts} > {literal} OR ({ts} = {literal} AND {inc} > {int(after.incrementing or 0)}))"]

    def _upto(self, upto: Position) -> list[str]:
        inc, ts = self._incrementing, self._timestamp
        if self.mode == MODE_INCREMENTING:
            return [f"{inc} <= {int(upto.incrementing or 0)}"]
        literal = timestamp_literal(int(upto.micros or 0))
        if self.mode == MODE_TIMESTAMP:
            return [f"{ts} <= {literal}"]
        return [f"({ts} < {literal} OR ({ts} = {literal} AND {inc} <= {int(upto.incrementing or 0)}))"]

    def _settled(self) -> list[str]:
        """Rows whose timestamp is older than the database's clock less the delay."""
        if not uses_timestamp(self.mode):
            return []
        now = "CURRENT_TIMESTAMP"
        if self.delay_ms > 0:
            now += f" - INTERVAL '{int(self.delay_ms)} milliseconds'"
        return [f"{self._timestamp} < {now}"]

    @staticmethod
    def _where(conditions: list[str]) -> str:
        return f" WHERE {' AND '.join(conditions)}" if conditions else ""

    def bulk_query(self) -> str:
        return f"SELECT * FROM {self._from}"

    def bounds_query(self, after: Position | None, limit: int | None = None) -> str:
        """One row (none when nothing is new): the position of the last of the next ``limit``
        rows (at most ``max_rows``) after ``after``, in columns ``incrementing`` and/or ``micros``."""
        if self.mode == MODE_BULK:
            raise ValueError("bulk mode has no bounds")
        where = self._where(self._after(after) + self._settled())
        rows = self.max_rows if limit is None else max(1, min(limit, self.max_rows))
        if self.mode == MODE_INCREMENTING:
            return self._incrementing_bound(where, rows)
        # Left are the timestamp modes: the timestamp first, then the incrementing column if any.
        inner = [f"{self._timestamp} AS sluiceway_ts"]
        outer = [f"CAST(ROUND(EXTRACT(EPOCH FROM sluiceway_ts) * 1000000) AS BIGINT) AS {_MICROS_OUT}"]
        order_inner = ["sluiceway_ts"]
        order_outer = ["sluiceway_ts DESC"]
        if uses_incrementing(self.mode):
            inner.append(f"{self._incrementing} AS sluiceway_inc")
            outer.append(f"sluiceway_inc AS {_INCREMENTING_OUT}")
            order_inner.append("sluiceway_inc")
            order_outer.append("sluiceway_inc DESC")
        return (
            f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM {self._from}{where} "
            f"ORDER BY {', '.join(order_inner)} LIMIT {int(rows)}) AS next_rows "
            f"ORDER BY {', '.join(order_outer)} LIMIT 1"
        )

    def _incrementing_bound(self, where: str, rows: int) -> str:
        """The incrementing mode's bound: the largest value after the committed one when the range
        from the smallest to it is too narrow to hold more than ``rows`` rows (an incrementing
        column's values are distinct integers, as Kafka's JDBC source asks of it), else the value of
        the ``rows``-th row. The first case is two index lookups; the second walks ``rows`` index
        entries (0.12 s for a million in the tests' PostgreSQL), and its subquery runs only when its
        branch is taken."""
        inc = self._incrementing
        counted = (
            f"SELECT MAX(sluiceway_inc) FROM (SELECT {inc} AS sluiceway_inc FROM {self._from}{where} "
            f"ORDER BY sluiceway_inc LIMIT {int(rows)}) AS next_rows"
        )
        return (
            f"SELECT CASE WHEN MAX({inc}) - MIN({inc}) < {int(rows)} THEN MAX({inc}) ELSE ({counted}) END "
            f"AS {_INCREMENTING_OUT} FROM {self._from}{where} HAVING MAX({inc}) IS NOT NULL"
        )

    def bound_from_row(self, row: Mapping[str, Any]) -> Position:
        """The ``bounds_query`` row as a position; ValueError when a column is not a number."""
        incrementing: int | None = None
        micros: int | None = None
        try:
            if uses_incrementing(self.mode):
                incrementing = int(row[_INCREMENTING_OUT])
            if uses_timestamp(self.mode):
                micros = int(row[_MICROS_OUT])
        except (TypeError, ValueError) as e:
            raise ValueError(f"the bound row {dict(row)} holds no whole numbers") from e
        return Position(incrementing=incrementing, micros=micros)

    def batch_query(self, after: Position | None, upto: Position) -> str:
        """The rows after ``after`` up to and including ``upto``, in the mode's order."""
        where = self._where(self._after(after) + self._upto(upto))
        return f"SELECT * FROM {self._from}{where} ORDER BY {', '.join(self._order())}"
