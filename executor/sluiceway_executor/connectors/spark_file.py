"""SparkFileSink: appends each batch of records to files in a Spark format (Parquet, JSON, CSV, ORC).

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
    manifest,
    newest_written,
    publish,
    staging_dir,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
            "Spark file format of the output: parquet, json, csv or orc.",
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
            "Columns of the batch to partition the output directories by (e.g. topic); none by default.",
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
        missing = [name for name in self._partition_by if name not in batch.columns]
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
        if self._partition_by:
            writer = writer.partitionBy(*self._partition_by)
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
            manifest(context.task_id, key, context.ranges, context.offsets_change),
        )

    def written_offsets(
        self, spark: SparkSession, task_id: int, offsets_change: str = ""
    ) -> Mapping[TopicPartition, OffsetRange]:
        return newest_written(spark, self._path.rstrip("/"), task_id, offsets_change)

    def stop(self) -> None:
        """Each batch is written by its own Spark job; nothing stays open."""
