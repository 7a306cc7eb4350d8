"""The data-plane half of the built-in `DataGenSource` connector: a Spark Python data source
(short name `sluiceway-datagen`) that generates a deterministic range of sequence numbers for one
task, inside Spark, as Arrow record batches.

    spark.dataSource.register(DataGenDataSource)
    df = (spark.read.format("sluiceway-datagen")
          .option("task", 0).option("start.seq", 0).option("count", 50_000)
          .option("num.partitions", 3).load())

Options (all integers): `task` (default 0), `start.seq` (default 0), `count` (required),
`record.size.bytes` (default 100), `num.partitions` (default 1), `ts.ms` (default: now, taken once
per read so every row of a read shares it; set it for reproducible output).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

# The record format is defined once, shared with the connector; this module only lays it out in Arrow.
from sluiceway_executor.datagen_records import DATA_SOURCE_NAME, datagen_record

SHORT_NAME = DATA_SOURCE_NAME

SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", StringType()),
        StructField("task", IntegerType()),
        StructField("seq", LongType()),
    ]
)
# Must equal what Spark derives from SCHEMA (it rejects batches whose Arrow schema differs).
ARROW_SCHEMA = pa.schema(
    [("key", pa.string()), ("value", pa.string()), ("task", pa.int32()), ("seq", pa.int64())]
)

# Rows per Arrow batch: large enough to amortise the per-batch cost, small enough to bound memory.
MAX_BATCH_ROWS = 10_000


def _int_option(options: Mapping[str, str], key: str, default: int | None, minimum: int) -> int:
    raw = options.get(key)
    if raw is None:
        if default is None:
            raise ValueError(f"{SHORT_NAME}: option '{key}' is required")
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{SHORT_NAME}: option '{key}' must be >= {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class DataGenOptions:
    task: int
    start_seq: int
    count: int
    record_size_bytes: int
    num_partitions: int
    ts_ms: int | None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> DataGenOptions:
        # Spark hands the options over as a case-insensitive dict of strings.
        ts_ms = options.get("ts.ms")
        return cls(
            task=_int_option(options, "task", 0, 0),
            start_seq=_int_option(options, "start.seq", 0, 0),
            count=_int_option(options, "count", None, 0),
            record_size_bytes=_int_option(options, "record.size.bytes", 100, 1),
            num_partitions=_int_option(options, "num.partitions", 1, 1),
            ts_ms=None if ts_ms is None else _int_option(options, "ts.ms", None, 0),
        )


@dataclass
class SeqRange(InputPartition):
    """The half-open range [start, end) of sequence numbers one Spark task generates."""

    start: int
    end: int


def split_range(start: int, count: int, parts: int) -> list[SeqRange]:
    """Contiguous, near-equal ranges covering [start, start+count); never an empty range except
    the single one standing for an empty read."""
    parts = max(1, min(parts, count))
    base, extra = divmod(count, parts)
    ranges: list[SeqRange] = []
    lo = start
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        ranges.append(SeqRange(lo, hi))
        lo = hi
    return ranges


class DataGenReader(DataSourceReader):
    def __init__(self, options: DataGenOptions, ts_ms: int) -> None:
        self.options = options
        # Fixed on the driver, so every partition of one read carries the same timestamp.
        self.ts_ms = ts_ms

    def partitions(self) -> Sequence[InputPartition]:
        return split_range(self.options.start_seq, self.options.count, self.options.num_partitions)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SeqRange), partition
        task, size, ts_ms = self.options.task, self.options.record_size_bytes, self.ts_ms
        for lo in range(partition.start, partition.end, MAX_BATCH_ROWS):
            hi = min(lo + MAX_BATCH_ROWS, partition.end)
            records = [datagen_record(task, seq, ts_ms, size) for seq in range(lo, hi)]
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([key for key, _ in records], type=pa.string()),
                    pa.array([value for _, value in records], type=pa.string()),
                    pa.array(np.full(hi - lo, task, dtype=np.int32)),
                    pa.array(np.arange(lo, hi, dtype=np.int64)),
                ],
                schema=ARROW_SCHEMA,
            )


class DataGenDataSource(DataSource):
    """Batch source of generated records for one DataGen task: rows for seq in
    [start.seq, start.seq + count), split across `num.partitions` Spark partitions."""

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        # Parse eagerly so bad options fail at load() with a clear message, not inside a Spark task.
        self.parsed = DataGenOptions.parse(options)

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        ts_ms = self.parsed.ts_ms if self.parsed.ts_ms is not None else time.time_ns() // 1_000_000
        return DataGenReader(self.parsed, ts_ms)
