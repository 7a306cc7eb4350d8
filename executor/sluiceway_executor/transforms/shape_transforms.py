"""Transforms that change the shape of a key or value: Cast (fields or the whole value to other
primitive types), ExtractField (a struct becomes one of its fields), HoistField (a value becomes
the one field of a new struct), ValueToKey (the key becomes a struct of value fields) and Flatten
(nested structs become top-level fields). Kafka's keys, Kafka's class names as aliases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from sluiceway.connect import NO_DEFAULT, ConfigDef, ConfigException, ConfigType, ConnectException, Importance
from sluiceway.connect.data.schema import DECIMAL_NAME, Field, Schema, Type
from sluiceway.connect.transforms import RecordColumns, Transformation, TransformContext
from sluiceway_executor.transforms.operands import (
    KEY,
    VALUE,
    PartTransformation,
    kafka_names,
    rebuilt_struct,
    struct_of,
)
from sluiceway_executor.transforms.schemaless import (
    cast_schemaless,
    extract_schemaless,
    flatten_schemaless,
    hoist_schemaless,
    value_to_key_schemaless,
)

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "CastKey",
    "CastValue",
    "ExtractFieldKey",
    "ExtractFieldValue",
    "FlattenKey",
    "FlattenValue",
    "HoistFieldKey",
    "HoistFieldValue",
    "ValueToKey",
]

# ---------------------------------------------------------------- Cast

_TARGETS: Final = {
    "int8": Type.INT8,
    "int16": Type.INT16,
    "int32": Type.INT32,
    "int64": Type.INT64,
    "float32": Type.FLOAT32,
    "float64": Type.FLOAT64,
    "boolean": Type.BOOLEAN,
    "string": Type.STRING,
}
_CASTABLE: Final = frozenset(_TARGETS.values())
_WHOLE: Final = ""


def _cast_specs(items: list[str]) -> dict[str, Type]:
    if not items:
        raise ConfigException("spec", "", "give a type, or field:type pairs")
    specs: dict[str, Type] = {}
    for item in items:
        name, sep, kind = item.rpartition(":")
        if not sep and len(items) == 1:
            name = _WHOLE
        elif not sep or not name:
            raise ConfigException("spec", ",".join(items), f"'{item}' is not of the form field:type")
        target = _TARGETS.get(kind.strip().lower())
        if target is None:
            raise ConfigException(
                "spec",
                ",".join(items),
                f"'{kind}' is not a type to cast to: use one of {', '.join(_TARGETS)}",
            )
        specs[name.strip()] = target
    return specs


def _cast_default(value: Any, target: Type) -> Any:
    if value is None:
        return None
    if target is Type.STRING:
        return str(value).lower() if isinstance(value, bool) else str(value)
    if target is Type.BOOLEAN:
        return value.strip().lower() == "true" if isinstance(value, str) else bool(value)
    if target in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return int(float(value)) if isinstance(value, str) else int(value)


def _cast_column(
    column: Column, schema: Schema, target: Type, where: str
) -> tuple[Column, Schema, Column | None]:
    """The cast column, its schema, and why a record's value cannot be cast (None: any can)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway.connect.data.spark import to_spark

    logical = schema.logical_name
    if (schema.type not in _CASTABLE and schema.type is not Type.BYTES) or (
        logical is not None and logical != DECIMAL_NAME
    ):
        raise ConnectException(f"{where}: a {logical or schema.type.value} cannot be cast")
    if schema.type is Type.BYTES and logical is None:
        raise ConnectException(f"{where}: bytes cannot be cast")
    new_schema = Schema(target, optional=schema.optional, default=_cast_default(schema.default, target))
    problem = None
    if schema.type is Type.STRING and target is Type.BOOLEAN:
        # Java's Boolean.parseBoolean: "true" in any case, everything else false.
        cast = F.lower(F.trim(column)) == F.lit("true")
    elif schema.type is Type.BOOLEAN and target is Type.STRING:
        cast = F.when(column, F.lit("true")).otherwise(F.lit("false"))
    elif target is Type.STRING:
        cast = column.cast(to_spark(new_schema))
    else:
        # A text that is no number, or a number out of the target's range, is the record's fault:
        # null here, and the problem says why (the pipeline skips the record or fails the batch).
        cast = column.try_cast(to_spark(new_schema))
        # The message leaves the value out: it reaches logs, which never hold record contents.
        problem = F.when(
            column.isNotNull() & cast.isNull(), F.lit(f"{where}: the value is no {target.value}")
        )
    return F.when(column.isNull(), F.lit(None)).otherwise(cast), new_schema, problem


def _first(problems: list[Column]) -> Column | None:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return None if not problems else problems[0] if len(problems) == 1 else F.coalesce(*problems)


class Cast(PartTransformation):
    """Casts fields of a struct, or a whole primitive key or value, to other primitive types."""

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "spec",
            ConfigType.LIST,
            NO_DEFAULT,
            None,
            Importance.HIGH,
            "Either one type, for a whole primitive key or value, or field:type pairs. Types: "
            + ", ".join(_TARGETS)
            + ".",
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._specs = _cast_specs(self.settings.get_list("spec"))

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        where = f"transform '{context.alias}'"
        if self.operand(records)[1] is None:
            return cast_schemaless(self, records, context, self._specs, _WHOLE)
        if _WHOLE in self._specs:
            column, schema = self.operand(records)
            if schema is None:
                raise ConnectException(f"{where} (Cast) needs a record {self.PART} with a schema")
            cast, new_schema, problem = _cast_column(
                column, schema, self._specs[_WHOLE], f"{where}, the {self.PART}"
            )
            return self.with_operand(records, cast, new_schema).with_error(problem)
        column, schema = self.struct_operand(records, context)
        for name in self._specs:
            self.field_of(schema, name, context, "spec")
        problems: list[Column] = []

        def cast_field(item: Field, current: Column) -> tuple[Column, Schema] | None:
            target = self._specs.get(item.name)
            if target is None:
                return None
            cast, new_schema, problem = _cast_column(
                current, item.schema, target, f"{where}, field '{item.name}'"
            )
            if problem is not None:
                problems.append(problem)
            return cast, new_schema

        changed = self.with_fields_changed(records, column, schema, cast_field)
        return changed.with_error(_first(problems))


