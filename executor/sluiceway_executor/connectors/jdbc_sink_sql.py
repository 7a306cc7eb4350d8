"""The SQL JdbcSink runs on PostgreSQL, as text: names, column types, the DDL of ``auto.create``
and ``auto.evolve``, the staging table, and the scripts that move a batch from the staging table
into the target in ``insert``, ``upsert`` and ``update`` mode. Pure functions: no Spark, no
database.

Every name that reaches SQL is quoted here (``quote``) or is a table name that passed
``jdbc_common.IDENTIFIER``; every text from a config or a record is a string literal
(``literal``). Nothing else from outside goes into SQL.

The staging table of a target holds one row per record of a batch: its topic, partition and
offset (``sl_topic``, ``sl_partition``, ``sl_offset``) and whether it is a tombstone
(``sl_tombstone``), which only an ``insert`` without deletes has no use for and leaves out
(``keeps_positions``), and the columns' values in ``c0``, ``c1``, ... in the order of the planned
columns, so field names never pass through Spark's own quoting. Values the database cannot take
from Spark as they are arrive as numbers: a Timestamp as microseconds since the epoch (so the
instant does not depend on any JVM's or session's time zone), a Time as milliseconds since
midnight; ``value_expression`` turns them back.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import re
from collections.abc import Sequence
from typing import Any, Final

from sluiceway.connect import ConnectException
from sluiceway.connect.data.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Type,
    decimal_precision,
    decimal_scale,
)
from sluiceway_executor.connectors.jdbc_common import IDENTIFIER
from sluiceway_executor.connectors.jdbc_sink_columns import SinkColumn
from sluiceway_executor.connectors.jdbc_sink_config import TOPIC_PLACEHOLDER

__all__ = [
    "STAGING_META",
    "add_columns_sql",
    "column_type",
    "create_table_sql",
    "default_literal",
    "insert_script",
    "literal",
    "quote",
    "sink_table_name",
    "staging_column",
    "staging_ddl",
    "staging_table_name",
    "table_columns_query",
    "table_lock_sql",
    "table_parts",
    "update_script",
    "upsert_script",
    "value_expression",
]

# The staging table's own columns, before c0, c1, ...
STAGING_META: Final = (
    ("sl_topic", "TEXT"),
    ("sl_partition", "INTEGER"),
    ("sl_offset", "BIGINT"),
    ("sl_tombstone", "BOOLEAN"),
)
_ORDER: Final = "s.sl_topic DESC, s.sl_partition DESC, s.sl_offset DESC"

_PLAIN_TYPES: Final = {
    Type.INT8: "SMALLINT",
    Type.INT16: "SMALLINT",
    Type.INT32: "INTEGER",
    Type.INT64: "BIGINT",
    Type.FLOAT32: "REAL",
    Type.FLOAT64: "DOUBLE PRECISION",
    Type.BOOLEAN: "BOOLEAN",
    Type.STRING: "TEXT",
    Type.BYTES: "BYTEA",
}
_UNQUOTED_PART: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_QUOTED_PART: Final = re.compile(r'"((?:[^"]|"")+)"')
# PostgreSQL cuts longer names to this many bytes.
_MAX_NAME_BYTES: Final = 63


# -- names and literals --


def quote(name: str) -> str:
    """``name`` as one quoted SQL identifier (case kept, any character allowed)."""
    if not name or "\x00" in name:
        raise ConnectException(f"{name!r} cannot be a column or table name")
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as an SQL string literal, whatever standard_conforming_strings says."""
    if "\x00" in text:
        raise ConnectException("A text with a NUL character cannot be written in SQL")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def sink_table_name(table_name_format: str, topic: str) -> str:
    """The table for ``topic``: a plain (possibly schema-qualified) identifier is used as is, any
    other name (e.g. with '-' from a topic name) is quoted as one identifier."""
    name = table_name_format.replace(TOPIC_PLACEHOLDER, topic)
    if IDENTIFIER.fullmatch(name):
        return name
    return quote(name)


def table_parts(table: str) -> list[str]:
    """The parts of a table name as ``sink_table_name`` gives it, as PostgreSQL reads them: a plain
    part in lower case, a quoted one as written (``app."Orders"`` -> ``["app", "Orders"]``)."""
    parts: list[str] = []
    position = 0
    while True:
        plain = _UNQUOTED_PART.match(table, position)
        quoted = None if plain else _QUOTED_PART.match(table, position)
        if plain is not None:
            parts.append(plain.group(0).lower())
            position = plain.end()
        elif quoted is not None:
            parts.append(quoted.group(1).replace('""', '"'))
            position = quoted.end()
        else:
            raise ConnectException(f"{table!r} is not a table name")
        if position == len(table):
            return parts
        if table[position] != ".":
            raise ConnectException(f"{table!r} is not a table name")
        position += 1


