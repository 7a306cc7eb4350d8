"""Kafka's JsonConverter: plain JSON, or the {"schema": ..., "payload": ...} envelope, as Spark
expressions on JSON text and per record (through `connect_json`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
)

from sluiceway_executor.converters.base import JSON_CONVERTER, Converter, ConverterError, Role, parse_bool
from sluiceway_executor.converters.connect_json import (
    connect_to_json,
    dumps_json,
    infer_schema,
    json_to_connect,
    reject_constant,
)

# Error messages are cut to this many characters of the offending data.
_SNIPPET = 200

_ENVELOPE_ERROR = (
    'not an envelope: with schemas.enable=true every record must be a JSON object with exactly "schema" '
    'and "payload" fields; for plain JSON records set this converter\'s schemas.enable=false.'
)


class JsonConverter(Converter):
    """Kafka's JsonConverter: plain JSON, or with `schemas.enable` (Kafka's default: true) the
    {"schema": ..., "payload": ...} envelope."""

    class_name = JSON_CONVERTER

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(role, settings)
        raw = self.settings.get("schemas.enable")
        self.schemas_enable = True if raw is None else parse_bool(f"{role}.converter.schemas.enable", raw)

    @property
    def label(self) -> str:
        mode = "schemas.enable=true" if self.schemas_enable else "schemas.enable=false"
        return f"{self.role}.converter JsonConverter ({mode})"

    @property
    def connect_type(self) -> DataType:
        return StringType()

    # -- Spark expressions --

    def _fail(self, problem: str, text: Column) -> Column:
        return F.raise_error(
            F.concat(F.lit(f"{self.label}: {problem} Data: "), F.substring(text, 1, _SNIPPET))
        )

    def to_connect(self, col: Column) -> Column:
        text = col.cast("string")
        parsed = F.try_parse_json(text)
        null = F.lit(None).cast("string")
        if not self.schemas_enable:
            return (
                F.when(col.isNull(), null)
                .when(parsed.isNull(), self._fail("invalid JSON.", text))
                .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
                # JSON null is a null value, as in Kafka.
                .when(F.is_variant_null(parsed), null)
                .otherwise(text)
            )
        top = F.try_variant_get(parsed, "$", "map<string,variant>")
        is_envelope = (
            top.isNotNull()
            & (F.size(top) == 2)
            & F.map_contains_key(top, "schema")
            & F.map_contains_key(top, "payload")
        )
        payload = top.getItem("payload")
        return (
            F.when(col.isNull(), null)
            .when(parsed.isNull(), self._fail("invalid JSON.", text))
            .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
            .when(~is_envelope, self._fail(_ENVELOPE_ERROR, text))
            .when(F.is_variant_null(payload), null)
            # get_json_object keeps the payload's own key order but unquotes a string payload, whose
            # JSON text comes from the variant instead.
            .when(F.schema_of_variant(payload) == "STRING", F.to_json(payload))
            .otherwise(F.get_json_object(text, "$.payload"))
        )

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if isinstance(data_type, (StructType, MapType, ArrayType)):
            # Valid JSON by construction.
            text = F.to_json(col)
            checked = text
        elif data_type is None or isinstance(
            data_type,
            (
                StringType,
                BinaryType,
                NullType,
                BooleanType,
                ByteType,
                ShortType,
                IntegerType,
                LongType,
                FloatType,
                DoubleType,
                DecimalType,
            ),
        ):
            # Strings and bytes are JSON text; numbers and booleans print as JSON (NaN does not: checked).
            text = col.cast("string")
            checked = (
                F.when(F.try_parse_json(text).isNull(), self._fail("invalid JSON.", text))
                .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
                .otherwise(text)
            )
        else:
            raise ConverterError(
                f"{self.label} cannot convert columns of type {data_type.simpleString()}; "
                "convert them to a string or struct first"
            )
        if self.schemas_enable:
            checked = F.concat(F.lit('{"schema":null,"payload":'), checked, F.lit("}"))
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(checked.cast("binary"))

    # -- record level --

    def _loads(self, data: bytes) -> Any:
        try:
            return json.loads(bytes(data), parse_constant=reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            snippet = bytes(data[:_SNIPPET]).decode("utf-8", errors="replace")
            raise ConverterError(f"{self.label}: the record is not valid JSON ({exc}): {snippet!r}") from None

    def to_connect_value(self, data: bytes | None) -> Any:
        if data is None:
            return None
        parsed = self._loads(data)
        if not self.schemas_enable:
            return parsed
        if not (isinstance(parsed, dict) and len(parsed) == 2 and "schema" in parsed and "payload" in parsed):
            raise ConverterError(f"{self.label}: {_ENVELOPE_ERROR}")
        schema = parsed["schema"]
        if schema is not None and not isinstance(schema, dict):
            raise ConverterError(
                f"{self.label}: the envelope's schema must be an object or null, got {schema!r}"
            )
        try:
            return json_to_connect(schema, parsed["payload"], "")
        except ConverterError as exc:
            raise ConverterError(f"{self.label}: {exc}") from None

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if schema is None and value is None:
            # A tombstone stays one, with or without the envelope (as in Kafka).
            return None
        try:
            if not self.schemas_enable:
                return dumps_json(connect_to_json(schema, value, ""))
            if schema is None:
                schema = infer_schema(value)
            return dumps_json(
                {
                    "schema": None if schema is None else dict(schema),
                    "payload": connect_to_json(schema, value, ""),
                }
            )
        except ConverterError as exc:
            raise ConverterError(f"{self.label}: {exc}") from None
