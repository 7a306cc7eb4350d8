"""The columns of SparkFileSink's typed lake and the rule for how they may change.

A batch is *typed* when its ``value`` column is a Spark struct (a converter that knows the records'
Kafka Connect schema made it so; each StructField carries the Connect schema in its metadata,
``sluiceway.connect.data.spark``). A typed batch's rows are written with the record's coordinates
first, each in a column of its own (``COORDINATES``: ``kafka_topic``, ``kafka_partition``,
``kafka_offset``, ``kafka_timestamp``, ``kafka_key``, ``kafka_headers``), then every field of
the value as a top-level column. ``row_schema`` gives those columns with the value's fields as
the value schema declares them (a field is nullable only when its Connect schema is optional),
whatever nullability Spark would give a selected field.

The lake's schema is the union of the row schemas of the batches published into it
(``merge_schemas``). A batch may:

- leave the schema as it is, or only change fields' metadata (documentation, versions);
- add fields that are nullable (optional in Connect), at the top or inside a struct, also an
  array's or a map's struct: Parquet and ORC files written later carry the new column, and a
  reader that merges the files' schemas sees it null in older rows;
- leave out fields the lake has that are nullable (they read as null in its rows);
- make a required field nullable (the lake's field becomes nullable).

Anything else cannot be merged and fails the batch before it writes anything: a field whose type
changes (int to string, a decimal's precision or scale, a struct to a string...), a new field that
is required, a required field the batch leaves out, a field whose name differs from one the lake
has only in letter case (Spark matches columns without regard to case). A CSV lake keeps its
columns exactly (CSV files carry no schema a reader could merge): there the batch's field names,
in order, must be the lake's.

The directory columns ``task`` and ``batch`` (from ``task=N/batch=KEY``, lake_commits.py) and
the coordinates' names are taken: a value field called like one of them fails the batch.

Pure Python over PySpark's type classes: no Spark session is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from sluiceway.connect import ConnectException

__all__ = [
    "COORDINATES",
    "DIRECTORY_COLUMNS",
    "LakeSchemaError",
    "LakeState",
    "check_value_fields",
    "is_typed",
    "lake_state",
    "merge_schemas",
    "row_schema",
    "schema_from_text",
    "schema_to_text",
]

# Each column of the batch a sink task gets -> its name in a typed lake, in the lake's order.
COORDINATES: Final[Mapping[str, str]] = {
    "topic": "kafka_topic",
    "partition": "kafka_partition",
    "offset": "kafka_offset",
    "timestamp": "kafka_timestamp",
    "key": "kafka_key",
    "headers": "kafka_headers",
}
# The columns a reader of the lake gets from its directory names (lake_commits.batch_dir).
DIRECTORY_COLUMNS: Final = ("task", "batch")

_TAKEN: Final = frozenset(name.lower() for name in (*COORDINATES.values(), *DIRECTORY_COLUMNS))


class LakeSchemaError(ConnectException):
    """A batch whose rows cannot join the lake: the message names both schemas and each problem."""


def is_typed(batch_schema: StructType) -> bool:
    """Whether a sink batch's records are typed: its ``value`` column is a struct."""
    names = batch_schema.fieldNames()
    return "value" in names and isinstance(batch_schema["value"].dataType, StructType)


def check_value_fields(value: StructType) -> None:
    """Refuses a value whose field is called like a lake column of our own (any letter case)."""
    clashes = [item.name for item in value.fields if item.name.lower() in _TAKEN]
    if clashes:
        raise LakeSchemaError(
            f"the value field(s) {', '.join(clashes)} have the name of a column SparkFileSink writes "
            f"itself in a typed lake ({', '.join([*COORDINATES.values(), *DIRECTORY_COLUMNS])}); "
            "rename the field (for example with a ReplaceField transformation) or write untyped records"
        )


def row_schema(batch_schema: StructType) -> StructType:
    """The columns a typed batch's rows are written with: the coordinates the batch has, renamed
    (``COORDINATES``), then the value's fields as the value schema declares them."""
    value = batch_schema["value"].dataType
    assert isinstance(value, StructType)
    check_value_fields(value)
    present = set(batch_schema.fieldNames())
    coordinates = [
        StructField(lake, column.dataType, column.nullable, column.metadata)
        for source, lake in COORDINATES.items()
        if source in present
        for column in (batch_schema[source],)
    ]
    return StructType([*coordinates, *value.fields])


def schema_to_text(schema: StructType) -> str:
    """A schema as Spark's JSON text (with each field's metadata), for the batch's manifest."""
    return schema.json()


def schema_from_text(text: str) -> StructType:
    parsed = StructType.fromJson(json.loads(text))
    assert isinstance(parsed, StructType)
    return parsed