def _cut(name: str, limit: int) -> str:
    return name.encode()[:limit].decode(errors="ignore")


def staging_table_name(table: str, connector: str, task_id: int) -> str:
    """The staging table of ``table`` for one task of one connector: in the same schema, named
    after the table and the task, with a digest of the connector and table names so two
    connectors (or two tables whose names share a long prefix) never share one."""
    parts = table_parts(table)
    digest = hashlib.sha256(f"{connector}\x00{table}".encode()).hexdigest()[:10]
    suffix = f"_sl_stage_{digest}_{task_id}"
    base = _cut(parts[-1], _MAX_NAME_BYTES - len(suffix.encode()))
    return ".".join(quote(part) for part in [*parts[:-1], base + suffix])


def staging_column(index: int) -> str:
    """The staging table's column for the ``index``-th planned column."""
    return f"c{index}"


def table_columns_query(table: str) -> str:
    """A query for ``table``'s columns, found the way a statement naming it finds it (search path,
    case folding): one row per column (``table_exists``, ``column_name``, ``column_type``,
    ``not_null``), or one row with ``table_exists`` false and nulls when there is no such table."""
    return (
        "SELECT t.oid IS NOT NULL AS table_exists, a.attname::text AS column_name, "
        "format_type(a.atttypid, a.atttypmod) AS column_type, a.attnotnull AS not_null "
        f"FROM (SELECT to_regclass({literal(table)}) AS oid) AS t "
        "LEFT JOIN pg_catalog.pg_attribute AS a "
        "ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped"
    )


# -- types and defaults --


def column_type(schema: Schema) -> str:
    """The PostgreSQL type of a column for values of ``schema`` (a primitive or logical one)."""
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        precision = decimal_precision(schema)
        scale = decimal_scale(schema)
        if precision is not None and 0 <= scale <= precision <= 1000:
            return f"NUMERIC({precision},{scale})"
        return "NUMERIC"
    if logical == DATE_NAME:
        return "DATE"
    if logical == TIME_NAME:
        return "TIME"
    if logical == TIMESTAMP_NAME:
        return "TIMESTAMP"
    kind = _PLAIN_TYPES.get(schema.type)
    if kind is None:
        raise ConnectException(f"A {schema.type.value} field has no column type")
    return kind


def _staging_type(column: SinkColumn) -> str:
    if column.logical == TIMESTAMP_NAME:
        return "BIGINT"
    if column.logical == TIME_NAME:
        return "INTEGER"
    if column.logical == DECIMAL_NAME:
        return "NUMERIC"
    return column_type(column.schema)


def default_literal(schema: Schema) -> str | None:
    """The SQL for ``schema``'s default as a column DEFAULT, or None when it has none (or one
    that is not a simple value)."""
    value: Any = schema.default
    if value is None:
        return None
    logical = schema.logical_name
    if logical == DECIMAL_NAME and isinstance(value, decimal.Decimal):
        return f"{value:f}"
    if logical == DATE_NAME and isinstance(value, dt.date):
        return f"DATE {literal(value.isoformat())}"
    if logical == TIME_NAME and isinstance(value, dt.time):
        return f"TIME {literal(value.replace(tzinfo=None).isoformat())}"
    if logical == TIMESTAMP_NAME and isinstance(value, dt.datetime):
        instant = value.astimezone(dt.UTC) if value.tzinfo is not None else value
        return f"TIMESTAMP {literal(instant.replace(tzinfo=None).isoformat(sep=' '))}"
    if schema.type is Type.BOOLEAN and isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if schema.type in (Type.INT8, Type.INT16, Type.INT32, Type.INT64) and isinstance(value, int):
        return str(value)
    if schema.type in (Type.FLOAT32, Type.FLOAT64) and isinstance(value, float):
        return f"{literal(repr(value))}::{column_type(schema)}"
    if schema.type is Type.STRING and isinstance(value, str):
        return literal(value)
    if schema.type is Type.BYTES and isinstance(value, (bytes, bytearray)):
        return f"decode({literal(bytes(value).hex())}, 'hex')"
    return None


