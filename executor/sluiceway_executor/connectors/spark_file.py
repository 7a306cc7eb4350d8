"""SparkFileSink: appends each batch of records to files in a Spark format (Parquet, JSON, CSV, ORC).

Untyped records (a ``value`` of text or bytes, as the String, ByteArray and schemaless JSON
converters give) are written as they come: columns ``topic``, ``partition``, ``offset``,
``timestamp``, ``key``, ``value`` and ``headers``.

Typed records (a ``value`` struct, from a converter that knows the records' Kafka Connect schema)
make a *typed lake*: each row holds the record's coordinates in ``kafka_topic``,
``kafka_partition``, ``kafka_offset``, ``kafka_timestamp``, ``kafka_key`` and ``kafka_headers``,
then each field of the value as a column of its own, with its Spark type (decimals, dates,
timestamps and nested structs stay what they are). Tombstones (a null value) have no fields and
are left out of a typed lake; their offsets are committed like any other. Each batch's schema must
merge with the lake's (lake_schema.py: optional fields may come and go, nothing may change type),
else the task fails before writing anything; the lake's schema is kept in every typed batch's
offsets file (lake_commits.py), so a task started later, on any executor, checks against it. Read a
Parquet or ORC lake with ``spark.read.option("mergeSchema", "true")`` to see every column. JSON
takes typed rows as they are; CSV gets nested values as JSON text and cannot change its columns.
A lake holds one kind of record: a typed batch into a lake of untyped ones, or the other way
round, fails the task.

Spark is imported only inside the task's write, so the control plane can load this plugin without it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    Composite,
    ConfigDef,
    ConfigException,
    ConfigType,
    ConnectException,
    DataFrameSinkTask,
    Importance,
    Lambda,
    ListOf,
    NonEmptyString,
    OffsetRange,
    PathKind,
    SinkConnector,
    Task,
    TopicPartition,
    UniqueItems,
    ValidString,
    Width,
)
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.connectors.lake_commits import (
    batch_dir,
    batch_key,
    held_ranges,
    manifest,
    newest_rows,
    publish,
    staging_dir,
)
from sluiceway_executor.transforms.filtering import kept_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from sluiceway_executor.connectors.lake_schema import LakeState

__all__ = ["SparkFileSinkConnector", "SparkFileSinkTask"]

PATH_CONFIG: Final = "path"
FORMAT_CONFIG: Final = "format"
PARTITION_BY_CONFIG: Final = "partition.by"
FORMATS: Final = ("parquet", "json", "csv", "orc")

_GROUP = "Files"


def _check_path(name: str, value: Any) -> None:
    # The staging directory is renamed by a job on a Spark worker, whose working directory is not
    # the one Spark's writer resolves a relative path against.
    text = str(value or "")
    if text and not (text.startswith("/") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text)):
        raise ConfigException(name, value, "must be an absolute path or a URI")


def config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            PATH_CONFIG,
            ConfigType.STRING,
            validator=Composite.of(NonEmptyString(), Lambda(_check_path, "an absolute path or a URI")),
            importance=Importance.HIGH,
            documentation=(
                "Directory (an absolute path or a URI Spark's workers can write to and rename in) the "
                "files are added to. Each batch is written to `_staging/task=N/ID`, then published whole by "
                "renaming it to `task=N/batch=ID` (read back as `task` and `batch` columns) with the "
                "Kafka offsets it holds in `_sluiceway_offsets.json`; a batch published but not "
                "committed is not written again. After the connector's offsets are altered or "
                "reset, the records from the new offsets are written again, beside the batches "
                "already there. The rename is atomic on local and network file systems and HDFS, "
                "not on object stores such as S3. When the worker sets "
                "connector.allowed.paths, an absolute local path or file: URI inside one of those "
                "directories."
            ),
            group=_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="Path",
            path_kind=PathKind.URI,
        )
        .define(
            FORMAT_CONFIG,
            ConfigType.STRING,
            "parquet",
            ValidString.in_(*FORMATS, case_insensitive=True),
            Importance.HIGH,
            "Spark file format of the output: parquet, json, csv or orc. Typed records (a value "
            "struct) are written one column per field; parquet and orc keep their types and let "
            "optional fields be added later; csv writes nested fields as JSON text and keeps its "
            "columns unchanged.",
            _GROUP,
            2,
            Width.SHORT,
            "Format",
        )
        .define(
            PARTITION_BY_CONFIG,
            ConfigType.LIST,
            [],
            Composite.of(
                ListOf(NonEmptyString()),
                UniqueItems("unique column names", "a column is listed more than once"),
            ),
            Importance.MEDIUM,
            "Columns of the written rows to partition the output directories by (e.g. topic); none by "
            "default. In a typed lake these are the value's fields and the kafka_* columns; topic, "
            "partition, offset, timestamp, key and headers name their kafka_* column there unless "
            "the value has a field of that name.",
            _GROUP,
            3,
            Width.LONG,
            "Partition by",
        )
    )


class SparkFileSinkConnector(BuiltInConnector, SinkConnector):
    """Its tasks all get the same config: each writes its own share of the partitions, and each
    batch goes to a directory of its own (see ``SparkFileSinkTask.write_batch``), since concurrent
    jobs appending to one directory lose files."""

    def config(self) -> ConfigDef:
        return config_def()

    def task_class(self) -> type[Task]:
        return SparkFileSinkTask

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        # The offsets live in the consumer group. The tasks learn of the change when they next
        # start (the control plane records it) and write the records again from the new offsets;
        # the batches already in the lake stay.
        return True


class SparkFileSinkTask(DataFrameSinkTask):
    def __init__(self) -> None:
        self._path = ""
        self._format = "parquet"
        self._partition_by: list[str] = []
        # What the lake's newest batches say (its schema, untyped batches); None: not read yet.
        self._lake: LakeState | None = None

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(config_def(), props)
        self._path = config.get_string(PATH_CONFIG) or ""
        self._format = (config.get_string(FORMAT_CONFIG) or "parquet").lower()
        self._partition_by = config.get_list(PARTITION_BY_CONFIG)

    def _for_csv(self, batch: DataFrame) -> DataFrame:
        """CSV holds only flat values: nested columns become JSON text and binary becomes UTF-8 text."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
        from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

        columns = []
        for column in batch.schema.fields:
            ref = F.col(f"`{column.name.replace('`', '``')}`")
            if isinstance(column.dataType, StructType | ArrayType | MapType):
                ref = F.to_json(ref)
            elif isinstance(column.dataType, BinaryType):
                ref = ref.cast("string")
            columns.append(ref.alias(column.name))
        return batch.select(*columns)

    def write_batch(self, batch: DataFrame, context: BatchContext) -> None:
        from sluiceway_executor.connectors.lake_schema import is_typed

        schema = None
        partition_by = self._partition_by
        batch_schema = batch.schema
        if is_typed(batch_schema):
            batch, schema, partition_by = self._typed_rows(batch, batch_schema, context.task_id)
        elif self._lake is not None and self._lake.schema is not None:
            raise ConnectException(
                f"the lake at {self._path} holds typed records (a value struct), and this batch's "
                f"value is {batch_schema['value'].dataType.simpleString()}: write untyped records to "
                "another path"
            )
        missing = [name for name in partition_by if name not in batch.columns]
        if missing:
            raise ConnectException(
                f"{PARTITION_BY_CONFIG} names column(s) {', '.join(missing)} that the batch does not have "
                f"(it has {', '.join(batch.columns)})"
            )
        if self._format == "csv":
            batch = self._for_csv(batch)
        writer = batch.write.mode("append").format(self._format)
        if self._format == "csv":
            writer = writer.option("header", "true")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        # Each batch is staged in a directory of its own (no two jobs ever share Spark's staging),
        # then published whole, with the offsets it holds (lake_commits.py).
        root = self._path.rstrip("/")
        key = batch_key()
        staging = staging_dir(root, context.task_id, key)
        writer.save(staging)
        publish(
            batch.sparkSession,
            staging,
            batch_dir(root, context.task_id, key),
            manifest(context.task_id, key, context.ranges, context.offsets_change, schema),
        )
        if schema is not None:
            self._lake = self._lake_with(schema)

    def _typed_rows(
        self, batch: DataFrame, batch_schema: StructType, task_id: int
    ) -> tuple[DataFrame, str, list[str]]:
        """A typed batch as the lake's rows (tombstones left out), the lake's schema once they are
        in it (as text, for the manifest), and the partition columns; raises, before anything is
        written, when the batch's schema does not merge with the lake's."""
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias
        from pyspark.sql.types import StructType

        from sluiceway_executor.connectors.lake_schema import (
            COORDINATES,
            merge_schemas,
            row_schema,
            schema_to_text,
        )

        value = batch_schema["value"].dataType
        assert isinstance(value, StructType)
        csv = self._format == "csv"
        try:
            rows = row_schema(batch_schema)
            lake = self._read_lake(batch.sparkSession, task_id) if self._lake is None else self._lake
            if lake.raw:
                raise ConnectException(
                    "the lake holds untyped records, and this batch's value is a struct: write typed "
                    "records to another path"
                )
            merged = merge_schemas(lake.schema, rows, csv=csv)
            if lake.schema is not None and merged != lake.schema:
                # A change: the other tasks of the lake may have made theirs since this one looked.
                fresh = self._read_lake(batch.sparkSession, task_id)
                merged = merge_schemas(merge_schemas(fresh.schema, lake.schema, csv=csv), rows, csv=csv)
        except ConnectException as exc:
            raise ConnectException(f"SparkFileSink at {self._path}: {exc}") from exc
        present = set(batch_schema.fieldNames())
        columns = [F.col(source).alias(name) for source, name in COORDINATES.items() if source in present]
        columns += [F.col("value").getField(name).alias(name) for name in value.fieldNames()]
        partition_by = [
            COORDINATES[name] if name in COORDINATES and name not in value.fieldNames() else name
            for name in self._partition_by
        ]
        # Tombstones are left out, tested on the converted value without Spark parsing it twice.
        frame = kept_rows(batch, F.col("value").isNotNull(), columns)
        return frame, schema_to_text(merged), partition_by

    def _read_lake(self, spark: SparkSession, task_id: int) -> LakeState:
        from sluiceway_executor.connectors.lake_schema import lake_state

        self._lake = lake_state(newest_rows(spark, self._path.rstrip("/"), task_id))
        return self._lake

    def _lake_with(self, schema: str) -> LakeState:
        from sluiceway_executor.connectors.lake_schema import LakeState, schema_from_text

        return LakeState(schema_from_text(schema), raw=False)

    def written_offsets(
        self, spark: SparkSession, task_id: int, offsets_change: str = ""
    ) -> Mapping[TopicPartition, OffsetRange]:
        from sluiceway_executor.connectors.lake_schema import lake_state

        rows = newest_rows(spark, self._path.rstrip("/"), task_id)
        self._lake = lake_state(rows)
        return held_ranges(rows, offsets_change)

    def stop(self) -> None:
        """Each batch is written by its own Spark job; nothing stays open."""