def _simple(datatype: DataType) -> str:
    return str(datatype.simpleString())


def merge_schemas(lake: StructType | None, batch: StructType, *, csv: bool = False) -> StructType:
    """The lake's schema once ``batch``'s rows join it (``batch`` itself for an empty lake); raises
    LakeSchemaError naming both schemas when they cannot be merged (the module doc's rule)."""
    if lake is None:
        return batch
    problems: list[str] = []
    merged = _merge_struct(lake, batch, "", problems)
    if csv and not problems and batch.fieldNames() != lake.fieldNames():
        problems.append(
            "a CSV lake keeps its columns exactly, in order (CSV files carry no schema a reader "
            f"could merge): the lake has {', '.join(lake.fieldNames())}; the batch has "
            f"{', '.join(batch.fieldNames())}"
        )
    if problems:
        raise LakeSchemaError(
            "the batch's records do not fit the lake's schema: "
            + "; ".join(problems)
            + f". The lake's schema: {_simple(lake)}. The batch's schema: {_simple(batch)}. "
            "Write records of this schema to a new path, or change them to fit."
        )
    return merged


def _merge_struct(lake: StructType, batch: StructType, path: str, problems: list[str]) -> StructType:
    theirs = {item.name: item for item in batch.fields}
    names = set(lake.fieldNames())
    by_lower = {item.name.lower(): item.name for item in lake.fields}
    fields: list[StructField] = []
    for mine in lake.fields:
        where = f"{path}.{mine.name}" if path else mine.name
        other = theirs.get(mine.name)
        if other is None:
            if not mine.nullable:
                problems.append(f"the required field {where} ({_simple(mine.dataType)}) is missing")
            fields.append(mine)
            continue
        datatype = _merge_type(mine.dataType, other.dataType, where, problems)
        # The batch's metadata is the newer word on documentation and versions.
        fields.append(StructField(mine.name, datatype, mine.nullable or other.nullable, other.metadata))
    for other in batch.fields:
        if other.name in names:
            continue
        where = f"{path}.{other.name}" if path else other.name
        known = by_lower.get(other.name.lower())
        if known is not None:
            problems.append(f"the field {where} differs from the lake's {known} only in letter case")
        elif not other.nullable:
            problems.append(
                f"the new field {where} ({_simple(other.dataType)}) is required; a field added later "
                "must be optional"
            )
        else:
            fields.append(other)
    return StructType(fields)


def _merge_type(mine: DataType, other: DataType, where: str, problems: list[str]) -> DataType:
    if isinstance(mine, StructType) and isinstance(other, StructType):
        return _merge_struct(mine, other, where, problems)
    if isinstance(mine, ArrayType) and isinstance(other, ArrayType):
        items = _merge_type(mine.elementType, other.elementType, f"{where}[]", problems)
        return ArrayType(items, mine.containsNull or other.containsNull)
    if isinstance(mine, MapType) and isinstance(other, MapType):
        if mine.keyType != other.keyType:
            problems.append(
                f"the keys of {where} are {_simple(mine.keyType)} in the lake and "
                f"{_simple(other.keyType)} in the batch"
            )
        values = _merge_type(mine.valueType, other.valueType, f"{where}<values>", problems)
        return MapType(mine.keyType, values, mine.valueContainsNull or other.valueContainsNull)
    if mine != other:
        problems.append(f"{where} is {_simple(mine)} in the lake and {_simple(other)} in the batch")
    return mine


@dataclass(frozen=True)
class LakeState:
    """What the newest published batches of a lake say about it: ``schema``, the union of the typed
    ones' schemas (None when none is typed), and ``raw``, whether one of them holds untyped records."""

    schema: StructType | None = None
    raw: bool = False


def lake_state(rows: Iterable[Mapping[str, object]]) -> LakeState:
    """The state of a lake from the rows ``lake_commits`` reads from the newest batch of each task
    directory (a ``schema`` entry: the lake's schema as its writer knew it, None for an untyped
    batch). Raises LakeSchemaError when those batches' schemas cannot be merged."""
    texts: dict[str, object] = {}
    for row in rows:
        texts.setdefault(str(row.get("batch") or ""), row.get("schema"))
    schema: StructType | None = None
    raw = False
    for text in _in_order(texts):
        if not text:
            raw = True
            continue
        try:
            schema = merge_schemas(schema, schema_from_text(str(text)))
        except LakeSchemaError as exc:
            raise LakeSchemaError(f"the newest batches of the lake's tasks disagree: {exc}") from None
    return LakeState(schema, raw)


def _in_order(texts: Mapping[str, object]) -> Sequence[object]:
    return [texts[key] for key in sorted(texts)]
