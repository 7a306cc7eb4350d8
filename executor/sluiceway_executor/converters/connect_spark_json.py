"""Kafka Connect's JSON format as Spark expressions, both ways, for typed columns: a Spark column
with its Connect schema → the payload JSON Kafka's JsonConverter writes (``payload_json``), and
JSON text → a typed column by a Connect schema (``typed_from_json``, a DataFrame step: a projection
parses the text, the next builds the typed value from the parsed one, so the JSON is parsed once
and the rest compiles). No Python runs per record.

On the wire a Decimal is the base64 of its unscaled value's two's complement bytes (Kafka's default
``decimal.format=BASE64``; a JSON number is read too), a Timestamp epoch milliseconds, a Date epoch
days, a Time milliseconds since midnight, BYTES base64. Spark's ``to_json`` writes doubles and
floats as Java prints them, as Kafka's Jackson does, so the text is byte for byte Kafka's.

Reading applies the schema's rules as Kafka's JsonConverter does: a null meets the field's default
when it has one, and a required field without one fails the batch. Required fields come out as
non-nullable Spark fields. What else the schema says goes into the fields' metadata
(``sluiceway.connect.data.spark``) through ``with_connect_schemas``, a DataFrame step, because
Spark keeps the metadata of nested fields only through ``DataFrame.to``; then ``from_spark_field``
on the column gives the schema back.

Maps whose keys are not strings (Kafka writes them as arrays of [key, value] pairs) have no
expression here: such a schema is refused with a ConverterError before any job runs.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
    VariantType,
)

from sluiceway.connect.data import json_text
from sluiceway.connect.data.json_format import schema_to_json, value_to_json
from sluiceway.connect.data.schema import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Type
from sluiceway.connect.data.spark import METADATA_KEY, to_spark, to_spark_field
from sluiceway_executor.converters.base import ConverterError
from sluiceway_executor.record_errors import Stage, marked

__all__ = [
    "SCHEMA_CHANGED",
    "column_field",
    "envelope_json",
    "payload_json",
    "schema_text",
    "settled",
    "typed_from_json",
    "wire_type",
    "with_connect_schemas",
]

_TWO_64: Final = decimal.Decimal(2**64)
# Every unscaled value of this many digits fits a long.
_LONG_DIGITS: Final = 18
# The digits Spark's decimal arithmetic keeps exact.
_EXACT_DIGITS: Final = 34
_PAYLOAD: Final = "payload"
# The field a checked parse puts the text of a record that does not fit its schema in.
_CORRUPT: Final = "_sluiceway_corrupt"
# How the error of a record whose schema is not the expected one begins.
SCHEMA_CHANGED: Final = "a record's schema is not the one its batch was read with: "


def schema_text(schema: Schema) -> str:
    """The schema's JSON as Kafka's JsonConverter writes it in an envelope."""
    return json_text.dumps(schema_to_json(schema)).decode("utf-8")


def _where(path: str) -> str:
    return f" at {path}" if path else ""


def _check_supported(schema: Schema, path: str) -> None:
    if schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is not Type.STRING or schema.key_schema.logical_name is not None:
            raise ConverterError(
                f"a map with {schema.key_schema.type.value} keys{_where(path)} cannot be a typed column: "
                "only maps with string keys can; use a string key or an array of structs"
            )
        _check_supported(schema.value_schema, f"{path}<values>")
    elif schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        _check_supported(schema.value_schema, f"{path}[]")
    elif schema.type is Type.STRUCT:
        for item in schema.fields:
            _check_supported(item.schema, f"{path}.{item.name}" if path else item.name)


# -- typed → JSON --


def _needs_wire(schema: Schema) -> bool:
    """Whether the column's JSON differs from what ``to_json`` writes for its Spark type."""
    if schema.logical_name in (DECIMAL_NAME, DATE_NAME, TIMESTAMP_NAME) or schema.default is not None:
        return True
    if schema.type in (Type.ARRAY, Type.MAP):
        assert schema.value_schema is not None
        return _needs_wire(schema.value_schema)
    if schema.type is Type.STRUCT:
        return any(_needs_wire(item.schema) for item in schema.fields)
    return False


