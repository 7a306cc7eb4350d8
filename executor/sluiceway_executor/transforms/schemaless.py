"""The field transforms on a key or value without a schema, as Kafka applies them to a schemaless
value (a Map for a JSON object).

Without a schema the key or value is text: JSON from ``JsonConverter`` with ``schemas.enable=false``
(or a source task's text), plain text from ``StringConverter``. Here it is read as JSON where it
is JSON, and as a string where it is not; a JSON object becomes a ``map<string, variant>`` inside
Spark, is changed with map functions, and is written back as compact JSON text (a JSON object's
keys come out sorted by name: Kafka's own schemaless maps keep no order either). A record whose
key or value is not what the transform needs (a JSON object, a number to cast) is marked in
``RecordColumns.error``: the pipeline skips it or fails the batch as ``errors.tolerance`` says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from sluiceway.connect.data.schema import Type
from sluiceway.connect.transforms import RecordColumns, TransformContext
from sluiceway_executor.transforms.operands import PartTransformation

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "cast_schemaless",
    "extract_schemaless",
    "flatten_schemaless",
    "header_from_schemaless",
    "hoist_schemaless",
    "insert_schemaless",
    "json_object",
    "mask_schemaless",
    "object_operand",
    "replace_schemaless",
    "timestamp_schemaless",
    "value_to_key_schemaless",
]

# Spark's names for the types a variant holds (schema_of_variant) that Kafka masks as 0.
_NUMBER_TYPES: Final = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL)"
_JSON_NUMBER: Final = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
# Spark's reading of a variant as each type Cast targets.
_CAST_TYPES: Final = {
    Type.INT8: "tinyint",
    Type.INT16: "smallint",
    Type.INT32: "int",
    Type.INT64: "bigint",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BOOLEAN: "boolean",
    Type.STRING: "string",
}


def json_value(text: Column) -> Column:
    """The key's or value's text as a variant: its JSON, or the text itself as a string when it is
    not JSON; null for null."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    as_text = text.cast("string")
    return F.coalesce(F.try_parse_json(as_text), as_text.cast("variant"))


def json_object(text: Column) -> Column:
    """The text's top-level JSON object as a map<string, variant>; null when it is no object."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return F.try_variant_get(F.try_parse_json(text.cast("string")), "$", "map<string,variant>")


def object_operand(
    transform: PartTransformation, records: RecordColumns, context: TransformContext
) -> tuple[Column, RecordColumns]:
    """The schemaless operand as a map, and the records with a problem set where the operand is
    there but is no JSON object."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    column, _ = transform.operand(records)
    found = json_object(column)
    problem = F.when(
        column.isNotNull() & found.isNull(),
        F.lit(
            f"transform '{context.alias}' ({type(transform).__name__}): a record {transform.PART} without "
            "a schema must be a JSON object"
        ),
    )
    return found, records.with_error(problem)


def _with_json(transform: PartTransformation, records: RecordColumns, variant: Column) -> RecordColumns:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return transform.with_operand(records, F.to_json(variant), None)


def _without(found: Column, names: Sequence[str]) -> Column:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return F.map_filter(found, lambda key, _value: ~key.isin(list(names)))


def insert_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    inserted: Mapping[str, Column],
) -> RecordColumns:
    """InsertField: each name of ``inserted`` set to its column (a value the object has under that
    name is replaced, as Kafka's map put does). The caller hands a timestamp as epoch
    milliseconds."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found, records = object_operand(transform, records, context)
    names = list(inserted)
    added = F.map_from_arrays(
        F.array(*[F.lit(name) for name in names]),
        F.array(*[column.cast("variant") for column in inserted.values()]),
    )
    return _with_json(transform, records, F.map_concat(_without(found, names), added))


def replace_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    exclude: set[str],
    include: set[str],
    renames: Mapping[str, str],
) -> RecordColumns:
    """ReplaceField: the object's keys kept (include), dropped (exclude) and renamed."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found, records = object_operand(transform, records, context)

    def kept(key: Column, _value: Column) -> Column:
        keep = ~key.isin(sorted(exclude)) if exclude else F.lit(True)
        return keep & key.isin(sorted(include)) if include else keep

    out = F.map_filter(found, kept)
    if renames:

        def renamed(key: Column, _value: Column) -> Column:
            choice = key
            for old, new in renames.items():
                choice = F.when(key == F.lit(old), F.lit(new)).otherwise(choice)
            return choice

        out = F.transform_keys(out, renamed)
    return _with_json(transform, records, out)


