"""Transforms that change a struct key's or value's fields and keep it a struct: InsertField,
ReplaceField, MaskField, and SetSchemaMetadata (which changes only the schema's name and version).
Each has Kafka's keys and Kafka's class names as aliases; their meaning is as Kafka documents.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import (
    NO_DEFAULT,
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConfigType,
    ConnectException,
    Importance,
)
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
    timestamp_schema,
)
from sluiceway.connect.transforms import RecordColumns, TransformContext
from sluiceway_executor.transforms.operands import (
    KEY,
    VALUE,
    PartTransformation,
    kafka_names,
    rebuilt_struct,
    struct_of,
)
from sluiceway_executor.transforms.schemaless import insert_schemaless, mask_schemaless, replace_schemaless

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "InsertFieldKey",
    "InsertFieldValue",
    "MaskFieldKey",
    "MaskFieldValue",
    "ReplaceFieldKey",
    "ReplaceFieldValue",
    "SetSchemaMetadataKey",
    "SetSchemaMetadataValue",
]


# ---------------------------------------------------------------- InsertField

_INSERTED: Final = ("topic", "partition", "offset", "timestamp", "static")
_INSERT_DOC: Final = {
    "topic": "Field to hold the record's topic. A name ending in '!' makes the field required, '?' "
    "(or nothing) optional.",
    "partition": "Field to hold the record's Kafka partition (int32); '!' or '?' as for topic.field.",
    "offset": "Field to hold the record's offset (int64); sink connectors only. '!' or '?' as for "
    "topic.field.",
    "timestamp": "Field to hold the record's timestamp (a Timestamp); '!' or '?' as for topic.field.",
    "static": "Field to hold static.value (a string); '!' or '?' as for topic.field.",
}


@dataclass(frozen=True)
class _Inserted:
    name: str
    optional: bool

    @classmethod
    def parse(cls, text: str) -> _Inserted:
        if text.endswith("!"):
            return cls(text[:-1], False)
        return cls(text[:-1] if text.endswith("?") else text, True)


class InsertField(PartTransformation):
    """Adds fields holding the record's topic, partition, offset, timestamp or a fixed text to a
    struct key or value. A null (tombstone) stays null."""

    def config(self) -> ConfigDef:
        definition = ConfigDef()
        for kind in _INSERTED:
            definition.define(
                f"{kind}.field", ConfigType.STRING, None, None, Importance.MEDIUM, _INSERT_DOC[kind]
            )
        return definition.define(
            "static.value", ConfigType.STRING, None, None, Importance.MEDIUM, "The text static.field holds."
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._fields = {
            kind: _Inserted.parse(text)
            for kind in _INSERTED
            if (text := self.settings.get_string(f"{kind}.field"))
        }
        if not self._fields:
            raise ConfigException("topic.field", None, "name at least one field to insert")
        if "static" in self._fields and self.settings.get_string("static.value") is None:
            raise ConfigException("static.value", None, "static.field needs the text it holds")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if self.operand(records)[1] is None:
            return self._schemaless(records, context)
        column, schema = self.struct_operand(records, context)
        sources: dict[str, tuple[Column | None, Schema]] = {
            "topic": (records.topic, STRING_SCHEMA),
            "partition": (records.partition, INT32_SCHEMA),
            "offset": (records.offset, INT64_SCHEMA),
            "timestamp": (records.timestamp, timestamp_schema()),
            "static": (F.lit(self.settings.get_string("static.value")), STRING_SCHEMA),
        }
        fields = [(f.name, f.schema) for f in schema.fields]
        columns = [(f.name, column.getField(f.name)) for f in schema.fields]
        for kind, inserted in self._fields.items():
            source, field_schema = sources[kind]
            if source is None:
                raise ConnectException(
                    f"transform '{context.alias}': {kind}.field asks for the record's {kind}, which "
                    f"{'a source record does not have' if not context.is_sink else 'this batch lacks'}"
                )
            if schema.field(inserted.name) is not None:
                raise ConnectException(
                    f"transform '{context.alias}': the record {self.PART} has a field '{inserted.name}' "
                    f"already; {kind}.field would add it twice"
                )
            fields.append((inserted.name, field_schema.as_optional() if inserted.optional else field_schema))
            columns.append((inserted.name, source))
        new_schema = struct_of(fields, like=schema)
        return self.with_operand(records, rebuilt_struct(column, columns, new_schema), new_schema)

    def _schemaless(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        timestamp = None if records.timestamp is None else F.unix_millis(records.timestamp)
        sources = {
            "topic": records.topic,
            "partition": records.partition,
            "offset": records.offset,
            "timestamp": timestamp,
            "static": F.lit(self.settings.get_string("static.value")),
        }
        inserted: dict[str, Column] = {}
        for kind, field in self._fields.items():
            source = sources[kind]
            if source is None:
                raise ConnectException(
                    f"transform '{context.alias}': {kind}.field asks for the record's {kind}, which "
                    f"{'a source record does not have' if not context.is_sink else 'this batch lacks'}"
                )
            inserted[field.name] = source
        return insert_schemaless(self, records, context, inserted)


class InsertFieldKey(InsertField):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("InsertField", KEY)


class InsertFieldValue(InsertField):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("InsertField", VALUE)


# ---------------------------------------------------------------- ReplaceField


def _renames(items: list[str]) -> dict[str, str]:
    renames: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition(":")
        if not sep or not old or not new or ":" in new:
            raise ConfigException("renames", ",".join(items), f"'{item}' is not of the form old:new")
        renames[old] = new
    return renames


class ReplaceField(PartTransformation):
    """Keeps, drops and renames the fields of a struct key or value."""

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("exclude", ConfigType.LIST, "", None, Importance.MEDIUM, "Fields to drop.")
            .define(
                "include",
                ConfigType.LIST,
                "",
                None,
                Importance.MEDIUM,
                "Fields to keep; when set, every other field is dropped.",
            )
            .define("renames", ConfigType.LIST, "", None, Importance.MEDIUM, "Renames, each old:new.")
            .define("blacklist", ConfigType.LIST, "", None, Importance.LOW, "Older name of exclude.")
            .define("whitelist", ConfigType.LIST, "", None, Importance.LOW, "Older name of include.")
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        settings: AbstractConfig = self.settings
        self._exclude = set(settings.get_list("exclude") or settings.get_list("blacklist"))
        self._include = set(settings.get_list("include") or settings.get_list("whitelist"))
        self._renames = _renames(settings.get_list("renames"))

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        if self.operand(records)[1] is None:
            return replace_schemaless(self, records, context, self._exclude, self._include, self._renames)
        column, schema = self.struct_operand(records, context)
        kept = [
            f
            for f in schema.fields
            if f.name not in self._exclude and (not self._include or f.name in self._include)
        ]
        fields = [(self._renames.get(f.name, f.name), f.schema) for f in kept]
        names = [name for name, _ in fields]
        if len(set(names)) != len(names):
            raise ConnectException(
                f"transform '{context.alias}': renames give two fields the same name ({', '.join(names)})"
            )
        new_schema = struct_of(fields, like=schema)
        columns = [(name, column.getField(f.name)) for (name, _), f in zip(fields, kept, strict=True)]
        return self.with_operand(records, rebuilt_struct(column, columns, new_schema), new_schema)


class ReplaceFieldKey(ReplaceField):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("ReplaceField", KEY)


class ReplaceFieldValue(ReplaceField):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("ReplaceField", VALUE)


# ---------------------------------------------------------------- MaskField

_NUMBERS: Final = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64)


def _masked(column: Column, schema: Schema, replacement: str | None, where: str) -> Column:
    """The value a masked field takes: its type's empty value, or ``replacement`` read as its
    type (numbers and text only, as Kafka allows)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway.connect.data.spark import to_spark

    spark_type = to_spark(schema)
    logical = schema.logical_name
    numeric = schema.type in _NUMBERS or logical == DECIMAL_NAME
    if replacement is not None:
        if schema.type is Type.STRING and logical is None:
            return F.lit(replacement)
        if numeric:
            return F.lit(replacement).cast(spark_type)
        raise ConnectException(
            f"{where}: a {logical or schema.type.value} field cannot take a replacement text"
        )
    # Kafka masks a date or a time as the epoch.
    if logical == TIMESTAMP_NAME:
        return F.timestamp_millis(F.lit(0))
    if logical == DATE_NAME:
        return F.date_from_unix_date(F.lit(0))
    if numeric or logical == TIME_NAME:
        return F.lit(0).cast(spark_type)
    if schema.type is Type.STRING:
        return F.lit("")
    if schema.type is Type.BOOLEAN:
        return F.lit(False)
    if schema.type is Type.BYTES:
        return F.lit(bytearray())
    if schema.type is Type.ARRAY:
        return F.array().cast(spark_type)
    if schema.type is Type.MAP:
        return F.create_map().cast(spark_type)
    raise ConnectException(f"{where}: a {schema.type.value} field cannot be masked")