def _decimal_to_base64(col: Column, spark_type: DataType) -> Column:
    if isinstance(spark_type, DecimalType) and spark_type.precision <= _LONG_DIGITS and spark_type.scale >= 0:
        return _small_decimal_to_base64(col, spark_type.scale)
    # The unscaled value is the decimal's plain text without its point (Spark prints exactly the
    # type's scale digits). A negative value's two's complement is the bitwise complement of
    # -(value + 1), which is not negative: so only numbers of 0 to 10**38 are split, into the high
    # and low 64 bits, and never overflow. Then Java's BigInteger.toByteArray (minimal two's
    # complement) by dropping redundant leading 00 and FF bytes. Spark's decimal arithmetic keeps
    # 34 significant digits (Scala's DECIMAL128): a value of more fails rather than being rounded.
    digits = F.regexp_replace(col.cast(StringType()), r"\.", "")
    significant = F.length(F.regexp_replace(digits, "^-?0*", ""))
    too_long = F.raise_error(
        F.concat(F.lit(f"a decimal of more than {_EXACT_DIGITS} digits cannot be written exactly: "), digits)
    )
    unscaled = F.when(significant > _EXACT_DIGITS, too_long.cast(DecimalType(38, 0))).otherwise(
        digits.cast(DecimalType(38, 0))
    )
    negative = unscaled < 0
    # -(value + 1) as |value| - 1: no step of it leaves 38 digits, whichever branch Spark evaluates.
    magnitude = F.abs(unscaled) - F.when(negative, F.lit(1)).otherwise(F.lit(0))
    low = F.pmod(magnitude, F.lit(_TWO_64)).cast(DecimalType(20, 0))
    high = ((magnitude - low) / F.lit(_TWO_64)).cast(LongType())
    hexed = F.concat(F.lpad(F.hex(high), 16, "0"), F.lpad(F.conv(low.cast(StringType()), 10, 16), 16, "0"))
    complement = F.when(negative, F.translate(hexed, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(hexed)
    minimal = F.regexp_replace(F.regexp_replace(complement, "^(00)+(?=[0-7])", ""), "^(FF)+(?=[89A-F])", "")
    return F.base64(F.unhex(minimal))


def _small_decimal_to_base64(col: Column, scale: int) -> Column:
    """``_decimal_to_base64`` for an unscaled value that fits a long, without text or regular
    expressions: the long's two's complement hex (16 digits), cut to the fewest whole bytes that
    still hold the value and its sign, as Java's BigInteger.toByteArray does."""
    unscaled = (col * F.lit(decimal.Decimal(10) ** scale)).cast(LongType()) if scale else col.cast(LongType())
    size = F.lit(8)
    for width in range(7, 0, -1):
        bound = 1 << (8 * width - 1)
        size = F.when(unscaled.between(-bound, bound - 1), F.lit(width)).otherwise(size)
    hexed = F.lpad(F.hex(unscaled), 16, "0")
    return F.base64(F.unhex(F.substr(hexed, F.lit(17) - size * 2, size * 2)))


def _to_wire(col: Column, schema: Schema, path: str) -> Column:
    if schema.default is not None:
        # Kafka writes a field's default in place of a null.
        return _to_wire(F.coalesce(col, _default(schema, path)), schema.with_options(default=None), path)
    if not _needs_wire(schema):
        return col
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        return _decimal_to_base64(col, to_spark(schema))
    if logical == TIMESTAMP_NAME:
        return F.unix_millis(col)
    if logical == DATE_NAME:
        return F.unix_date(col)
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        items = schema.value_schema
        return F.transform(col, lambda item: _to_wire(item, items, f"{path}[]"))
    if schema.type is Type.MAP:
        assert schema.value_schema is not None
        values = schema.value_schema
        return F.transform_values(col, lambda _key, value: _to_wire(value, values, f"{path}<values>"))
    assert schema.type is Type.STRUCT
    fields = [
        _to_wire(col.getField(item.name), item.schema, f"{path}.{item.name}").alias(item.name)
        for item in schema.fields
    ]
    return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*fields))