def mask_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    fields: Sequence[str],
    replacement: str | None,
) -> RecordColumns:
    """MaskField: each named value replaced by the empty value of the JSON type it has (0, "",
    false, [] or {}), or by ``replacement`` for text and numbers; a null stays null."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found, records = object_operand(transform, records, context)
    where = f"transform '{context.alias}' ({type(transform).__name__})"
    problems: list[Column] = []

    def masked(key: Column, value: Column) -> Column:
        kind = F.schema_of_variant(value)
        number = kind.rlike(_NUMBER_TYPES)
        if replacement is None:
            empty = (
                F.when(number, F.parse_json(F.lit("0")))
                .when(kind == F.lit("STRING"), F.lit("").cast("variant"))
                .when(kind == F.lit("BOOLEAN"), F.parse_json(F.lit("false")))
                .when(kind.startswith("ARRAY"), F.parse_json(F.lit("[]")))
                .when(kind.startswith("OBJECT"), F.parse_json(F.lit("{}")))
            )
        else:
            as_number = (
                F.parse_json(F.lit(replacement))
                if _JSON_NUMBER.fullmatch(replacement)
                else F.lit(None).cast("variant")
            )
            empty = F.when(kind == F.lit("STRING"), F.lit(replacement).cast("variant")).when(
                number, as_number
            )
        hit = key.isin(list(fields)) & ~F.is_variant_null(value)
        return F.when(hit, F.coalesce(empty, value)).otherwise(value)

    # A value the replacement cannot stand for (a boolean, an array, a number for a text that is
    # no number) is the record's problem, as in Kafka.
    if replacement is not None:
        number_ok = _JSON_NUMBER.fullmatch(replacement) is not None

        def refused(key: Column, value: Column) -> Column:
            kind = F.schema_of_variant(value)
            fine = (kind == F.lit("STRING")) | (kind.rlike(_NUMBER_TYPES) & F.lit(number_ok))
            return key.isin(list(fields)) & ~F.is_variant_null(value) & ~fine

        bad = F.exists(F.map_entries(found), lambda entry: refused(entry["key"], entry["value"]))
        problems.append(F.when(bad, F.lit(f"{where}: a masked field's type cannot take '{replacement}'")))
    for problem in problems:
        records = records.with_error(problem)
    return _with_json(transform, records, F.transform_values(found, masked))


def extract_schemaless(
    transform: PartTransformation, records: RecordColumns, context: TransformContext, field: str
) -> RecordColumns:
    """ExtractField: the object's value under ``field`` (null when it has none)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found, records = object_operand(transform, records, context)
    return _with_json(transform, records, F.try_element_at(found, F.lit(field)))


def hoist_schemaless(transform: PartTransformation, records: RecordColumns, field: str) -> RecordColumns:
    """HoistField: an object of one key, ``field``, holding the whole key or value; a null (a
    tombstone) stays null."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    column, _ = transform.operand(records)
    wrapped = F.create_map(F.lit(field), json_value(column))
    return _with_json(transform, records, F.when(column.isNotNull(), wrapped))


def value_to_key_schemaless(
    records: RecordColumns, context: TransformContext, fields: Sequence[str]
) -> RecordColumns:
    """ValueToKey: the key becomes an object of the value's ``fields`` (null where the value has
    none); a tombstone gets a null key."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found = json_object(records.value)
    problem = F.when(
        records.value.isNotNull() & found.isNull(),
        F.lit(
            f"transform '{context.alias}' (ValueToKey): a record value without a schema must be a JSON object"
        ),
    )
    key = F.map_from_arrays(
        F.array(*[F.lit(name) for name in fields]),
        F.array(*[F.try_element_at(found, F.lit(name)) for name in fields]),
    )
    key = F.when(found.isNotNull(), F.to_json(key))
    return records.replace(key=key, key_schema=None).with_error(problem)