class CastKey(Cast):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("Cast", KEY)


class CastValue(Cast):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("Cast", VALUE)


# ---------------------------------------------------------------- ExtractField / HoistField


def _field_config(doc: str) -> ConfigDef:
    return ConfigDef().define("field", ConfigType.STRING, NO_DEFAULT, None, Importance.MEDIUM, doc)


class ExtractField(PartTransformation):
    """Replaces a struct key or value with one of its fields (null stays null)."""

    def config(self) -> ConfigDef:
        return _field_config("The field to take out.")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        name = self.settings.get_string("field") or ""
        if self.operand(records)[1] is None:
            return extract_schemaless(self, records, context, name)
        column, schema = self.struct_operand(records, context)
        found = self.field_of(schema, name, context, "field")
        extracted = F.when(column.isNull(), F.lit(None)).otherwise(column.getField(name))
        return self.with_operand(records, extracted, found.schema)


class ExtractFieldKey(ExtractField):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("ExtractField", KEY)


class ExtractFieldValue(ExtractField):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("ExtractField", VALUE)


class HoistField(PartTransformation):
    """Wraps the key or value in a new struct (no name) of one field holding it."""

    def config(self) -> ConfigDef:
        return _field_config("The name of the one field of the new struct.")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        name = self.settings.get_string("field") or ""
        column, schema = self.operand(records)
        if schema is None:
            return hoist_schemaless(self, records, name)
        from sluiceway_executor.converters.connect_spark_json import settled

        new_schema = struct_of([(name, schema)])
        # Kafka hoists a null too: the new struct holds it (when its schema allows a null).
        return self.with_operand(records, F.struct(settled(column, schema, name).alias(name)), new_schema)


class HoistFieldKey(HoistField):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("HoistField", KEY)


class HoistFieldValue(HoistField):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("HoistField", VALUE)


# ---------------------------------------------------------------- ValueToKey


class ValueToKey(Transformation):
    """Makes the key a struct (no name) of fields of the struct value."""

    ALIASES: ClassVar[tuple[str, ...]] = ("org.apache.kafka.connect.transforms.ValueToKey",)

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "fields", ConfigType.LIST, NO_DEFAULT, None, Importance.HIGH, "Value fields that make the key."
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._fields = list(self.settings.get_list("fields"))
        if not self._fields:
            raise ConfigException("fields", "", "name at least one value field")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        value, schema = records.value, records.value_schema
        if schema is None:
            return value_to_key_schemaless(records, context, self._fields)
        if schema.type is not Type.STRUCT:
            raise ConnectException(
                f"transform '{context.alias}' (ValueToKey) needs a struct record value with a schema"
            )
        fields = []
        for name in self._fields:
            found = schema.field(name)
            if found is None:
                raise ConnectException(
                    f"transform '{context.alias}': fields names '{name}', which the record value lacks"
                )
            fields.append((name, found.schema))
        key_schema = struct_of(fields)
        key = rebuilt_struct(value, [(name, value.getField(name)) for name in self._fields], key_schema)
        return records.replace(key=key, key_schema=key_schema)


# ---------------------------------------------------------------- Flatten


def _flattened(
    column: Column, schema: Schema, prefix: str, delimiter: str, optional: bool
) -> list[tuple[str, Column, Schema]]:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    out: list[tuple[str, Column, Schema]] = []
    for f in schema.fields:
        name = f"{prefix}{f.name}"
        child = F.when(column.isNull(), F.lit(None)).otherwise(column.getField(f.name))
        if f.schema.type is Type.STRUCT:
            out.extend(
                _flattened(child, f.schema, name + delimiter, delimiter, optional or f.schema.optional)
            )
        else:
            out.append((name, child, f.schema.as_optional() if optional else f.schema))
    return out


class Flatten(PartTransformation):
    """Turns nested structs into top-level fields named by their path, parts joined by the
    delimiter; arrays and maps stay as they are."""

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "delimiter", ConfigType.STRING, ".", None, Importance.MEDIUM, "What joins the parts of a name."
        )

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        delimiter = self.settings.get_string("delimiter") or ""
        if self.operand(records)[1] is None:
            return flatten_schemaless(self, records, context, delimiter)
        column, schema = self.struct_operand(records, context)
        flat = _flattened(column, schema, "", delimiter, False)
        names = [name for name, _, _ in flat]
        if len(set(names)) != len(names):
            clash = sorted({n for n in names if names.count(n) > 1})
            raise ConnectException(f"transform '{context.alias}': two fields flatten to {', '.join(clash)}")
        new_schema = struct_of([(name, s) for name, _, s in flat], like=schema)
        columns = [(name, c) for name, c, _ in flat]
        return self.with_operand(records, rebuilt_struct(column, columns, new_schema), new_schema)


class FlattenKey(Flatten):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("Flatten", KEY)


class FlattenValue(Flatten):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("Flatten", VALUE)