class MaskField(PartTransformation):
    """Replaces the values of chosen fields with their type's empty value (0, "", false, an empty
    array or map, the epoch) or with a given text read as the field's type."""

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("fields", ConfigType.LIST, NO_DEFAULT, None, Importance.HIGH, "Fields to mask.")
            .define(
                "replacement",
                ConfigType.STRING,
                None,
                None,
                Importance.LOW,
                "What masked fields hold instead of their type's empty value: for text and number "
                "fields only.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._fields = list(self.settings.get_list("fields"))
        if not self._fields:
            raise ConfigException("fields", "", "name at least one field to mask")
        self._replacement = self.settings.get_string("replacement")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if self.operand(records)[1] is None:
            return mask_schemaless(self, records, context, self._fields, self._replacement)
        column, schema = self.struct_operand(records, context)
        for name in self._fields:
            self.field_of(schema, name, context, "fields")
        columns = []
        for f in schema.fields:
            current = column.getField(f.name)
            if f.name in self._fields:
                where = f"transform '{context.alias}', field '{f.name}'"
                masked = _masked(current, f.schema, self._replacement, where)
                current = F.when(current.isNull(), F.lit(None)).otherwise(masked)
            columns.append((f.name, current))
        return self.with_operand(records, rebuilt_struct(column, columns, schema), schema)


class MaskFieldKey(MaskField):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("MaskField", KEY)


class MaskFieldValue(MaskField):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("MaskField", VALUE)


# ---------------------------------------------------------------- SetSchemaMetadata


class SetSchemaMetadata(PartTransformation):
    """Sets the name and/or version of the key's or value's schema; the data is untouched."""

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("schema.name", ConfigType.STRING, None, None, Importance.HIGH, "The schema's new name.")
            .define(
                "schema.version", ConfigType.INT, None, None, Importance.HIGH, "The schema's new version."
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._name = self.settings.get_string("schema.name")
        version = self.settings.get("schema.version")
        self._version: int | None = int(version) if version is not None else None
        if self._name is None and self._version is None:
            raise ConfigException("schema.name", None, "set schema.name, schema.version or both")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        column, schema = self.operand(records)
        if schema is None:
            raise ConnectException(
                f"transform '{context.alias}' (SetSchemaMetadata) needs a record {self.PART} with a schema"
            )
        changes: dict[str, object] = {}
        if self._name is not None:
            changes["name"] = self._name
        if self._version is not None:
            changes["version"] = self._version
        return self.with_operand(records, column, schema.with_options(**changes))


class SetSchemaMetadataKey(SetSchemaMetadata):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("SetSchemaMetadata", KEY)


class SetSchemaMetadataValue(SetSchemaMetadata):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("SetSchemaMetadata", VALUE)