def cast_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    specs: Mapping[str, Type],
    whole: str,
) -> RecordColumns:
    """Cast: the whole value (``specs`` holds ``whole``) or the object's named values read as the
    target types; a value that cannot be (a text that is no number) is the record's problem."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    where = f"transform '{context.alias}' ({type(transform).__name__})"

    def cast(value: Column, target: Type) -> Column:
        return F.try_variant_get(value, "$", _CAST_TYPES[target]).cast("variant")

    if whole in specs:
        column, _ = transform.operand(records)
        value = json_value(column)
        result = cast(value, specs[whole])
        problem = F.when(
            value.isNotNull() & ~F.is_variant_null(value) & result.isNull(),
            F.lit(f"{where}: the {transform.PART} is no {specs[whole].value}"),
        )
        return _with_json(transform, records.with_error(problem), result)
    found, records = object_operand(transform, records, context)

    def cast_entry(key: Column, value: Column) -> Column:
        out = value
        for name, target in specs.items():
            out = F.when(key == F.lit(name), cast(value, target)).otherwise(out)
        return out

    def refused(key: Column, value: Column) -> Column:
        bad = F.lit(False)
        for name, target in specs.items():
            bad = bad | ((key == F.lit(name)) & ~F.is_variant_null(value) & cast(value, target).isNull())
        return bad

    failed = F.exists(F.map_entries(found), lambda entry: refused(entry["key"], entry["value"]))
    records = records.with_error(F.when(failed, F.lit(f"{where}: a field's value cannot be cast")))
    return _with_json(transform, records, F.transform_values(found, cast_entry))


# Nested objects deeper than this stay objects in Flatten's output: Spark expressions cannot
# recurse, so each level is one more step of the expression.
FLATTEN_DEPTH: Final = 8


def flatten_schemaless(
    transform: PartTransformation, records: RecordColumns, context: TransformContext, delimiter: str
) -> RecordColumns:
    """Flatten: nested objects' keys joined to their parents' with ``delimiter``, up to
    ``FLATTEN_DEPTH`` levels; arrays stay as they are."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    found, records = object_operand(transform, records, context)

    def level(flat: Column) -> Column:
        def expand(entry: Column) -> Column:
            inner = F.try_variant_get(entry["value"], "$", "map<string,variant>")
            nested = F.transform(
                F.map_entries(inner),
                lambda item: F.struct(
                    F.concat(entry["key"], F.lit(delimiter), item["key"]).alias("key"),
                    item["value"].alias("value"),
                ),
            )
            is_object = F.schema_of_variant(entry["value"]).startswith("OBJECT")
            return F.when(is_object, nested).otherwise(F.array(entry))

        return F.map_from_entries(F.flatten(F.transform(F.map_entries(flat), expand)))

    flat = found
    for _ in range(FLATTEN_DEPTH):
        flat = level(flat)
    return _with_json(transform, records, F.when(found.isNotNull(), flat))


def header_from_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    fields: Sequence[str],
    headers: Sequence[str],
    move: bool,
) -> RecordColumns:
    """HeaderFrom: each named value becomes a header (a string as its text, anything else as its
    JSON), and with ``move`` leaves the object. A tombstone passes unchanged."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway_executor.transforms.record_transforms import HEADERS_TYPE

    found, records = object_operand(transform, records, context)

    def header_value(name: str) -> Column:
        value = F.try_element_at(found, F.lit(name))
        text = F.when(
            F.schema_of_variant(value) == F.lit("STRING"), F.try_variant_get(value, "$", "string")
        ).otherwise(F.to_json(value))
        return F.encode(F.when(~F.is_variant_null(value), text), "UTF-8")

    added = F.array(
        *[
            F.struct(F.lit(header).alias("key"), header_value(name).alias("value"))
            for name, header in zip(fields, headers, strict=True)
        ]
    )
    existing = F.coalesce(records.headers, F.array().cast(HEADERS_TYPE))
    records = records.replace(
        headers=F.when(found.isNotNull(), F.concat(existing, added)).otherwise(records.headers)
    )
    if not move:
        return records
    return _with_json(transform, records, _without(found, fields))


def timestamp_schemaless(
    transform: PartTransformation,
    records: RecordColumns,
    context: TransformContext,
    field: str,
    convert: Callable[[Column, Column], Column],
) -> RecordColumns:
    """TimestampConverter: the whole value, or the object's ``field``, converted by ``convert``
    (a number read as Unix time, a text with the format; gives a variant, null when the value is
    no timestamp in either form, which is the record's problem)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    where = f"transform '{context.alias}' ({type(transform).__name__})"

    def converted(value: Column) -> tuple[Column, Column]:
        kind = F.schema_of_variant(value)
        # By the JSON type, not by what the value can be read as: "2024" is a text, not Unix time.
        no_number, no_text = F.lit(None).cast("bigint"), F.lit(None).cast("string")
        chosen = F.when(
            kind.rlike(_NUMBER_TYPES), convert(F.try_variant_get(value, "$", "bigint"), no_text)
        ).when(kind == F.lit("STRING"), convert(no_number, F.try_variant_get(value, "$", "string")))
        return chosen, value.isNotNull() & ~F.is_variant_null(value) & chosen.isNull()

    if not field:
        column, _ = transform.operand(records)
        result, failed = converted(json_value(column))
        problem = F.when(failed, F.lit(f"{where}: the {transform.PART} is no timestamp in a form it reads"))
        return _with_json(transform, records.with_error(problem), result)
    found, records = object_operand(transform, records, context)
    result, failed = converted(F.try_element_at(found, F.lit(field)))
    problem = F.when(failed, F.lit(f"{where}: field '{field}' is no timestamp in a form it reads"))
    changed = F.transform_values(
        found, lambda key, value: F.when(key == F.lit(field), result).otherwise(value)
    )
    return _with_json(transform, records.with_error(problem), changed)
