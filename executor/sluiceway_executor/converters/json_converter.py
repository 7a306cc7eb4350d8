"""Kafka's JsonConverter: plain JSON, or the {"schema": ..., "payload": ...} envelope, as Spark
expressions and per record (through `connect_json`).

Typed columns (``connect_frame``, ``from_connect_field``): a sink gets a typed column when its
records carry envelopes (``schemas.enable=true``) or when it declares the schema of plain JSON
(``value.schema``/``key.schema``, a Connect schema or Spark DDL); a source's typed column is
written as the envelope Kafka writes for it.

Envelopes are read by the schema they carry. While the records keep the schema the converter
expects (that of the previous batch, when all its records had one, or of a record sampled while
the batch was planned: ``expect``), the column is made on it straight away, and the job that
reads the column checks that each record begins with the same text as the record the schema came
from, up to its payload (``envelope_prefix``: a comparison of bytes, where reading each record's
schema as text cost a fifth of the batch); a record that does not fails that job, and the batch is
converted again after ``forget_expected``. When the sampled record's decimals are base64 text
(Kafka's default), the expected read takes every decimal as such, and a record with a numeric one
fails it the same way. Then the batch's schemas are learnt by a small Spark
job (its distinct "schema" texts): records of one schema, or of struct schemas that merge (a field
one of them lacks becomes optional), become one typed column; anything else fails the batch naming
the schemas. Only envelopes laid out as Kafka writes them (``{"schema":...,"payload":...}``, no
spaces between) are read on an expected schema; others are always scanned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import (
    BinaryType,
    DataType,
    NullType,
    StringType,
    StructField,
)

from sluiceway.connect import ConnectException
from sluiceway.connect.data.json_format import schema_from_json
from sluiceway.connect.data.json_text import loads
from sluiceway.connect.data.schema import DECIMAL_NAME, Field, Schema, Type
from sluiceway.connect.data.spark import METADATA_KEY, from_spark, from_spark_field
from sluiceway_executor.converters.base import JSON_CONVERTER, Converter, ConverterError, Role, parse_bool
from sluiceway_executor.converters.connect_json import (
    connect_to_json,
    dumps_json,
    infer_schema,
    json_to_connect,
    reject_constant,
)
from sluiceway_executor.converters.connect_spark_json import (
    envelope_json,
    payload_json,
    schema_text,
    typed_from_json,
)
from sluiceway_executor.record_errors import Stage, marked

# Error messages are cut to this many characters of the offending data.
_SNIPPET = 200
# More distinct schemas than this in one batch fail it rather than being merged.
MAX_BATCH_SCHEMAS: Final = 16
# The converter setting holding a declared schema (the connector's value.schema / key.schema).
SCHEMA_SETTING: Final = "schema"

_ENVELOPE_ERROR = (
    'not an envelope: with schemas.enable=true every record must be a JSON object with exactly "schema" '
    'and "payload" fields; for plain JSON records set this converter\'s schemas.enable=false.'
)


def _envelope_map(parsed: Column) -> Column:
    """A parsed JSON record's top level as a map, null when it is not an object."""
    return F.try_variant_get(parsed, "$", "map<string,variant>")


def _text_problem(col: Column) -> Column:
    """Why a record's bytes or text are no JSON text (null when they are, and for null)."""
    text = col.cast("string")
    return (
        F.when(col.isNull(), F.lit(None).cast("string"))
        .when(F.try_parse_json(text).isNull(), F.lit("invalid JSON"))
        .when(~F.is_valid_utf8(text), F.lit("invalid UTF-8 in JSON"))
    )


def _is_envelope(top: Column) -> Column:
    return (
        top.isNotNull()
        & (F.size(top) == 2)
        & F.map_contains_key(top, "schema")
        & F.map_contains_key(top, "payload")
    )