def payload_json(col: Column, schema: Schema) -> Column:
    """The JSON text Kafka's JsonConverter writes for the column's values (``schema`` is the
    column's Connect schema); null for a null value."""
    _check_supported(schema, "")
    options = {"ignoreNullFields": "false"}
    wire = _to_wire(col, schema, "")
    if schema.type in (Type.STRUCT, Type.ARRAY, Type.MAP):
        # Null for a null value.
        return F.to_json(wire, options)
    # to_json writes only structs, arrays and maps: a primitive goes in a struct whose '{"p":' and
    # '}' are cut off (a short text, so writing it twice costs little).
    wrapped = F.to_json(F.struct(wire.alias("p")), options)
    return F.when(col.isNull(), F.lit(None).cast(StringType())).otherwise(
        F.substring(wrapped, 6, F.length(wrapped) - 6)
    )


def envelope_json(col: Column, schema: Schema) -> Column:
    """The envelope Kafka's JsonConverter writes with ``schemas.enable=true``; null (a tombstone)
    for a null value."""
    return F.concat(
        F.lit('{"schema":' + schema_text(schema) + ',"payload":'), payload_json(col, schema), F.lit("}")
    )


# -- JSON → typed --


def wire_type(schema: Schema, base64_decimals: bool = False) -> DataType:
    """The Spark type ``from_json`` parses the schema's JSON into, before logical types are made.
    ``base64_decimals``: decimals are read as base64 text only (the parser decodes it; a JSON
    number fails the parse), where otherwise either form is read through a variant."""
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        # Base64 text (Kafka's default) or a JSON number (decimal.format=NUMERIC).
        return BinaryType() if base64_decimals else VariantType()
    if logical == TIMESTAMP_NAME:
        return LongType()
    if logical in (DATE_NAME, TIME_NAME):
        return IntegerType()
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        return ArrayType(wire_type(schema.value_schema, base64_decimals))
    if schema.type is Type.MAP:
        assert schema.value_schema is not None
        return MapType(StringType(), wire_type(schema.value_schema, base64_decimals))
    if schema.type is Type.STRUCT:
        return StructType(
            [StructField(item.name, wire_type(item.schema, base64_decimals)) for item in schema.fields]
        )
    return to_spark(schema)


