"""The converters that pass data through: ByteArray (bytes unchanged) and String (text in an encoding)."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import ArrayType, BinaryType, DataType, MapType, NullType, StringType, StructType

from sluiceway_executor.converters.base import (
    BYTE_ARRAY_CONVERTER,
    STRING_CONVERTER,
    Converter,
    ConverterError,
    Role,
)

# -- ByteArray ------------------------------------------------------------------------------------


class ByteArrayConverter(Converter):
    """Passes bytes through unchanged (Kafka's ByteArrayConverter)."""

    class_name = BYTE_ARRAY_CONVERTER

    @property
    def connect_type(self) -> DataType:
        return BinaryType()

    def to_connect(self, col: Column) -> Column:
        return col.cast("binary")

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if data_type is not None and not isinstance(data_type, (BinaryType, StringType, NullType)):
            raise ConverterError(
                f"{self.label} takes binary or string columns, not {data_type.simpleString()}"
            )
        # A string becomes its UTF-8 bytes; binary is unchanged.
        return col.cast("binary")

    def to_connect_value(self, data: bytes | None) -> Any:
        return None if data is None else bytes(data)

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if schema is not None and schema.get("type") != "bytes":
            raise ConverterError(
                f"{self.label} writes only values whose schema type is bytes, not {schema.get('type')}"
            )
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise ConverterError(f"{self.label} takes bytes, not a {type(value).__name__}")


# -- String ---------------------------------------------------------------------------------------


class StringConverter(Converter):
    """Text in the configured encoding (`converter.encoding`, default UTF-8), as Kafka's StringConverter."""

    class_name = STRING_CONVERTER

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        super().__init__(role, settings)
        raw = self.settings.get("converter.encoding") or self.settings.get("encoding") or "UTF-8"
        self.encoding = raw.strip()
        try:
            self._codec = codecs.lookup(self.encoding).name
        except LookupError:
            raise ConverterError(f"{self.label}: unknown encoding {raw!r}") from None
        self._utf8 = self._codec == "utf-8"

    @property
    def connect_type(self) -> DataType:
        return StringType()

    def to_connect(self, col: Column) -> Column:
        if self._utf8:
            # Invalid UTF-8 decodes with replacement characters, as Java's String(bytes, UTF_8) does; a
            # plain cast would keep the invalid bytes in the string.
            return F.make_valid_utf8(col.cast("string"))
        return F.decode(col.cast("binary"), self.encoding)

    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        if isinstance(data_type, BinaryType):
            return col
        if isinstance(data_type, (StructType, MapType, ArrayType)):
            text = F.to_json(col)
        elif data_type is None or isinstance(data_type, (StringType, NullType)):
            # A binary column also casts to itself here.
            text = col if self._utf8 else col.cast("string")
        else:
            text = col.cast("string")
        return text.cast("binary") if self._utf8 else F.encode(text, self.encoding)

    def to_connect_value(self, data: bytes | None) -> Any:
        return None if data is None else bytes(data).decode(self._codec, errors="replace")

    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        # bool as Java's Boolean.toString prints it.
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return text.encode(self._codec)
