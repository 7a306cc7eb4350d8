"""Which columns JdbcSink writes for a batch, worked out from the key's and the value's Connect
schemas and the sink's keys: the primary key columns of ``pk.mode`` first, then the value's fields
(``fields.whitelist``). Also how a table's columns are compared with them. Pure: no Spark, no
database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from sluiceway.connect import ConnectException
from sluiceway.connect.data.schema import (
    DATE_NAME,
    DECIMAL_NAME,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    TIME_NAME,
    TIMESTAMP_NAME,
    Schema,
    Type,
)
from sluiceway_executor.connectors.jdbc_sink_config import (
    KAFKA_PK_FIELDS,
    PK_FIELDS_CONFIG,
    PK_MODE_KAFKA,
    PK_MODE_RECORD_KEY,
    PK_MODE_RECORD_VALUE,
    SinkSettings,
)

__all__ = [
    "CONVERTED_LOGICAL",
    "SinkColumn",
    "TableColumns",
    "columns_to_add",
    "plan_columns",
]

# Logical types whose Spark value the database cannot take as is (see jdbc_sink_sql.value_expression).
CONVERTED_LOGICAL: Final = frozenset({TIMESTAMP_NAME, TIME_NAME})


@dataclass(frozen=True)
class SinkColumn:
    """One column the sink writes: its name in the table, the Connect schema of its values, where
    the value is in the batch (a path of column and field names: ``("value", "amount")``,
    ``("key",)``, ``("topic",)``) and whether it is part of the primary key."""

    name: str
    schema: Schema
    source: tuple[str, ...]
    key: bool = False

    @property
    def logical(self) -> str | None:
        return self.schema.logical_name

    @property
    def converted(self) -> bool:
        """Whether the value goes through SQL on its way (a Timestamp or a Time)."""
        return self.logical in CONVERTED_LOGICAL


@dataclass(frozen=True)
class TableColumns:
    """What the database said about a table: whether it exists and its column names."""

    exists: bool
    names: frozenset[str] = frozenset()


def _primitive(name: str, schema: Schema, where: str) -> Schema:
    logical = schema.logical_name
    if logical in (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME) or schema.type.is_primitive:
        return schema
    raise ConnectException(
        f"{where} field {name!r} is a {schema.type.value}: JdbcSink writes only fields of primitive "
        "and logical types (no structs, arrays or maps)"
    )


def _struct_fields(schema: Schema, names: Sequence[str], where: str) -> list[tuple[str, Schema]]:
    if not names:
        return [(item.name, _primitive(item.name, item.schema, where)) for item in schema.fields]
    picked: list[tuple[str, Schema]] = []
    for name in names:
        item = schema.field(name)
        if item is None:
            known = ", ".join(f.name for f in schema.fields)
            raise ConnectException(
                f"{PK_FIELDS_CONFIG} names {name!r}, which the record {where.lower()} does not have "
                f"(it has: {known})"
            )
        picked.append((name, _primitive(name, item.schema, where)))
    return picked


def _key_columns(settings: SinkSettings, key_schema: Schema | None, value_schema: Schema) -> list[SinkColumn]:
    mode, names = settings.pk_mode, settings.pk_fields
    if mode == PK_MODE_KAFKA:
        topic, partition, offset = names or KAFKA_PK_FIELDS
        return [
            SinkColumn(topic, STRING_SCHEMA, ("topic",), key=True),
            SinkColumn(partition, INT32_SCHEMA, ("partition",), key=True),
            SinkColumn(offset, INT64_SCHEMA, ("offset",), key=True),
        ]
    if mode == PK_MODE_RECORD_VALUE:
        return [
            SinkColumn(name, schema.as_required(), ("value", name), key=True)
            for name, schema in _struct_fields(value_schema, names, "Value")
        ]
    if mode == PK_MODE_RECORD_KEY:
        if key_schema is None:
            raise ConnectException(f"pk.mode '{PK_MODE_RECORD_KEY}' needs records with a key")
        if key_schema.type is Type.STRUCT:
            return [
                SinkColumn(name, schema.as_required(), ("key", name), key=True)
                for name, schema in _struct_fields(key_schema, names, "Key")
            ]
        if len(names) != 1:
            raise ConnectException(
                f"The record key is a {key_schema.logical_name or key_schema.type.value}, not a struct: "
                f"{PK_FIELDS_CONFIG} must name the one column it goes to"
            )
        return [
            SinkColumn(names[0], _primitive(names[0], key_schema, "Key").as_required(), ("key",), key=True)
        ]
    return []


def plan_columns(settings: SinkSettings, key_schema: Schema | None, value_schema: Schema) -> list[SinkColumn]:
    """The columns for records whose key has ``key_schema`` (None: not used or not typed) and whose
    value has the struct schema ``value_schema``: the primary key columns, then the value's fields
    that are in ``fields.whitelist`` (all when it is empty) and not already a key column.

    Raises ConnectException when the schemas do not fit the keys (a named field that does not
    exist, a nested field, a key that is not a struct with other than one pk.fields name)."""
    if value_schema.type is not Type.STRUCT:
        raise ConnectException(
            "JdbcSink needs record values that are structs with a schema (e.g. from JsonConverter "
            "with schemas.enable=true or AvroConverter)"
        )
    columns = _key_columns(settings, key_schema, value_schema)
    taken = {column.name for column in columns}
    wanted = set(settings.fields_whitelist)
    for item in value_schema.fields:
        if item.name in taken or (wanted and item.name not in wanted):
            continue
        columns.append(
            SinkColumn(item.name, _primitive(item.name, item.schema, "Value"), ("value", item.name))
        )
        taken.add(item.name)
    if not columns:
        raise ConnectException("No column to write: the value has no fields that fields.whitelist keeps")
    return columns


def columns_to_add(
    table: str, existing: TableColumns, columns: Sequence[SinkColumn], auto_evolve: bool
) -> list[SinkColumn]:
    """The columns ``table`` lacks; a ConnectException when it lacks some and may not get them
    (auto.evolve off, or a required field without a default, which rows already there could not
    hold)."""
    missing = [column for column in columns if column.name not in existing.names]
    if not missing:
        return []
    names = ", ".join(repr(column.name) for column in missing)
    if not auto_evolve:
        raise ConnectException(
            f"Table {table} has no column {names} for the record's fields, and auto.evolve is off: "
            "add the columns, drop the fields (fields.whitelist) or set auto.evolve=true"
        )
    required = [c.name for c in missing if c.key or (not c.schema.optional and c.schema.default is None)]
    if required:
        raise ConnectException(
            f"Table {table} lacks the column(s) {', '.join(map(repr, required))} of a required field "
            "without a default (or of the primary key): auto.evolve adds only optional fields and "
            "fields with a default, since the rows already in the table have no value for them"
        )
    return missing