def _bind(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` computed once: the body refers to it as a lambda variable, so
    an expression used several times is not copied into the plan each time (copies made plans that
    took seconds to optimise and compile). The variable's type is made nullable all through: a
    struct passed through it whole would lose its fields' non-nullability, so bodies build what
    they return."""
    return F.aggregate(F.array(F.lit(0)), value, lambda acc, _unused: acc, body)


def _decimal_from_hex(hexed: Column, spark_type: DecimalType) -> Column:
    """The decimal whose unscaled value's two's complement bytes are ``hexed`` (hex digits)."""
    if spark_type.precision <= _LONG_DIGITS:
        # The common case, kept to plain expressions that Spark compiles: the unscaled value fits
        # a long, so the bytes sign-extend to 64 bits and the point moves by an exact product.
        return _small_decimal(hexed, spark_type)

    def from_text(hexed: Column) -> Column:
        # The unscaled value's bytes, sign-extended to 128 bits (38 digits fit): the high 64 bits
        # read as a signed number, the low ones as an unsigned one.
        negative = F.substr(hexed, F.lit(1), F.lit(1)).isin("8", "9", "A", "B", "C", "D", "E", "F")
        wide = F.lpad(hexed, 32, F.when(negative, F.lit("F")).otherwise(F.lit("0")))
        high = F.conv(F.substr(wide, F.lit(1), F.lit(16)), 16, -10).cast(DecimalType(20, 0))
        low = F.conv(F.substr(wide, F.lit(17), F.lit(16)), 16, 10).cast(DecimalType(20, 0))
        return _bind((high * F.lit(_TWO_64) + low).cast(DecimalType(38, 0)), scaled)

    def scaled(unscaled: Column) -> Column:
        # Moving the point in the digits is exact where dividing by 10**scale would round.
        digits = F.abs(unscaled).cast(StringType())
        scale = spark_type.scale
        if scale:
            # lpad also cuts a longer string to the width: only short ones are padded.
            padded = F.when(F.length(digits) > scale, digits).otherwise(F.lpad(digits, scale + 1, "0"))
            point = F.length(padded) - F.lit(scale)
            whole, fraction = F.substr(padded, F.lit(1), point), F.substr(padded, point + 1, F.lit(scale))
            digits = F.concat(whole, F.lit("."), fraction)
        return F.when(unscaled < 0, F.concat(F.lit("-"), digits)).otherwise(digits).cast(spark_type)

    return _bind(hexed, from_text)


def _decimal_from_wire(col: Column, spark_type: DecimalType, base64_decimals: bool) -> Column:
    if base64_decimals:
        # Already decoded by the parser (``wire_type``): no variant to look into.
        return _decimal_from_hex(F.hex(col), spark_type)
    text = F.hex(F.unbase64(F.variant_get(col, "$", "string")))
    number = F.variant_get(col, "$", spark_type.simpleString())
    return F.when(F.schema_of_variant(col) == F.lit("STRING"), _decimal_from_hex(text, spark_type)).otherwise(
        number
    )


def _small_decimal(hexed: Column, spark_type: DecimalType) -> Column:
    """The decimal whose unscaled value's two's complement bytes are ``hexed`` (hex digits), for
    precisions of at most 18 digits: more than 8 bytes cannot be such a value and fail."""
    negative = F.substr(hexed, F.lit(1), F.lit(1)).isin("8", "9", "A", "B", "C", "D", "E", "F")
    wide = F.lpad(hexed, 16, F.when(negative, F.lit("F")).otherwise(F.lit("0")))
    unscaled = F.conv(wide, 16, -10).cast(LongType()).cast(DecimalType(_LONG_DIGITS + 1, 0))
    point = decimal.Decimal(1).scaleb(-spark_type.scale)
    value = (unscaled * F.lit(point)).cast(spark_type) if spark_type.scale else unscaled.cast(spark_type)
    too_long = F.raise_error(
        F.concat(F.lit(f"a base64 decimal of more than 8 bytes for {spark_type.simpleString()}: "), hexed)
    )
    return F.when(F.length(hexed) > 16, too_long.cast(spark_type)).otherwise(value)


def _zero(spark_type: DataType) -> Column:
    """A non-null value of the type: it makes a required field's column non-nullable, and is never
    the value (a null fails the batch first)."""
    if isinstance(spark_type, StructType):
        return F.struct(*[_zero(f.dataType).alias(f.name) for f in spark_type.fields])
    if isinstance(spark_type, (ArrayType, MapType)):
        return (F.array() if isinstance(spark_type, ArrayType) else F.create_map()).cast(spark_type)
    if isinstance(spark_type, DecimalType):
        # A literal of exactly the scale widens without a cast that could fail (and make it nullable).
        zero = "0." + "0" * spark_type.scale if spark_type.scale else "0"
        return F.expr(f"CAST({zero}BD AS {spark_type.simpleString()})")
    if isinstance(spark_type, TimestampType):
        return F.timestamp_millis(F.lit(0))
    if isinstance(spark_type, DateType):
        return F.lit(dt.date(1970, 1, 1))
    if isinstance(spark_type, BinaryType):
        return F.lit(bytearray())
    if isinstance(spark_type, StringType):
        return F.lit("")
    if isinstance(spark_type, BooleanType):
        return F.lit(False)
    return F.lit(0).cast(spark_type)


def _default(schema: Schema, path: str) -> Column:
    text = json_text.dumps(value_to_json(schema, schema.default)).decode("utf-8")
    return _from_wire(_parse(F.lit(text), wire_type(schema)), schema.with_options(default=None), path)


def _parse(text: Column, wire: DataType) -> Column:
    holder = StructType([StructField("v", wire)])
    return F.from_json(F.concat(F.lit('{"v":'), text, F.lit("}")), holder, {"mode": "FAILFAST"}).getField("v")


def _settle(col: Column, schema: Schema, path: str) -> Column:
    """Kafka's rules for a null: the default when there is one, else null when optional, else an
    error."""
    if schema.default is not None:
        fallback = _default(schema, path)
    elif schema.optional:
        return col
    else:
        fallback = F.raise_error(
            F.lit(
                f"a required {schema.type.value} field{_where(path)} is null and its schema gives no default"
            )
        ).cast(to_spark(schema))
    # coalesce names ``col`` once: a CASE on its nullness put the whole value (a struct's every
    # field) into the plan twice, and Spark computed it twice per record.
    if schema.optional:
        return F.coalesce(col, fallback)
    return F.coalesce(col, fallback, _zero(to_spark(schema)))


def settled(col: Column, schema: Schema, path: str) -> Column:
    """``col`` as a field of ``schema`` holds it: null meets the default, and a required field's
    column is not nullable (a null fails the job, naming ``path``)."""
    return _settle(col, schema, path)


def _from_wire(col: Column, schema: Schema, path: str, base64_decimals: bool = False) -> Column:
    logical = schema.logical_name
    if logical == DECIMAL_NAME:
        spark_type = to_spark(schema)
        assert isinstance(spark_type, DecimalType)
        return _decimal_from_wire(col, spark_type, base64_decimals)
    if logical == TIMESTAMP_NAME:
        return F.timestamp_millis(col)
    if logical == DATE_NAME:
        return F.date_from_unix_date(col)
    if schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        items = schema.value_schema
        where = f"{path}[]"
        return F.transform(
            col, lambda item: _settle(_from_wire(item, items, where, base64_decimals), items, where)
        )
    if schema.type is Type.MAP:
        assert schema.value_schema is not None
        values = schema.value_schema
        where = f"{path}<values>"
        return F.transform_values(
            col, lambda _k, v: _settle(_from_wire(v, values, where, base64_decimals), values, where)
        )
    if schema.type is Type.STRUCT:
        fields = []
        for item in schema.fields:
            where = f"{path}.{item.name}" if path else item.name
            value = _from_wire(col.getField(item.name), item.schema, where, base64_decimals)
            fields.append(_settle(value, item.schema, where).alias(item.name))
        return F.when(col.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    return col


def _null_problem(col: Column, schema: Schema, path: str) -> Column | None:
    """Why ``col`` (a parsed wire value of ``schema``) cannot be settled: the path of a required
    field that is null with no default, as a message; null when it can. None when nothing in the
    schema can be such a field."""
    own = None
    if not schema.optional and schema.default is None:
        message = f"a required {schema.type.value} field{_where(path)} is null and has no default"
        own = F.when(col.isNull(), F.lit(message))
    inner: Column | None = None
    if schema.type is Type.STRUCT:
        parts = []
        for item in schema.fields:
            where = f"{path}.{item.name}" if path else item.name
            found = _null_problem(col.getField(item.name), item.schema, where)
            if found is not None:
                parts.append(found)
        inner = None if not parts else parts[0] if len(parts) == 1 else F.coalesce(*parts)
    elif schema.type in (Type.ARRAY, Type.MAP) and schema.value_schema is not None:
        items, where = schema.value_schema, f"{path}[]" if schema.type is Type.ARRAY else f"{path}<values>"
        if _null_problem(F.lit(None), items, where) is not None:
            values = col if schema.type is Type.ARRAY else F.map_values(col)

            def item_problem(item: Column) -> Column:
                found = _null_problem(item, items, where)
                return F.lit(None).cast("string") if found is None else found

            found_all = F.transform(values, item_problem)
            inner = F.try_element_at(F.filter(found_all, lambda m: m.isNotNull()), F.lit(1))
    if inner is not None:
        inner = F.when(col.isNotNull(), inner)
    if own is None or inner is None:
        return own if inner is None else inner
    return F.coalesce(own, inner)


def typed_from_json(
    frame: DataFrame,
    name: str,
    schema: Schema,
    envelope: bool,
    prefix: str | None = None,
    checked: tuple[Stage, str] | None = None,
    base64_decimals: bool = False,
) -> DataFrame:
    """``frame`` with its ``name`` column of JSON text (string or UTF-8 bytes) holding values of
    ``schema`` replaced, in place, by the typed column: whole envelopes (their ``payload`` is
    read) or bare payloads. A null text (a tombstone) stays null; a null payload follows the
    schema's rules (see the module doc). With ``prefix``, a text that does not begin with it
    fails the job that reads the column (``SCHEMA_CHANGED``).

    ``checked`` (the stage and the converter's class name): a payload that does not fit the schema,
    or a required field that is null, marks its record in ``frame``'s error column
    (``record_errors``) instead of failing the job, and the record's column is null.

    ``base64_decimals`` (not with ``checked``): every decimal is expected as base64 text, Kafka's
    default, and a record holding one as a JSON number fails the job that reads the column, as a
    record of another schema does. The parser then decodes the text itself, where a decimal that
    may be either form is parsed into a variant first: about a fifth of the typed column's cost
    for a record with one decimal among six fields."""
    _check_supported(schema, "")
    if base64_decimals and checked is not None:
        raise ValueError("base64_decimals would mark every record with a numeric decimal as failed")
    wire = wire_type(schema, base64_decimals)
    holder = StructType([StructField(_PAYLOAD, wire)])
    text = F.col(name).cast("string")
    source = text if envelope else F.concat(F.lit('{"payload":'), text, F.lit("}"))
    # Null only for a null text: a null payload parses to a holder with a null field.
    if checked is None:
        parse = F.from_json(source, holder, {"mode": "FAILFAST"})
    else:
        # PERMISSIVE keeps the text of a record that does not fit in the corrupt-record field.
        holder = StructType([*holder.fields, StructField(_CORRUPT, StringType())])
        parse = F.from_json(source, holder, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT})
    if prefix is not None:
        # Checked before the parse, so a record of another schema fails here, by name.
        other = F.raise_error(F.concat(F.lit(SCHEMA_CHANGED), F.substring(text, 1, 200)))
        parse = F.when(text.isNotNull() & ~text.startswith(prefix), other.cast(holder)).otherwise(parse)
    parsed = frame.withColumn(name, parse)
    if checked is not None:
        stage, class_name = checked
        payload = F.col(name).getField(_PAYLOAD)
        problems = [
            F.when(
                F.col(name).getField(_CORRUPT).isNotNull(),
                F.lit(f"the payload does not fit its schema ({schema_text(schema)[:200]})"),
            )
        ]
        nested = _null_problem(payload, schema, "")
        if nested is not None:
            problems.append(nested)
        problem = F.when(F.col(name).isNotNull(), F.coalesce(*problems) if len(problems) > 1 else problems[0])
        parsed = marked(parsed, problem, stage, class_name, nulled=(name,))
    # Every field reads the parsed column: Spark keeps the two projections apart (the parse is
    # not cheap to repeat), so it is parsed once per record.
    value = _from_wire(F.col(name).getField(_PAYLOAD), schema, "", base64_decimals)
    typed = value if schema.optional and schema.default is None else _settle(value, schema, "")
    return parsed.withColumn(
        name, F.when(F.col(name).isNull(), F.lit(None).cast(to_spark(schema))).otherwise(typed)
    )


def column_field(name: str, schema: Schema) -> StructField:
    """The StructField of a top-level column holding ``schema``'s values: nullable whatever the
    schema says, since a tombstone is a null; the schema's own name and version in its metadata,
    and that it is required when it is (the column's nullability cannot say it)."""
    field = to_spark_field(name, schema)
    metadata = dict(field.metadata or {})
    if not schema.optional:
        metadata[METADATA_KEY] = {**metadata.get(METADATA_KEY, {}), "optional": False}
    return StructField(name, field.dataType, True, metadata)


def with_connect_schemas(frame: DataFrame, schemas: dict[str, Schema]) -> DataFrame:
    """``frame`` with the named columns' types carrying their Connect schemas in metadata, nested
    fields included. Types do not change (the columns must already have them)."""
    target = StructType(
        [column_field(f.name, schemas[f.name]) if f.name in schemas else f for f in frame.schema.fields]
    )
    return frame.to(target)
