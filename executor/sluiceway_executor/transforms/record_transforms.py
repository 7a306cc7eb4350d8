"""Transforms of a record's topic, headers, or presence: RegexRouter and TimestampRouter (a new
topic), Filter (drops the record), InsertHeader and DropHeaders. Kafka's keys and class names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import NO_DEFAULT, ConfigDef, ConfigException, ConfigType, ConnectException, Importance
from sluiceway.connect.transforms import RecordColumns, Transformation, TransformContext
from sluiceway_executor.transforms.operands import KAFKA_TRANSFORMS

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "HEADERS_TYPE",
    "DropHeaders",
    "Filter",
    "InsertHeader",
    "RegexRouter",
    "TimestampRouter",
    "whole_match",
]

# The headers column's Spark type, in DDL.
HEADERS_TYPE: Final = "array<struct<key:string,value:binary>>"


def whole_match(pattern: str) -> str:
    """A Java regular expression matching what ``pattern`` matches as a whole (Matcher.matches)."""
    return rf"\A(?:{pattern})\z"


class RegexRouter(Transformation):
    """Renames the topic of records whose whole topic matches ``regex`` to ``replacement``, in
    which $1, $2 ... are the regex's groups."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{KAFKA_TRANSFORMS}RegexRouter",)

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "regex",
                ConfigType.STRING,
                NO_DEFAULT,
                None,
                Importance.HIGH,
                "What a topic must match, whole.",
            )
            .define(
                "replacement",
                ConfigType.STRING,
                NO_DEFAULT,
                None,
                Importance.HIGH,
                "The new topic; $1 ... groups.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._regex = whole_match(self.settings.get_string("regex") or "")
        self._replacement = self.settings.get_string("replacement") or ""

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        topic = records.topic
        renamed = F.regexp_replace(topic, F.lit(self._regex), F.lit(self._replacement))
        return records.replace(topic=F.when(topic.rlike(self._regex), renamed).otherwise(topic))


class TimestampRouter(Transformation):
    """Sets the topic from ``topic.format``, in which ${topic} is the record's topic and ${timestamp}
    its timestamp written with ``timestamp.format`` (in UTC). A record without a timestamp fails
    the batch."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{KAFKA_TRANSFORMS}TimestampRouter",)

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "topic.format",
                ConfigType.STRING,
                "${topic}-${timestamp}",
                None,
                Importance.HIGH,
                "The new topic: ${topic} and ${timestamp} are replaced.",
            )
            .define(
                "timestamp.format",
                ConfigType.STRING,
                "yyyyMMdd",
                None,
                Importance.HIGH,
                "How ${timestamp} is written (a date-time pattern, letters as Java's SimpleDateFormat).",
            )
        )

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if records.timestamp is None:
            raise ConnectException(f"transform '{context.alias}' (TimestampRouter) needs record timestamps")
        stamp = records.timestamp
        # Written as a UTC wall time whatever the Spark session's time zone.
        utc = F.to_utc_timestamp(stamp, F.current_timezone())
        text = F.date_format(utc, self.settings.get_string("timestamp.format") or "")
        missing = F.raise_error(F.lit(f"transform '{context.alias}': a record has no timestamp"))
        written = F.when(stamp.isNull(), missing.cast("string")).otherwise(text)
        parts: list[Column] = []
        template = self.settings.get_string("topic.format") or ""
        for piece in re.split(r"(\$\{topic\}|\$\{timestamp\})", template):
            if piece == "${topic}":
                parts.append(records.topic)
            elif piece == "${timestamp}":
                parts.append(written)
            elif piece:
                parts.append(F.lit(piece))
        return records.replace(topic=F.concat(*parts) if parts else F.lit(""))


class Filter(Transformation):
    """Drops every record it applies to: with a predicate, the records the predicate picks."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{KAFKA_TRANSFORMS}Filter",)

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        return records.replace(keep=F.lit(False))


class InsertHeader(Transformation):
    """Adds a header with a fixed text value (its UTF-8 bytes, as Kafka's SimpleHeaderConverter
    writes a string) to every record."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{KAFKA_TRANSFORMS}InsertHeader",)

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("header", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH, "The header's name.")
            .define(
                "value.literal", ConfigType.STRING, NO_DEFAULT, None, Importance.HIGH, "The header's value."
            )
        )

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        name = self.settings.get_string("header") or ""
        value = (self.settings.get_string("value.literal") or "").encode("utf-8")
        added = F.array(F.struct(F.lit(name).alias("key"), F.lit(bytearray(value)).alias("value")))
        headers = F.coalesce(records.headers, F.array().cast(HEADERS_TYPE))
        return records.replace(headers=F.concat(headers, added))


class DropHeaders(Transformation):
    """Removes the headers of the given names."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{KAFKA_TRANSFORMS}DropHeaders",)

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "headers", ConfigType.LIST, NO_DEFAULT, None, Importance.HIGH, "Names of the headers to remove."
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._names = list(self.settings.get_list("headers"))
        if not self._names:
            raise ConfigException("headers", "", "name at least one header")

    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        names = self._names
        return records.replace(headers=F.filter(records.headers, lambda h: ~h.getField("key").isin(names)))
