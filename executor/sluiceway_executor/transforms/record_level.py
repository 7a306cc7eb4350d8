"""Record-level transforms (``RecordTransformation`` plugins) in a batch's Spark job.

The chain hands such a step the batch as it stands; :func:`apply_record_step` runs the plugin
inside Spark with ``mapInArrow``: each Spark task loads the plugin's class (from ``plugin.path``
when it is there), configures one instance, and calls it on every record of its Arrow batches that
the step's predicate picks and no earlier stage failed. The plugin's answer comes back as the
record's new columns plus two of ours: whether the record stays (``None`` drops it) and, when the
plugin raised, the exception's class and message. The chain then treats that problem as any
transform's (``chain._errors_handled``): marked for the dead-letter queue under
``errors.tolerance=all``, else failing the batch.

A ``RetriableException`` is tried again inside the Spark task under errors.retry.timeout and
errors.retry.delay.max.ms, on the one retry policy (``sluiceway.common.retry``): waits from 0.3 s,
doubling, never above the maximum, no try starting after the timeout.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from sluiceway.common.retry import RetryPolicy
from sluiceway.connect import ConnectException, RetriableException
from sluiceway.connect.data.schema import Schema
from sluiceway.connect.framework_config import ERRORS_RETRY_MAX_DELAY_CONFIG, ERRORS_RETRY_TIMEOUT_CONFIG
from sluiceway.connect.plugin_imports import class_name_of
from sluiceway.connect.transform_config import ChainStep
from sluiceway.connect.transforms import ConnectRecord, RecordTransformation
from sluiceway_executor.record_errors import ERROR_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

__all__ = [
    "KEEP_COLUMN",
    "PROBLEM_COLUMN",
    "RecordRetry",
    "RecordTransformRunner",
    "record_step_frame",
]

# Columns of ours the step adds for its own use and the chain removes again.
APPLIES_COLUMN: Final = "__sluiceway_applies"
KEEP_COLUMN: Final = "__sluiceway_keep"
PROBLEM_COLUMN: Final = "__sluiceway_record_problem"
# The parts of a record a record-level transform may change.
_CHANGEABLE: Final = ("topic", "key", "value", "headers", "partition", "timestamp")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _retriable(error: BaseException) -> bool:
    return isinstance(error, RetriableException)


@dataclass(frozen=True)
class RecordRetry:
    """A connector's errors.retry.timeout (ms; 0: never retry, -1: no limit) and
    errors.retry.delay.max.ms, as a retry policy for record-level transforms."""

    timeout_ms: int = 0
    delay_max_ms: int = 60_000

    @classmethod
    def of(cls, props: Mapping[str, str]) -> RecordRetry:
        def number(key: str, default: int) -> int:
            raw = (props.get(key) or "").strip()
            try:
                return int(raw) if raw else default
            except ValueError:
                raise ConnectException(f"{key} must be a whole number of milliseconds, got {raw!r}") from None

        return cls(number(ERRORS_RETRY_TIMEOUT_CONFIG, 0), number(ERRORS_RETRY_MAX_DELAY_CONFIG, 60_000))

    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            initial=0.3,
            maximum=max(self.delay_max_ms, 0) / 1000,
            multiplier=2.0,
            deadline=None if self.timeout_ms < 0 else self.timeout_ms / 1000,
            transient=_retriable,
        )


def _class_path(cls: type) -> str:
    """A class's dotted name; the SDK's exceptions by the name ``sluiceway.connect`` exports them
    under, as the dead-letter headers of converter failures name them."""
    import sluiceway.connect

    if getattr(sluiceway.connect, cls.__name__, None) is cls:
        return f"sluiceway.connect.{cls.__name__}"
    return class_name_of(cls)


@dataclass(frozen=True)
class RecordTransformRunner:
    """The ``mapInArrow`` function of one record-level step."""

    class_name: str
    props: dict[str, str]
    plugin_path: tuple[str, ...]
    key_schema: Schema | None
    value_schema: Schema | None
    key_out: Schema | None
    value_out: Schema | None
    # The Arrow types of the columns the step rebuilds (the Spark types it declared).
    out_types: dict[str, pa.DataType]
    out_names: tuple[str, ...]
    retry: RecordRetry
    gated: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        transform = self.configured()
        try:
            for batch in batches:
                yield self.transformed(transform, batch)
        finally:
            transform.close()

    def configured(self) -> RecordTransformation:
        from sluiceway_executor.datasources.source_task import load_chosen_class

        cls = load_chosen_class(self.class_name, self.plugin_path)
        if not issubclass(cls, RecordTransformation):
            raise ConnectException(f"{self.class_name} is not a RecordTransformation")
        transform = cls()
        transform.configure(self.props)
        return transform

    def transformed(self, transform: RecordTransformation, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` with every record the step applies to transformed (see the module doc)."""
        import pyarrow as pa

        rows = batch.num_rows
        names = batch.schema.names

        def values(name: str) -> list[Any]:
            if name not in names:
                return [None] * rows
            column = batch.column(names.index(name))
            if name == "timestamp":  # epoch microseconds, whatever zone the column is in
                column = column.cast(pa.int64())
            listed: list[Any] = column.to_pylist(maps_as_pydicts="strict")
            return listed

        parts = {name: values(name) for name in _CHANGEABLE}
        offsets = values("offset")
        applies = values(APPLIES_COLUMN) if self.gated else [True] * rows
        failed = values(ERROR_COLUMN)
        keep: list[bool] = [True] * rows
        problems: list[dict[str, str] | None] = [None] * rows
        for i in range(rows):
            if failed[i] is not None or not applies[i]:
                continue
            try:
                result = self._apply(transform, self._record(parts, offsets[i], i))
                if result is None:
                    keep[i] = False
                    # Dropped: nothing of it needs to fit the columns' new types.
                    parts["key"][i] = parts["value"][i] = None
                    continue
                changed = self._columns(result)
            except Exception as e:  # the record's problem, not the batch's
                problems[i] = {"exception": _class_path(type(e)), "message": str(e) or type(e).__name__}
                continue
            for name, value in changed.items():
                parts[name][i] = value
        arrays = []
        for name in self.out_names:
            if name == KEEP_COLUMN:
                arrays.append(pa.array(keep, type=pa.bool_()))
            elif name == PROBLEM_COLUMN:
                arrays.append(pa.array(problems, type=self.out_types[name]))
            elif name == "timestamp" and name in names:
                stamps = pa.array(parts[name], type=pa.int64())
                arrays.append(stamps.cast(batch.column(names.index(name)).type))
            elif name in self.out_types:
                arrays.append(pa.array(parts[name], type=self.out_types[name]))
            elif name in _CHANGEABLE:
                arrays.append(pa.array(parts[name], type=batch.column(names.index(name)).type))
            else:
                arrays.append(batch.column(names.index(name)))
        return pa.RecordBatch.from_arrays(arrays, names=list(self.out_names))

    def _apply(self, transform: RecordTransformation, record: ConnectRecord) -> ConnectRecord | None:
        retry = self.retry.policy().start()
        while True:
            try:
                return transform.apply_record(record)
            except Exception as e:
                if not retry.again(e):
                    raise

    def _record(self, parts: dict[str, list[Any]], offset: int | None, i: int) -> ConnectRecord:
        from sluiceway.connect.data.spark import from_spark_value

        micros = parts["timestamp"][i]
        key, value = parts["key"][i], parts["value"][i]
        return ConnectRecord(
            topic=parts["topic"][i],
            key=key if self.key_schema is None else from_spark_value(self.key_schema, key, "key"),
            value=value if self.value_schema is None else from_spark_value(self.value_schema, value, "value"),
            headers=tuple((h["key"], h["value"]) for h in parts["headers"][i] or ()),
            kafka_partition=parts["partition"][i],
            kafka_offset=offset,
            timestamp_ms=None if micros is None else micros // 1000,
            key_schema=self.key_schema,
            value_schema=self.value_schema,
        )

    def _columns(self, record: ConnectRecord) -> dict[str, Any]:
        """The record's parts as the output columns take them; a DataException when its key or
        value does not fit the schema the step declared."""
        from pyspark.sql import Row

        from sluiceway.connect.data.spark import to_spark_value

        def spark_value(schema: Schema | None, value: Any, part: str) -> Any:
            if schema is None or value is None:  # text, bytes, or a tombstone's null
                return value
            # Rows become dicts, as Arrow gave the records the plugin did not change.
            out = to_spark_value(schema, value, part)
            return out.asDict(recursive=True) if isinstance(out, Row) else out

        headers = [{"key": k, "value": v.encode() if isinstance(v, str) else v} for k, v in record.headers]
        stamp = record.timestamp_ms
        return {
            "topic": record.topic,
            "key": spark_value(self.key_out, record.key, "key"),
            "value": spark_value(self.value_out, record.value, "value"),
            "headers": headers,
            "partition": record.kafka_partition,
            "timestamp": None if stamp is None else stamp * 1000,
        }