def _definition(column: SinkColumn) -> str:
    text = f"{quote(column.name)} {column_type(column.schema)}"
    if column.key or not column.schema.optional:
        text += " NOT NULL"
    default = default_literal(column.schema)
    if default is not None:
        text += f" DEFAULT {default}"
    return text


# -- DDL --


def table_lock_sql(table: str) -> str:
    """A lock on ``table``'s name held until the transaction ends. PostgreSQL's IF NOT EXISTS
    does not stop two sessions creating one table at once (the second fails on the catalog's
    unique index), so every task takes this lock before creating or altering a table: the second
    then waits, and finds the table made."""
    return f"SELECT pg_advisory_xact_lock(hashtextextended({literal('sluiceway.jdbc-sink ' + table)}, 0))"


def create_table_sql(table: str, columns: Sequence[SinkColumn]) -> str:
    """CREATE TABLE (if it does not exist yet) with the columns, the key columns as primary key."""
    parts = [_definition(column) for column in columns]
    keys = [quote(column.name) for column in columns if column.key]
    if keys:
        parts.append(f"PRIMARY KEY ({', '.join(keys)})")
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(parts)})"


def add_columns_sql(table: str, columns: Sequence[SinkColumn]) -> str:
    """ALTER TABLE adding the columns (those a concurrent writer added already are left alone)."""
    additions = ", ".join(f"ADD COLUMN IF NOT EXISTS {_definition(column)}" for column in columns)
    return f"ALTER TABLE {table} {additions}"


def keeps_positions(insert_mode: str, delete_enabled: bool) -> bool:
    """Whether the staging table holds each record's position and tombstone flag: the scripts
    need them to find each key's last record and its deletes, a plain ``insert`` does not."""
    return insert_mode != "insert" or delete_enabled


def staging_ddl(staging: str, columns: Sequence[SinkColumn], positions: bool = True) -> list[str]:
    """Statements that make ``staging`` anew, empty, unlogged (its rows live only between the
    staging write and the script that moves them; nothing needs them after a crash), with the
    records' positions or without (``keeps_positions``)."""
    meta = [f"{name} {kind}" for name, kind in STAGING_META] if positions else []
    values = [f"{staging_column(i)} {_staging_type(column)}" for i, column in enumerate(columns)]
    return [
        f"DROP TABLE IF EXISTS {staging}",
        f"CREATE UNLOGGED TABLE {staging} ({', '.join(meta + values)})",
    ]


# -- moving a batch from the staging table into the target --


def value_expression(column: SinkColumn, index: int, db_timezone: str = "UTC", alias: str = "s") -> str:
    """The SQL value of the ``index``-th column of staging row ``alias``: Timestamps come as
    microseconds since the epoch and become the wall-clock time in ``db_timezone`` (split into
    whole seconds and the rest, so the arithmetic stays exact); Times come as milliseconds since
    midnight."""
    source = f"{alias}.{staging_column(index)}"
    if column.logical == TIMESTAMP_NAME:
        utc = (
            f"(TIMESTAMP '1970-01-01 00:00:00' + ({source} / 1000000) * INTERVAL '1 second' "
            f"+ ({source} % 1000000) * INTERVAL '1 microsecond')"
        )
        if db_timezone == "UTC":
            return utc
        return f"(({utc} AT TIME ZONE 'UTC') AT TIME ZONE {literal(db_timezone)})"
    if column.logical == TIME_NAME:
        return f"(TIME '00:00:00' + {source} * INTERVAL '1 millisecond')"
    return source


def _prelude(db_timezone: str) -> list[str]:
    # A Timestamp written to a column WITH time zone is read in the session's zone: make it the
    # zone the wall-clock times are in, for this transaction only.
    return [f"SET LOCAL TIME ZONE {literal(db_timezone)}"]


def _target_columns(columns: Sequence[SinkColumn]) -> str:
    return ", ".join(quote(column.name) for column in columns)


def _values(columns: Sequence[SinkColumn], db_timezone: str, alias: str = "s") -> str:
    return ", ".join(value_expression(column, i, db_timezone, alias) for i, column in enumerate(columns))


def _key_indexes(columns: Sequence[SinkColumn]) -> list[int]:
    indexes = [i for i, column in enumerate(columns) if column.key]
    if not indexes:
        raise ConnectException("Upserts, updates and deletes need primary key columns (pk.mode)")
    return indexes


