"""Single message transforms and predicates, Kafka Connect's SMTs, for batches inside Spark.

A transform does to every record of a batch what Kafka's ``Transformation.apply`` does to one,
but as Spark column expressions: it gets the batch's record columns (:class:`RecordColumns`) and
returns new ones, and the pipeline plans them into the batch's job. No Python runs per record.

The key and the value are typed Spark columns when they carry a Connect schema (a struct from
``JsonConverter`` with schemas, or from a DataFrame source), and that schema travels beside the
column in ``key_schema`` / ``value_schema``: a transform that changes a column's shape returns the
schema of the new shape too, and the pipeline writes it into the column's metadata. A key or value
without a schema (``None``) is the text or bytes the converter gave.

A :class:`Predicate` gives a boolean column; a transform configured with it (``transforms.<alias>
.predicate``) applies only to the records where it holds (or, with ``negate``, where it does not).

A :class:`RecordTransformation` is the exception: a transform written per record in Python, for
what column expressions cannot say (a call into a library, say). The executor runs it inside Spark
over Arrow batches (``mapInArrow``), so it costs a Python call per record.

Plugins subclass these classes and are named in a connector's config by their dotted class path
(in a ``plugin.path`` directory) or by an alias they declare in ``ALIASES``. Spark is imported only
when a transform is applied, so the control plane can load and validate them without it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from sluiceway.connect.config import AbstractConfig, ConfigDef
from sluiceway.connect.data.schema import Schema

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "ConnectRecord",
    "DataFrameTransformation",
    "Predicate",
    "RecordColumns",
    "RecordTransformation",
    "TransformContext",
    "Transformation",
]


@dataclass(frozen=True)
class RecordColumns:
    """A batch's records as column expressions.

    ``key`` and ``value`` as the converters (a sink) or the source task (a source) gave them, with
    their Connect schemas (None: no schema); ``topic`` (string), ``headers`` (an array of structs
    of ``key`` string and ``value`` binary), ``partition`` (int), ``offset`` (long) and
    ``timestamp`` (timestamp) of the record. A source record has no offset, and a source task may
    leave out the partition and the timestamp: those are None. ``keep`` is false for records a
    transform dropped (None: every record stays). ``error`` is set by a transform that cannot
    handle some records (a text that is no number, say): a string column saying why, null for the
    records it handled; the pipeline then skips those records or fails the batch, as the
    connector's ``errors.tolerance`` says (None: every record was handled).
    """

    key: Column
    value: Column
    topic: Column
    headers: Column
    partition: Column | None = None
    offset: Column | None = None
    timestamp: Column | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None
    keep: Column | None = None
    error: Column | None = None

    def replace(self, **changes: Any) -> RecordColumns:
        return dataclasses.replace(self, **changes)

    def with_error(self, problem: Column | None) -> RecordColumns:
        """These records, with ``problem`` (why a record fails; None: none does) added to what
        earlier code of the same transform found."""
        if problem is None:
            return self
        if self.error is None:
            return dataclasses.replace(self, error=problem)
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        return dataclasses.replace(self, error=F.coalesce(self.error, problem))


@dataclass(frozen=True)
class TransformContext:
    """Where the transform runs: ``alias`` is its name in the connector's ``transforms`` list, and
    ``is_sink`` whether the records were read from Kafka (True) or are on their way there."""

    alias: str
    is_sink: bool


class _Configurable:
    """Shared by transforms and predicates: their keys, and the config they were given."""

    ALIASES: ClassVar[tuple[str, ...]] = ()

    def config(self) -> ConfigDef:
        """The plugin's own keys (those under ``transforms.<alias>.`` or ``predicates.<alias>.``,
        given here without that prefix)."""
        return ConfigDef()

    def configure(self, props: Mapping[str, str]) -> None:
        """Called once, before any batch, with the plugin's own keys. The default parses them with
        ``config()`` (a ConfigException names a bad one) and keeps them in ``self.settings``."""
        self.settings = AbstractConfig(self.config(), props)

    def close(self) -> None:
        """Called when the task stops."""


class Transformation(_Configurable, abc.ABC):
    """A single message transform (Kafka's ``Transformation``), applied to a batch's columns."""

    @abc.abstractmethod
    def apply(self, records: RecordColumns, context: TransformContext) -> RecordColumns:
        """The records after this transform, as new column expressions over ``records``'. Raise
        ConnectException when the records cannot be transformed (a field that is not there, a
        value without the schema the transform needs): the batch then fails before it runs."""


class Predicate(_Configurable, abc.ABC):
    """A condition on records (Kafka's ``Predicate``) that decides where a transform applies."""

    @abc.abstractmethod
    def test(self, records: RecordColumns, context: TransformContext) -> Column:
        """A boolean column: true for the records the condition holds for."""


class DataFrameTransformation(_Configurable, abc.ABC):
    """A transform of the whole batch as a DataFrame, for what column expressions cannot say (a
    SQL statement over the batch, for one). It takes no predicate: it chooses its records itself."""

    @abc.abstractmethod
    def apply_frame(self, frame: DataFrame, context: TransformContext) -> DataFrame:
        """The batch after this transform. ``frame`` has the record columns (``RecordColumns``
        names them; a typed key or value carries its Connect schema in its metadata) and maybe
        others, which must be kept. A key or value of a new type gets the Connect schema its
        Spark type gives."""


@dataclass(frozen=True)
class ConnectRecord:
    """One record as a :class:`RecordTransformation` gets and gives it.

    ``key`` and ``value`` are Connect values of ``key_schema`` / ``value_schema`` (a struct as a
    dict, a decimal as ``Decimal``, a timestamp as an aware ``datetime``...) when those are set,
    else the text or bytes the converter gave (for JsonConverter without schemas, the JSON text).
    A source record has no ``kafka_offset``, and may have no partition or timestamp.
    """

    topic: str | None
    key: Any = None
    value: Any = None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    kafka_partition: int | None = None
    kafka_offset: int | None = None
    timestamp_ms: int | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def replace(self, **changes: Any) -> ConnectRecord:
        return dataclasses.replace(self, **changes)


class RecordTransformation(_Configurable, abc.ABC):
    """A transform of one record at a time, in Python (Kafka's ``Transformation.apply`` as it is).

    One instance per Spark task is configured and then given every record of that part of the
    batch; it takes a predicate like any transform. The records of a batch share one key schema
    and one value schema: a transform that changes them says how in :meth:`result_schemas`, and
    every record it returns must fit what it said (the record's own ``key_schema`` and
    ``value_schema`` are not read back). A record ``apply_record`` raises on fails as a record a
    converter cannot read does: errors.tolerance decides whether the batch fails or the record is
    skipped (and dead-lettered); a ``RetriableException`` is first tried again for as long as
    errors.retry.timeout allows, waiting up to errors.retry.delay.max.ms between tries.
    """

    def result_schemas(
        self, key_schema: Schema | None, value_schema: Schema | None
    ) -> tuple[Schema | None, Schema | None]:
        """The key's and value's schemas after this transform, given those before (None: text or
        bytes without a schema, which stay text or bytes). The default keeps both."""
        return key_schema, value_schema

    @abc.abstractmethod
    def apply_record(self, record: ConnectRecord) -> ConnectRecord | None:
        """The record after this transform, or None to drop it."""


# What ``transforms.<alias>.type`` may name.
AnyTransformation = Transformation | DataFrameTransformation | RecordTransformation
