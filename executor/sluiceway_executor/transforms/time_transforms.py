"""TimestampConverter: a timestamp between its forms (text by a pattern, a Unix number, Kafka
Connect's Timestamp, Date and Time), for the whole key or value or one of its fields. Kafka's keys
and class names; times are in UTC, as Kafka's converter reads and writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import NO_DEFAULT, ConfigDef, ConfigException, ConfigType, ConnectException, Importance
from sluiceway.connect.data.schema import (
    DATE_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    Field,
    Schema,
    Type,
    date_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway.connect.transforms import RecordColumns, TransformContext
from sluiceway_executor.transforms.operands import (
    KEY,
    VALUE,
    PartTransformation,
    kafka_names,
)
from sluiceway_executor.transforms.schemaless import timestamp_schemaless

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["TimestampConverterKey", "TimestampConverterValue", "utc_text"]

_STRING: Final = "string"
_UNIX: Final = "unix"
_TARGETS: Final = (_STRING, _UNIX, "Date", "Time", "Timestamp")
_PRECISIONS: Final = ("seconds", "milliseconds", "microseconds", "nanoseconds")
_DAY_MS: Final = 86_400_000


def _kind(schema: Schema) -> str | None:
    """Which of the five forms ``schema`` is, or None."""
    logical = schema.logical_name
    if logical == TIMESTAMP_NAME:
        return "Timestamp"
    if logical == DATE_NAME:
        return "Date"
    if logical == TIME_NAME:
        return "Time"
    if schema.type is Type.INT64 and logical is None:
        return _UNIX
    if schema.type is Type.STRING and logical is None:
        return _STRING
    return None


def utc_text(stamp: Column, pattern: str) -> Column:
    """``stamp`` (a timestamp) as text in ``pattern``, the wall time in UTC."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    # Written as the UTC wall time, whatever the Spark session's time zone.
    return F.date_format(F.to_utc_timestamp(stamp, F.current_timezone()), pattern)


def _fromutc_text(text: Column, pattern: str) -> Column:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    # try_: a text the pattern does not read is null here, and the record's problem (see apply).
    return F.from_utc_timestamp(F.try_to_timestamp(text, F.lit(pattern)), F.current_timezone())


