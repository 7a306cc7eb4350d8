"""A connector's transform chain (``sluiceway.connect.transform_config`` reads it from the config)
applied to a batch's DataFrame.

Each transform becomes one projection of the batch (and a filter when it drops records), planned
into the batch's one job; a DataFrameTransformation (Sql) gets the batch itself, and a
RecordTransformation plugin runs per record inside that job (``record_level.py``). A transform with a
predicate applies to the records the predicate picks (all others pass unchanged), which a Spark
column can hold only when the transform leaves the key's and value's schemas as they were: one
that changes them under a predicate is refused with the batch, before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from sluiceway.connect import ConnectException
from sluiceway.connect.data.schema import Schema
from sluiceway.connect.plugin_imports import class_name_of
from sluiceway.connect.transform_config import ChainStep, configured_chain
from sluiceway.connect.transform_plugins import TransformPlugins
from sluiceway.connect.transforms import (
    DataFrameTransformation,
    RecordColumns,
    RecordTransformation,
    TransformContext,
)
from sluiceway_executor.record_errors import ERROR_COLUMN, Stage, failing, has_error_column, marked
from sluiceway_executor.transforms.filtering import kept_where
from sluiceway_executor.transforms.record_level import (
    KEEP_COLUMN,
    PROBLEM_COLUMN,
    RecordRetry,
    record_step_frame,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["TransformChain", "connector_chain", "record_columns"]


class TransformChain:
    """The transforms of one connector, configured and in order."""

    def __init__(
        self, steps: Sequence[ChainStep], plugin_path: Sequence[str] = (), retry: RecordRetry | None = None
    ) -> None:
        self.steps = tuple(steps)
        # Where record-level plugins are loaded from inside Spark, and how they are retried.
        self._plugin_path = tuple(plugin_path)
        self._retry = retry or RecordRetry()

    @classmethod
    def from_config(cls, props: Mapping[str, str], plugins: TransformPlugins) -> TransformChain:
        """The chain ``props`` (a connector config) sets up; a ConfigException names the first key
        at fault."""
        return cls(configured_chain(props, plugins), plugins.plugin_path, RecordRetry.of(props))

    def __bool__(self) -> bool:
        return bool(self.steps)

    def apply(self, frame: DataFrame, is_sink: bool) -> DataFrame:
        """``frame`` (a batch's record columns) after every step, with the key's and value's
        Connect schemas in their metadata."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        records = record_columns(frame)
        for step in self.steps:
            context = TransformContext(step.alias, is_sink)
            if isinstance(step.transform, DataFrameTransformation):
                frame = step.transform.apply_frame(_with_schemas(frame, records), context)
                records = record_columns(frame)
                continue
            holds = None
            if step.predicate is not None:
                holds = step.predicate.test(records, TransformContext(step.predicate_alias, is_sink))
                holds = F.coalesce(~holds if step.negate else holds, F.lit(False))
            if isinstance(step.transform, RecordTransformation):
                frame, after = self._record_level(frame, records, step, holds)
            else:
                after = step.transform.apply(records, context)
                if holds is not None:
                    after = _gated(records, after, holds, step)
            frame, after = _errors_handled(frame, after, step)
            frame, records = _projected(frame, after)
        return _with_schemas(frame, records)

    def _record_level(
        self, frame: DataFrame, records: RecordColumns, step: ChainStep, holds: Column | None
    ) -> tuple[DataFrame, RecordColumns]:
        """The frame after a record-level step, and its records: the plugin's answer in the
        record columns, the records it dropped not kept, its problems as the step's error."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        before = (records.key_schema, records.value_schema)
        frame, (key_schema, value_schema) = record_step_frame(
            frame, step, before, holds, self._plugin_path, self._retry
        )
        if holds is not None:
            _refuse_schema_change(step, before, (key_schema, value_schema))
        problem = F.col(PROBLEM_COLUMN)
        keep = F.col(KEEP_COLUMN)
        if has_error_column(frame):
            frame = marked(
                frame,
                F.when(problem.isNotNull(), F.coalesce(problem.message, F.lit(""))),
                Stage.TRANSFORMATION,
                class_name_of(type(step.transform)),
                exception=problem.exception,
            )
            # A record an earlier stage failed stays to be skipped or dead-lettered after the chain.
            keep = keep | F.col(ERROR_COLUMN).isNotNull()
        else:
            message = F.when(problem.isNotNull(), F.concat_ws(": ", problem.exception, problem.message))
            frame = frame.withColumn("value", failing(F.col("value"), message))
        frame = kept_where(frame, keep).drop(KEEP_COLUMN, PROBLEM_COLUMN)
        return frame, record_columns(frame).replace(key_schema=key_schema, value_schema=value_schema)

    def failing_class(self) -> str:
        """The class a record that fails inside the chain's job with no column to say so is
        reported under: the one DataFrameTransformation's (a Sql transform, whose expressions may
        raise), else the chain's own."""
        frame_steps = {
            type(s.transform) for s in self.steps if isinstance(s.transform, DataFrameTransformation)
        }
        return class_name_of(next(iter(frame_steps)) if len(frame_steps) == 1 else type(self))

    def close(self) -> None:
        for step in self.steps:
            step.transform.close()
            if step.predicate is not None:
                step.predicate.close()


