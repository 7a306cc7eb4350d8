"""HeaderFrom: copies or moves fields of a struct key or value into headers, each as the text
Kafka's SimpleHeaderConverter writes for it, UTF-8: a primitive's text (bytes as they are), a
Date, Time or Timestamp in ISO 8601 (UTC), and a struct, array or map as compact JSON with its
nulls (where Kafka's own writer leaves an embedded date unquoted, ours quotes it, as JSON does).
Kafka's keys and class names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import NO_DEFAULT, ConfigDef, ConfigException, ConfigType, ConnectException, Importance
from sluiceway.connect.data.schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Type
from sluiceway.connect.transforms import RecordColumns, TransformContext
from sluiceway_executor.transforms.operands import (
    KEY,
    VALUE,
    PartTransformation,
    kafka_names,
    rebuilt_struct,
    struct_of,
)
from sluiceway_executor.transforms.record_transforms import HEADERS_TYPE
from sluiceway_executor.transforms.schemaless import header_from_schemaless
from sluiceway_executor.transforms.time_transforms import utc_text

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["HeaderFromKey", "HeaderFromValue"]

_MOVE: Final = "move"
_COPY: Final = "copy"
_TEXT_TYPES: Final = frozenset(
    {Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN, Type.STRING}
)


def _header_bytes(column: Column, schema: Schema, where: str) -> Column:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    logical = schema.logical_name
    if schema.type is Type.BYTES and logical is None:
        return column
    if logical == DECIMAL_NAME:
        return F.encode(column.cast("string"), "UTF-8")
    if schema.type in _TEXT_TYPES and logical is None:
        text = (
            F.when(column, F.lit("true")).otherwise(F.lit("false")) if schema.type is Type.BOOLEAN else column
        )
        return F.encode(text.cast("string"), "UTF-8")
    if logical == TIMESTAMP_NAME:
        return F.encode(utc_text(column, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"), "UTF-8")
    if logical == DATE_NAME:
        return F.encode(F.date_format(column, "yyyy-MM-dd"), "UTF-8")
    if logical == TIME_NAME:  # milliseconds after midnight
        return F.encode(utc_text(F.timestamp_millis(column), "HH:mm:ss.SSS'Z'"), "UTF-8")
    if schema.type in (Type.STRUCT, Type.ARRAY, Type.MAP):
        options = {
            "ignoreNullFields": "false",
            "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'",
            "timeZone": "UTC",
        }
        return F.encode(F.to_json(column, options), "UTF-8")
    raise ConnectException(f"{where}: a {logical or schema.type.value} field cannot become a header")


class HeaderFrom(PartTransformation):
    """Copies (or moves) ``fields`` into headers named by ``headers``, in the same order."""

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("fields", ConfigType.LIST, NO_DEFAULT, None, Importance.HIGH, "The fields to take.")
            .define(
                "headers",
                ConfigType.LIST,
                NO_DEFAULT,
                None,
                Importance.HIGH,
                "The header of each field, in order.",
            )
            .define(
                "operation",
                ConfigType.STRING,
                NO_DEFAULT,
                None,
                Importance.HIGH,
                "move (the fields leave the record) or copy.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._fields = list(self.settings.get_list("fields"))
        self._headers = list(self.settings.get_list("headers"))
        if not self._fields:
            raise ConfigException("fields", "", "name at least one field")
        if len(self._headers) != len(self._fields):
            raise ConfigException(
                "headers", ",".join(self._headers), f"name one header per field ({len(self._fields)})"
            )
        operation = (self.settings.get_string("operation") or "").lower()
        if operation not in (_MOVE, _COPY):
            raise ConfigException("operation", operation, "move or copy")
        self._move = operation == _MOVE

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if self.operand(records)[1] is None:
            return header_from_schemaless(self, records, context, self._fields, self._headers, self._move)
        column, schema = self.struct_operand(records, context)
        added = []
        for name, header in zip(self._fields, self._headers, strict=True):
            found = self.field_of(schema, name, context, "fields")
            where = f"transform '{context.alias}', field '{name}'"
            value = F.when(column.isNull(), F.lit(None)).otherwise(column.getField(name))
            added.append(
                F.struct(F.lit(header).alias("key"), _header_bytes(value, found.schema, where).alias("value"))
            )
        headers = F.concat(F.coalesce(records.headers, F.array().cast(HEADERS_TYPE)), F.array(*added))
        records = records.replace(headers=headers)
        if not self._move:
            return records
        kept = [f for f in schema.fields if f.name not in self._fields]
        new_schema = struct_of([(f.name, f.schema) for f in kept], like=schema)
        rebuilt = rebuilt_struct(column, [(f.name, column.getField(f.name)) for f in kept], new_schema)
        return self.with_operand(records, rebuilt, new_schema)


class HeaderFromKey(HeaderFrom):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("HeaderFrom", KEY)


class HeaderFromValue(HeaderFrom):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("HeaderFrom", VALUE)
