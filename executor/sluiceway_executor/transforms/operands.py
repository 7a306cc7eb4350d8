"""What the key and value transforms share: the column a transform works on (the record's key or
its value) with its Connect schema, rebuilding a struct field by field, and the names Kafka gives
the two variants of a transform (``InsertField$Key``, ``InsertField$Value``).

Spark is imported by the functions only: the control plane loads the transforms to validate
configs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import ConnectException
from sluiceway.connect.data.schema import Field, Schema, Type
from sluiceway.connect.transforms import RecordColumns, Transformation, TransformContext

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "KAFKA_TRANSFORMS",
    "PartTransformation",
    "rebuilt_struct",
    "struct_of",
]

KAFKA_TRANSFORMS: Final = "org.apache.kafka.connect.transforms."

KEY: Final = "key"
VALUE: Final = "value"


def struct_of(fields: Sequence[tuple[str, Schema]], like: Schema | None = None) -> Schema:
    """A struct schema of ``fields``; with ``like``, keeping its name, version, doc, parameters
    and optionality (Kafka's SchemaUtil.copySchemaBasics)."""
    items = tuple(Field(name, index, schema) for index, (name, schema) in enumerate(fields))
    if like is None:
        return Schema(Type.STRUCT, fields=items)
    return Schema(
        Type.STRUCT,
        optional=like.optional,
        name=like.name,
        version=like.version,
        doc=like.doc,
        parameters=like.parameters,
        fields=items,
    )


def rebuilt_struct(original: Column, fields: Sequence[tuple[str, Column]], schema: Schema) -> Column:
    """A struct column of ``fields``, one per field of ``schema`` and in its order; null where
    ``original`` is null (a tombstone stays one). A required field that comes out null fails the
    batch, as Kafka's Struct refuses it."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway_executor.converters.connect_spark_json import settled

    columns = [
        settled(column, item.schema, name).alias(name)
        for (name, column), item in zip(fields, schema.fields, strict=True)
    ]
    return F.when(original.isNull(), F.lit(None)).otherwise(F.struct(*columns))


class PartTransformation(Transformation):
    """A transform with a key variant and a value variant, as Kafka's ``$Key`` and ``$Value``
    nested classes: subclasses set ``PART``."""

    PART: ClassVar[str] = VALUE

    def operand(self, records: RecordColumns) -> tuple[Column, Schema | None]:
        if self.PART == KEY:
            return records.key, records.key_schema
        return records.value, records.value_schema

    def with_operand(self, records: RecordColumns, column: Column, schema: Schema | None) -> RecordColumns:
        if self.PART == KEY:
            return records.replace(key=column, key_schema=schema)
        return records.replace(value=column, value_schema=schema)

    def struct_operand(self, records: RecordColumns, context: TransformContext) -> tuple[Column, Schema]:
        """The operand when it is a struct with a schema; a ConnectException naming the transform
        otherwise."""
        column, schema = self.operand(records)
        if schema is None or schema.type is not Type.STRUCT:
            shape = "no schema" if schema is None else f"a {schema.type.value} schema"
            raise ConnectException(
                f"transform '{context.alias}' ({type(self).__name__}) works on a record {self.PART} that "
                f"is a struct with a schema; this one has {shape}. Use a converter with schemas "
                f"(JsonConverter with schemas.enable=true) or declare {self.PART}.schema"
            )
        return column, schema

    def with_fields_changed(
        self,
        records: RecordColumns,
        column: Column,
        schema: Schema,
        change: Callable[[Field, Column], tuple[Column, Schema] | None],
    ) -> RecordColumns:
        """The records with the struct operand rebuilt field by field: ``change`` gives a field's
        new column and schema, or None to keep it as it is."""
        fields: list[tuple[str, Schema]] = []
        columns: list[tuple[str, Column]] = []
        for item in schema.fields:
            current = column.getField(item.name)
            changed = change(item, current)
            new_column, new_schema = changed if changed is not None else (current, item.schema)
            fields.append((item.name, new_schema))
            columns.append((item.name, new_column))
        struct = struct_of(fields, like=schema)
        return self.with_operand(records, rebuilt_struct(column, columns, struct), struct)

    def field_of(self, schema: Schema, name: str, context: TransformContext, setting: str) -> Field:
        found = schema.field(name)
        if found is None:
            have = ", ".join(f.name for f in schema.fields) or "none"
            raise ConnectException(
                f"transform '{context.alias}': {setting} names the field '{name}', which the record "
                f"{self.PART} does not have (its fields: {have})"
            )
        return found


def kafka_names(simple: str, part: str) -> tuple[str, ...]:
    """The names Kafka Connect configs use for a part transform: its full class name with ``$Key``
    or ``$Value``, and the same without the package."""
    suffix = "$Key" if part == KEY else "$Value"
    return (f"{KAFKA_TRANSFORMS}{simple}{suffix}", f"{simple}{suffix}")