def _with_schemas(frame: DataFrame, records: RecordColumns) -> DataFrame:
    """``frame`` with the key's and value's Connect schemas in their columns' metadata."""
    from sluiceway_executor.converters.connect_spark_json import with_connect_schemas

    schemas = {name: s for name, s in (("key", records.key_schema), ("value", records.value_schema)) if s}
    return with_connect_schemas(frame, schemas) if schemas else frame


def connector_chain(connector_config: Mapping[str, str], plugin_path: Sequence[str]) -> TransformChain:
    """The chain a task runs: built-in transforms and predicates, and plugins of ``plugin_path``.
    A config the control plane let through but this executor cannot set up fails the task."""
    from sluiceway.connect import ConfigException
    from sluiceway_executor.transforms import built_in_plugins

    try:
        return TransformChain.from_config(connector_config, built_in_plugins(plugin_path))
    except ConfigException as e:
        raise ConnectException(f"the connector's transforms cannot be set up: {e}") from e


def record_columns(frame: DataFrame) -> RecordColumns:
    """The frame's record columns, with the Connect schemas of a typed key and value (none for
    text, bytes, or a column without one)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
    from pyspark.sql.types import BinaryType, NullType, StringType

    from sluiceway.connect.data.spark import METADATA_KEY, from_spark_field
    from sluiceway_executor.transforms.record_transforms import HEADERS_TYPE

    fields = {f.name: f for f in frame.schema.fields}

    def schema_of(name: str) -> Schema | None:
        found = fields.get(name)
        if found is None:
            return None
        plain = isinstance(found.dataType, (StringType, BinaryType, NullType))
        if plain and not (found.metadata or {}).get(METADATA_KEY):
            return None
        return from_spark_field(found)

    def column(name: str) -> Column | None:
        return F.col(name) if name in fields else None

    return RecordColumns(
        key=F.col("key") if "key" in fields else F.lit(None).cast("binary"),
        value=F.col("value"),
        topic=F.col("topic") if "topic" in fields else F.lit(None).cast("string"),
        headers=F.col("headers") if "headers" in fields else F.lit(None).cast(HEADERS_TYPE),
        partition=column("partition"),
        offset=column("offset"),
        timestamp=column("timestamp"),
        key_schema=schema_of("key"),
        value_schema=schema_of("value"),
    )


def _errors_handled(
    frame: DataFrame, after: RecordColumns, step: ChainStep
) -> tuple[DataFrame, RecordColumns]:
    """The frame and records once the records the step could not handle (``after.error``) are
    dealt with: marked in the frame's error column, their key and value nulled, when the frame has
    one (errors.tolerance=all); else failing the job on the first of them."""
    if after.error is None:
        return frame, after
    if has_error_column(frame):
        frame = marked(frame, after.error, Stage.TRANSFORMATION, class_name_of(type(step.transform)))
        return frame, after.replace(error=None)
    value = failing(after.value, after.error)
    return frame, after.replace(value=value, error=None)


def _refuse_schema_change(
    step: ChainStep, before: tuple[Schema | None, Schema | None], after: tuple[Schema | None, Schema | None]
) -> None:
    """Raises when a step under a predicate changes the key's or value's schema."""
    for part, old, new in (("key", before[0], after[0]), ("value", before[1], after[1])):
        if old != new:
            raise ConnectException(
                f"transform '{step.alias}' applies only where predicate '{step.predicate_alias}' holds, "
                f"and it changes the record {part}'s schema ({old!r} to {new!r}): the records of a batch "
                "share one schema in Spark, so such a transform cannot take a predicate. Apply it to "
                "every record, or route the records it should change to a connector of their own"
            )


def _gated(before: RecordColumns, after: RecordColumns, holds: Column, step: ChainStep) -> RecordColumns:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    _refuse_schema_change(
        step, (before.key_schema, before.value_schema), (after.key_schema, after.value_schema)
    )

    def pick(new: Column | None, old: Column | None) -> Column | None:
        if new is None or old is None or new is old:
            return new
        return F.when(holds, new).otherwise(old)

    def pick_both(new: Column, old: Column) -> Column:
        return new if new is old else F.when(holds, new).otherwise(old)

    keep = after.keep
    error = None if after.error is None else F.when(holds, after.error)
    if keep is not None:
        keep = F.when(holds, keep).otherwise(before.keep if before.keep is not None else F.lit(True))
    return RecordColumns(
        key=pick_both(after.key, before.key),
        value=pick_both(after.value, before.value),
        topic=pick_both(after.topic, before.topic),
        headers=pick_both(after.headers, before.headers),
        partition=pick(after.partition, before.partition),
        offset=pick(after.offset, before.offset),
        timestamp=pick(after.timestamp, before.timestamp),
        key_schema=after.key_schema,
        value_schema=after.value_schema,
        keep=keep,
        error=error,
    )


def _projected(frame: DataFrame, records: RecordColumns) -> tuple[DataFrame, RecordColumns]:
    """The frame with the records' columns in place (and the dropped records gone), and the record
    columns as plain references to it: the next transform builds on names, not on expressions.
    Columns that are not record columns pass through; partition, offset and timestamp stay out
    when the records have none."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    by_name: dict[str, Column | None] = {
        "topic": records.topic,
        "partition": records.partition,
        "offset": records.offset,
        "timestamp": records.timestamp,
        "key": records.key,
        "value": records.value,
        "headers": records.headers,
    }
    others = [F.col(name) for name in frame.columns if name not in by_name]
    chosen = {name: column for name, column in by_name.items() if column is not None}
    out = frame.select(*others, *[column.alias(name) for name, column in chosen.items()])
    if records.keep is not None:
        kept = F.coalesce(records.keep, F.lit(True))
        # A record an earlier stage failed stays to be skipped or dead-lettered after the chain.
        out = kept_where(out, kept | F.col(ERROR_COLUMN).isNotNull() if has_error_column(frame) else kept)
    return out, RecordColumns(
        key=F.col("key"),
        value=F.col("value"),
        topic=F.col("topic"),
        headers=F.col("headers"),
        partition=F.col("partition") if "partition" in chosen else None,
        offset=F.col("offset") if "offset" in chosen else None,
        timestamp=F.col("timestamp") if "timestamp" in chosen else None,
        key_schema=records.key_schema,
        value_schema=records.value_schema,
    )