class JsonConverter(Converter):
    """Kafka's JsonConverter: plain JSON, or with `schemas.enable` (Kafka's default: true) the
    {"schema": ..., "payload": ...} envelope."""

    class_name = JSON_CONVERTER

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(role, settings)
        raw = self.settings.get("schemas.enable")
        self.schemas_enable = True if raw is None else parse_bool(f"{role}.converter.schemas.enable", raw)
        self._declared_text = (self.settings.get(SCHEMA_SETTING) or "").strip()
        if self._declared_text and self.schemas_enable:
            raise ConverterError(
                f"{role}.schema declares the schema of plain JSON; with {role}.converter.schemas.enable=true "
                "every record carries its own. Set schemas.enable=false or leave the schema out"
            )
        self._declared: Schema | None = None
        self._parsed: dict[str, Schema] = {}
        # The text the next batch's records are expected to begin with, its schema, and whether
        # their decimals are expected as base64 text (``typed_from_json``'s base64_decimals).
        self._expected: tuple[str, Schema, bool] | None = None

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
        top = _envelope_map(parsed)
        is_envelope = _is_envelope(top)
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

    def problem(self, col: Column) -> Column:
        """Why a record's bytes are not what this converter reads (null when they are), without the
        schema: not JSON, not UTF-8, or (with schemas.enable) not an envelope."""
        found = _text_problem(col)
        if self.schemas_enable:
            parsed = F.try_parse_json(col.cast("string"))
            found = found.when(~_is_envelope(_envelope_map(parsed)), F.lit(_ENVELOPE_ERROR))
        return found

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if data_type is not None and not isinstance(data_type, (StringType, BinaryType, NullType)):
            return self.from_connect_field(col, StructField(self.role, data_type, True))
        # Strings and bytes are JSON text: checked, and written as they are.
        text = col.cast("string")
        checked = (
            F.when(F.try_parse_json(text).isNull(), self._fail("invalid JSON.", text))
            .when(~F.is_valid_utf8(text), self._fail("invalid UTF-8 in JSON.", text))
            .otherwise(text)
        )
        if self.schemas_enable:
            checked = F.concat(F.lit('{"schema":null,"payload":'), checked, F.lit("}"))
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(checked.cast("binary"))

    # -- typed columns --

    def declared_schema(self, batch: DataFrame) -> Schema | None:
        """The schema declared for plain JSON (``value.schema``), parsed once: Connect JSON here,
        Spark DDL by Spark."""
        if not self._declared_text:
            return None
        if self._declared is None:
            self._declared = _parse_declared(batch, self._declared_text, self.role)
        return self._declared

    def _learns_schemas(self) -> bool:
        # Envelopes name their own schemas: the batch's are learnt from its records.
        return self.schemas_enable and not self._declared_text

    def scans_batch(self) -> bool:
        return self._learns_schemas() and self._expected is None

    def expect(self, sample: bytes | None) -> None:
        if self.scans_batch() and sample is not None:
            self._expect_record(bytes(sample))

    def _expect_record(self, record: bytes) -> None:
        try:
            text = record.decode("utf-8")
        except UnicodeDecodeError:
            return
        found = envelope_prefix(text)
        if found is None:
            return
        prefix, schema_json = found
        try:
            schema = self._schema(schema_json)
        except ConverterError:
            return
        try:
            payload = loads(text).get("payload")
        except (ValueError, AttributeError):
            return
        self._expected = (prefix, schema, _decimals_as_text(schema, payload))

    def expecting(self) -> bool:
        return self._expected is not None

    def forget_expected(self) -> None:
        self._expected = None

    def connect_frame(self, batch: DataFrame, name: str) -> tuple[DataFrame, Schema | None]:
        return self._frame(batch, name, None)

    def checked_frame(self, batch: DataFrame, name: str) -> tuple[DataFrame, Schema | None]:
        batch = marked(batch, self.problem(F.col(name)), self.stage, self.class_name, nulled=(name,))
        return self._frame(batch, name, (self.stage, self.class_name))

    def _frame(
        self, batch: DataFrame, name: str, checked: tuple[Stage, str] | None
    ) -> tuple[DataFrame, Schema | None]:
        """``connect_frame``; with ``checked``, a typed record that does not fit is marked instead
        of failing the job (``typed_from_json``)."""
        declared = self.declared_schema(batch)
        if declared is not None:
            return typed_from_json(batch, name, declared, envelope=False, checked=checked), declared
        if not self.schemas_enable:
            return batch.withColumn(name, self.to_connect(F.col(name))), None
        if self._expected is not None:
            prefix, expected, base64_decimals = self._expected
            frame = typed_from_json(
                batch,
                name,
                expected,
                envelope=True,
                prefix=prefix,
                checked=checked,
                base64_decimals=base64_decimals and checked is None,
            )
            return frame, expected
        schema = self._batch_schema(batch, name)
        if schema is None:
            return batch.withColumn(name, self.to_connect(F.col(name))), None
        return typed_from_json(batch, name, schema, envelope=True, checked=checked), schema

    def _schema(self, text: str) -> Schema:
        schema = self._parsed.get(text)
        if schema is None:
            try:
                schema = schema_from_json(loads(text))
            except (ValueError, ConnectException) as exc:
                raise ConverterError(f"{self.label}: an envelope's schema is not valid: {exc}") from None
            if len(self._parsed) < 4 * MAX_BATCH_SCHEMAS:
                self._parsed[text] = schema
        return schema

    def _batch_schema(self, batch: DataFrame, name: str) -> Schema | None:
        """The one schema of the batch's envelopes (merged when they differ and can be); None when
        none of them has one. Runs a Spark job. A batch of one schema leaves it expected, by one of
        its records."""
        text = F.col(name).cast("string")
        found = (
            batch.where(F.col(name).isNotNull())
            .groupBy(F.get_json_object(text, "$.schema").alias("schema"))
            .agg(F.first(text).alias("record"))
            .limit(MAX_BATCH_SCHEMAS + 1)
            .collect()
        )
        texts = [row[0] for row in found]
        if not texts or all(t is None for t in texts):
            return None
        if None in texts:
            raise ConverterError(
                f"{self.label}: the batch mixes records with a schema and records without one (or "
                "that are not envelopes); a typed column needs every record to carry a schema"
            )
        if len(texts) > MAX_BATCH_SCHEMAS:
            raise ConverterError(f"{self.label}: more than {MAX_BATCH_SCHEMAS} schemas in one batch")
        schemas: list[Schema] = []
        for text in texts:
            schema = self._schema(text)
            if schema not in schemas:
                schemas.append(schema)
        if len(texts) == 1:
            self._expect_record(str(found[0][1]).encode("utf-8"))
        merged = schemas[0]
        for other in schemas[1:]:
            merged = merge_schemas(merged, other, self.label)
        return merged

    def from_connect_field(self, col: Column, field: StructField) -> Column:
        data_type = field.dataType
        has_schema = bool((field.metadata or {}).get(METADATA_KEY))
        if isinstance(data_type, (StringType, BinaryType, NullType)) and not has_schema:
            # Text is taken as JSON text, as before typed columns.
            return self.from_connect(col, data_type)
        try:
            schema = from_spark_field(field)
            text = envelope_json(col, schema) if self.schemas_enable else payload_json(col, schema)
        except (ConnectException, ConverterError) as exc:
            raise ConverterError(f"{self.label}: {exc}") from None
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(text.cast("binary"))

    def from_connect_problem(self, col: Column, field: StructField) -> Column | None:
        has_schema = bool((field.metadata or {}).get(METADATA_KEY))
        if not isinstance(field.dataType, (StringType, BinaryType)) or has_schema:
            return None  # typed values are written as the JSON of their schema
        return _text_problem(col)

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