class TimestampConverter(PartTransformation):
    """Converts a timestamp, the whole key or value or its ``field``, to ``target.type``."""

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "target.type",
                ConfigType.STRING,
                NO_DEFAULT,
                None,
                Importance.HIGH,
                "The form to convert to: string, unix, Date, Time or Timestamp.",
            )
            .define(
                "field",
                ConfigType.STRING,
                "",
                None,
                Importance.HIGH,
                "The field to convert; empty: the whole value.",
            )
            .define(
                "format",
                ConfigType.STRING,
                "",
                None,
                Importance.MEDIUM,
                "The date-time pattern of the text form (letters as Java's SimpleDateFormat), to read "
                "text from or write it with.",
            )
            .define(
                "unix.precision",
                ConfigType.STRING,
                "milliseconds",
                None,
                Importance.LOW,
                "What a Unix number counts: seconds, milliseconds, microseconds or nanoseconds.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        target = self.settings.get_string("target.type") or ""
        if target not in _TARGETS:
            raise ConfigException("target.type", target, f"one of {', '.join(_TARGETS)}")
        precision = self.settings.get_string("unix.precision") or ""
        if precision not in _PRECISIONS:
            raise ConfigException("unix.precision", precision, f"one of {', '.join(_PRECISIONS)}")
        self._target, self._precision = target, precision
        self._field = self.settings.get_string("field") or ""
        self._format = self.settings.get_string("format") or ""
        if target == _STRING and not self._format:
            raise ConfigException("format", "", "a pattern is needed to write text")

    def _to_timestamp(self, column: Column, kind: str, where: str) -> Column:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if kind == "Timestamp":
            return column
        if kind == "Date":
            return F.timestamp_seconds(F.unix_date(column).cast("long") * 86_400)
        if kind == "Time":
            return F.timestamp_millis(column.cast("long"))
        if kind == _UNIX:
            if self._precision == "seconds":
                return F.timestamp_seconds(column)
            if self._precision == "milliseconds":
                return F.timestamp_millis(column)
            if self._precision == "microseconds":
                return F.timestamp_micros(column)
            return F.timestamp_micros(F.floor(column / 1000).cast("long"))
        if not self._format:
            raise ConnectException(f"{where}: reading a timestamp from text needs format")
        return _fromutc_text(column, self._format)

    def _from_timestamp(self, stamp: Column) -> tuple[Column, Schema]:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        target = self._target
        if target == "Timestamp":
            return stamp, timestamp_schema()
        if target == "Date":
            return F.date_from_unix_date(F.floor(F.unix_millis(stamp) / _DAY_MS).cast("int")), date_schema()
        if target == "Time":
            return F.pmod(F.unix_millis(stamp), F.lit(_DAY_MS)).cast("int"), time_schema()
        if target == _STRING:
            return utc_text(stamp, self._format), Schema(Type.STRING)
        unix = {
            "seconds": F.unix_seconds(stamp),
            "milliseconds": F.unix_millis(stamp),
            "microseconds": F.unix_micros(stamp),
            "nanoseconds": F.unix_micros(stamp) * 1000,
        }[self._precision]
        return unix, Schema(Type.INT64)

    def _converted(self, column: Column, schema: Schema, where: str) -> tuple[Column, Schema, Column | None]:
        """The converted column, its schema, and why a record's text cannot be read (None: every
        value can)."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        kind = _kind(schema)
        if kind is None:
            raise ConnectException(
                f"{where}: a {schema.logical_name or schema.type.value} is not a timestamp in any form "
                "TimestampConverter reads (text, a Unix int64, Timestamp, Date, Time)"
            )
        stamp = self._to_timestamp(column, kind, where)
        value, target_schema = self._from_timestamp(stamp)
        converted = F.when(column.isNull(), F.lit(None)).otherwise(value)
        problem = None
        if kind == _STRING:
            unread = column.isNotNull() & stamp.isNull()
            problem = F.when(unread, F.lit(f"{where}: the text is not in the format"))
        return converted, target_schema.with_options(optional=schema.optional), problem

    def _schemaless(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        """Without a schema, a number is Unix time and a text has ``format``; the result is text or
        a Unix number (JSON has no date or time types)."""
        where = f"transform '{context.alias}' (TimestampConverter)"
        if self._target not in (_STRING, _UNIX):
            raise ConnectException(
                f"{where}: a {self.PART} without a schema is JSON, which has no {self._target}; convert to "
                "string or unix, or use a converter with schemas"
            )

        def convert(number: Column, text: Column) -> Column:
            from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

            stamp = F.coalesce(self._to_timestamp(number, _UNIX, where), self._to_text_timestamp(text, where))
            value, _ = self._from_timestamp(stamp)
            return value.cast("variant")

        return timestamp_schemaless(self, records, context, self._field, convert)

    def _to_text_timestamp(self, text: Column, where: str) -> Column:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        # Without format a text cannot be read: such a value is the record's problem.
        return self._to_timestamp(text, _STRING, where) if self._format else F.lit(None).cast("timestamp")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        where = f"transform '{context.alias}'"
        if self.operand(records)[1] is None:
            return self._schemaless(records, context)
        if not self._field:
            column, schema = self.operand(records)
            assert schema is not None
            converted, new_schema, problem = self._converted(column, schema, f"{where}, the {self.PART}")
            return self.with_operand(records, converted, new_schema).with_error(problem)
        column, schema = self.struct_operand(records, context)
        self.field_of(schema, self._field, context, "field")

        problems: list[Column] = []

        def convert(item: Field, current: Column) -> tuple[Column, Schema] | None:
            if item.name != self._field:
                return None
            field_where = f"{where}, field '{item.name}'"
            converted, new_schema, problem = self._converted(current, item.schema, field_where)
            if problem is not None:
                problems.append(problem)
            return converted, new_schema

        changed = self.with_fields_changed(records, column, schema, convert)
        # One field is converted, so there is at most one problem.
        return changed.with_error(problems[0] if problems else None)


class TimestampConverterKey(TimestampConverter):
    PART: ClassVar[str] = KEY
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("TimestampConverter", KEY)


class TimestampConverterValue(TimestampConverter):
    PART: ClassVar[str] = VALUE
    ALIASES: ClassVar[tuple[str, ...]] = kafka_names("TimestampConverter", VALUE)
