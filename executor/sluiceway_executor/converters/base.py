"""The converter interface every converter implements, its error, and the Kafka class names."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
from pyspark.sql.types import DataType, StructField

from sluiceway.connect.data.schema import Schema
from sluiceway_executor.record_errors import Stage

Role = Literal["key", "value"]

JSON_CONVERTER: Final = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER: Final = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY_CONVERTER: Final = "org.apache.kafka.connect.converters.ByteArrayConverter"


class ConverterError(ValueError):
    """Data a converter cannot convert, or a converter configuration it cannot use."""


def parse_bool(name: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ConverterError(f"invalid value {raw!r} for {name}: expected true or false")


class Converter(abc.ABC):
    """A configured converter for a record key or value (`role`)."""

    class_name: ClassVar[str]

    def __init__(self, role: Role, settings: Mapping[str, str] | None = None) -> None:
        if role not in ("key", "value"):
            raise ConverterError(f"converter role must be 'key' or 'value', got {role!r}")
        self.role: Role = role
        self.settings: dict[str, str] = dict(settings or {})

    @property
    def label(self) -> str:
        """How error messages name this converter, e.g. "value.converter JsonConverter"."""
        return f"{self.role}.converter {self.class_name.rsplit('.', 1)[-1]}"

    @property
    @abc.abstractmethod
    def connect_type(self) -> DataType:
        """The Spark type of `to_connect`'s result."""

    # -- Spark expressions --

    @abc.abstractmethod
    def to_connect(self, col: Column) -> Column:
        """Kafka bytes (a binary column; a string column is taken as its UTF-8 bytes) → the value a sink
        sees. Null (a tombstone) stays null."""

    @abc.abstractmethod
    def from_connect(self, col: Column, data_type: DataType | None = None) -> Column:
        """What a source produced → Kafka bytes (binary). `data_type` is the column's Spark type when
        known; without it the column must be a string or binary. Null stays null (a tombstone)."""

    def connect_frame(self, batch: DataFrame, name: str) -> tuple[DataFrame, Schema | None]:
        """The batch with its ``name`` column (Kafka bytes) replaced, in place, by what the sink
        sees (``to_connect``), and the Connect schema of that column when the converter made it a
        typed column (None: text or bytes). A converter may run a Spark job on the batch here to
        learn its schemas, and may take more than one projection to make the column."""
        return batch.withColumn(name, self.to_connect(F.col(name))), None

    def checked_frame(self, batch: DataFrame, name: str) -> tuple[DataFrame, Schema | None]:
        """``connect_frame`` for a batch with an error column (``record_errors``): a record this
        converter cannot convert is marked there instead of failing the job. The default suits a
        converter that takes every record."""
        return self.connect_frame(batch, name)

    @property
    def stage(self) -> Stage:
        """The stage a record this converter fails at is reported at."""
        return Stage.KEY_CONVERTER if self.role == "key" else Stage.VALUE_CONVERTER

    def scans_batch(self) -> bool:
        """Whether ``connect_frame`` runs a Spark job over the batch (the caller may then pin the
        batch first, so its records are read once)."""
        return False

    def expect(self, sample: bytes | None) -> None:
        """``sample`` is a record (its bytes) like those the next batch likely holds. A converter
        that learns schemas from the records may take the sample's as the one it expects, so that
        ``connect_frame`` makes the column without scanning (see ``expecting``). By default the
        sample is not used."""
        del sample

    def expecting(self) -> bool:
        """Whether ``connect_frame`` makes the column on a schema it expects, instead of the
        batch's own: each record is then checked against it in the job that reads the column, and
        a record of another schema fails that job. The caller then calls ``forget_expected`` and
        converts the batch again."""
        return False

    def forget_expected(self) -> None:  # noqa: B027 - a converter that expects nothing forgets nothing
        """Drops the schema ``expecting`` builds on: the next ``connect_frame`` learns the batch's."""

    def from_connect_field(self, col: Column, field: StructField) -> Column:
        """``from_connect`` of a source's column, with its StructField (whose metadata may carry
        its Connect schema)."""
        return self.from_connect(col, field.dataType)

    def from_connect_problem(self, col: Column, field: StructField) -> Column | None:
        """Why ``from_connect_field`` would fail on a record (a string column, null where it would
        not), for a batch with an error column; None when it fails on none. The default suits a
        converter that takes every value."""
        return None

    # -- record level --

    @abc.abstractmethod
    def to_connect_value(self, data: bytes | None) -> Any:
        """Kafka bytes → the value a record-level sink task sees."""

    @abc.abstractmethod
    def from_connect_value(self, value: Any, schema: Mapping[str, Any] | None = None) -> bytes | None:
        """A record-level source task's value (with its optional Connect schema) → Kafka bytes."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(role={self.role!r}, settings={self.settings!r})"