def record_step_frame(
    frame: DataFrame,
    step: ChainStep,
    schemas: tuple[Schema | None, Schema | None],
    applies: Column | None,
    plugin_path: Sequence[str],
    retry: RecordRetry,
) -> tuple[DataFrame, tuple[Schema | None, Schema | None]]:
    """``frame`` after the step's record-level transform (run where ``applies`` holds, or on every
    record), with ``KEEP_COLUMN`` and ``PROBLEM_COLUMN`` added; and the key's and value's schemas
    after it. ``schemas`` are the key's and value's before."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import BooleanType, StringType, StructField, StructType

    from sluiceway.connect.data.spark import to_spark_field

    transform = step.transform
    assert isinstance(transform, RecordTransformation)
    key_out, value_out = transform.result_schemas(*schemas)
    pairs = ((schemas[0], key_out), (schemas[1], value_out))
    if applies is not None:
        frame = frame.withColumn(APPLIES_COLUMN, applies)
    problem = StructType(
        [StructField("exception", StringType(), False), StructField("message", StringType(), True)]
    )
    fields = []
    out_types: dict[str, pa.DataType] = {PROBLEM_COLUMN: to_arrow_type(problem)}
    changed = {name: new for name, old, new in (("key", *pairs[0]), ("value", *pairs[1])) if new != old}
    for spark_field in frame.schema.fields:
        new_schema = changed.get(spark_field.name)
        if new_schema is not None:
            # Nullable whatever the schema says: tombstones, dropped and failed records have none.
            typed = to_spark_field(spark_field.name, new_schema)
            rebuilt = StructField(typed.name, typed.dataType, True, typed.metadata)
            out_types[rebuilt.name] = to_arrow_type(rebuilt.dataType, timezone="UTC")
            fields.append(rebuilt)
        elif spark_field.name != APPLIES_COLUMN:
            fields.append(spark_field)
    fields += [StructField(KEEP_COLUMN, BooleanType(), False), StructField(PROBLEM_COLUMN, problem, True)]
    out_schema = StructType(fields)
    runner = RecordTransformRunner(
        class_name=class_name_of(type(transform)),
        props=dict(step.props),
        plugin_path=tuple(plugin_path),
        key_schema=schemas[0],
        value_schema=schemas[1],
        key_out=key_out,
        value_out=value_out,
        out_types=out_types,
        out_names=tuple(out_schema.fieldNames()),
        retry=retry,
        gated=applies is not None,
    )
    return frame.mapInArrow(runner, out_schema), (key_out, value_out)