def _latest(staging: str, columns: Sequence[SinkColumn]) -> str:
    """The last record of each key in the staging table, by topic, partition and offset."""
    keys = ", ".join(f"s.{staging_column(i)}" for i in _key_indexes(columns))
    return f"latest AS (SELECT DISTINCT ON ({keys}) s.* FROM {staging} AS s ORDER BY {keys}, {_ORDER})"


def _key_match(columns: Sequence[SinkColumn], db_timezone: str, target: str, alias: str) -> str:
    return " AND ".join(
        f"{target}.{quote(columns[i].name)} = {value_expression(columns[i], i, db_timezone, alias)}"
        for i in _key_indexes(columns)
    )


def _delete(table: str, source: str, columns: Sequence[SinkColumn], db_timezone: str) -> str:
    match = _key_match(columns, db_timezone, "t", "s")
    return f"DELETE FROM {table} AS t USING {source} AS s WHERE s.sl_tombstone AND {match}"


def _finish(statements: list[str], staging: str) -> list[str]:
    return [*statements, f"TRUNCATE {staging}"]


def insert_script(
    table: str, staging: str, columns: Sequence[SinkColumn], db_timezone: str, delete_enabled: bool
) -> list[str]:
    """Every record of the staging table becomes a row. Without deletes the staging table holds
    no tombstones and no positions (``keeps_positions``). With them, a tombstone first deletes its
    key's row, and records of that key older than the batch's last tombstone are not inserted."""
    insert = (
        f"INSERT INTO {table} ({_target_columns(columns)}) SELECT {_values(columns, db_timezone)} "
        f"FROM {staging} AS s"
    )
    if not delete_enabled:
        return _finish([*_prelude(db_timezone), insert], staging)
    insert += " WHERE NOT s.sl_tombstone"
    same_key = " AND ".join(f"x.{staging_column(i)} = s.{staging_column(i)}" for i in _key_indexes(columns))
    newer = "(x.sl_topic, x.sl_partition, x.sl_offset) > (s.sl_topic, s.sl_partition, s.sl_offset)"
    deleted = f"EXISTS (SELECT 1 FROM {staging} AS x WHERE x.sl_tombstone AND {same_key} AND {newer})"
    return _finish(
        [
            *_prelude(db_timezone),
            _delete(table, staging, columns, db_timezone),
            f"{insert} AND NOT {deleted}",
        ],
        staging,
    )


def upsert_script(
    table: str, staging: str, columns: Sequence[SinkColumn], db_timezone: str, delete_enabled: bool
) -> list[str]:
    """The last record of each key replaces (or adds) the key's row; with deletes, a key whose
    last record is a tombstone loses its row. One statement, so the batch applies as a whole."""
    latest = _latest(staging, columns)
    keys = ", ".join(quote(column.name) for column in columns if column.key)
    others = [column for column in columns if not column.key]
    if others:
        sets = ", ".join(f"{quote(c.name)} = EXCLUDED.{quote(c.name)}" for c in others)
        conflict = f"ON CONFLICT ({keys}) DO UPDATE SET {sets}"
    else:
        conflict = f"ON CONFLICT ({keys}) DO NOTHING"
    with_part = f"WITH {latest}"
    if delete_enabled:
        with_part += f", deleted AS ({_delete(table, 'latest', columns, db_timezone)})"
    upsert = (
        f"{with_part} INSERT INTO {table} ({_target_columns(columns)}) "
        f"SELECT {_values(columns, db_timezone)} FROM latest AS s WHERE NOT s.sl_tombstone {conflict}"
    )
    return _finish([*_prelude(db_timezone), upsert], staging)


def update_script(
    table: str, staging: str, columns: Sequence[SinkColumn], db_timezone: str, delete_enabled: bool
) -> list[str]:
    """The last record of each key changes the key's row, if there is one; with deletes, a key whose
    last record is a tombstone loses its row."""
    latest = _latest(staging, columns)
    statements = _prelude(db_timezone)
    if delete_enabled:
        statements.append(f"WITH {latest} {_delete(table, 'latest', columns, db_timezone)}")
    others = [(i, column) for i, column in enumerate(columns) if not column.key]
    if others:
        sets = ", ".join(f"{quote(c.name)} = {value_expression(c, i, db_timezone)}" for i, c in others)
        match = _key_match(columns, db_timezone, "t", "s")
        statements.append(
            f"WITH {latest} UPDATE {table} AS t SET {sets} FROM latest AS s "
            f"WHERE NOT s.sl_tombstone AND {match}"
        )
    return _finish(statements, staging)