def _decimals_as_text(schema: Schema, value: Any) -> bool:
    """Whether every decimal in ``value`` (a payload of ``schema`` as parsed JSON) is text, as
    Kafka's default decimal.format=BASE64 writes it, rather than a JSON number: the records of a
    topic are taken to be written alike, so a batch expected like its sampled record reads its
    decimals as base64 straight away (a record that is not fails the read, which is then made
    again on the batch's own schemas and decimals of either form)."""
    if value is None:
        return True
    if schema.logical_name == DECIMAL_NAME:
        return isinstance(value, str)
    if schema.type is Type.STRUCT and isinstance(value, dict):
        return all(_decimals_as_text(item.schema, value.get(item.name)) for item in schema.fields)
    if schema.type is Type.ARRAY and isinstance(value, list) and schema.value_schema is not None:
        items = schema.value_schema
        return all(_decimals_as_text(items, item) for item in value)
    if schema.type is Type.MAP and isinstance(value, dict) and schema.value_schema is not None:
        values = schema.value_schema
        return all(_decimals_as_text(values, item) for item in value.values())
    return True


def envelope_prefix(text: str) -> tuple[str, str] | None:
    """For an envelope laid out as Kafka's JsonConverter writes it, ``{"schema":S,"payload":...``
    with S an object: the text up to and including ``"payload":``, and S's own text. Every record
    beginning with that prefix carries the schema S, written the same way. None for any other
    layout."""
    head = '{"schema":'
    if not text.startswith(head + "{"):
        return None
    try:
        _, end = _DECODER.raw_decode(text, len(head))
    except ValueError:
        return None
    tail = ',"payload":'
    if not text.startswith(tail, end):
        return None
    return text[: end + len(tail)], text[len(head) : end]


_DECODER: Final = json.JSONDecoder(parse_constant=reject_constant)


def _parse_declared(batch: DataFrame, text: str, role: str) -> Schema:
    try:
        if text.startswith("{"):
            return schema_from_json(loads(text))
        probe = batch.sparkSession.range(0).select(F.from_json(F.lit(None).cast("string"), text).alias("v"))
        declared = probe.schema["v"].dataType
    except (ValueError, ConnectException) as exc:
        raise ConverterError(f"{role}.schema is not a Kafka Connect schema: {exc}") from None
    except Exception as exc:
        raise ConverterError(f"{role}.schema is not Spark DDL: {str(exc).splitlines()[0]}") from None
    return from_spark(declared, nullable=True)


def merge_schemas(first: Schema, second: Schema, label: str) -> Schema:
    """One struct schema that reads records of both: fields of either, those only one has made
    optional; a field both have must have the same schema up to optionality (optional wins)."""
    if first.type is not Type.STRUCT or second.type is not Type.STRUCT or first.name != second.name:
        raise ConverterError(_mismatch(label, first, second))
    fields: list[Field] = []
    names = [f.name for f in first.fields] + [f.name for f in second.fields if first.field(f.name) is None]
    for index, name in enumerate(names):
        a, b = first.field(name), second.field(name)
        if a is not None and b is not None:
            if a.schema.with_options(optional=True) != b.schema.with_options(optional=True):
                raise ConverterError(_mismatch(label, first, second, name))
            schema = a.schema if a.schema.optional else b.schema
        else:
            only = a or b
            assert only is not None
            schema = only.schema.as_optional()
        fields.append(Field(name, index, schema))
    versions = [v for v in (first.version, second.version) if v is not None]
    return first.with_options(fields=tuple(fields), version=max(versions) if versions else None)


def _mismatch(label: str, first: Schema, second: Schema, field: str | None = None) -> str:
    where = f" (field {field!r} differs)" if field else ""
    return (
        f"{label}: the batch holds records of two schemas that do not merge{where}: "
        f"{schema_text(first)} and {schema_text(second)}"
    )
