"""The DataGen Python data source run for real through the session's Spark Connect server: the
server's Python workers import it from this project, read it in parallel partitions and a full
Spark job writes its output to Parquet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from sluiceway_executor.datasources import DataGenDataSource
from sluiceway_executor.datasources.datagen import SHORT_NAME
from sluiceway_server.embedded import EmbeddedSparkConnect

pytestmark = pytest.mark.integration

TASK = 7
COUNT = 50_000
PARTITIONS = 3
TS_MS = 1_700_000_000_000
SIZE = 120


@pytest.fixture(scope="module")
def spark(spark_connect: EmbeddedSparkConnect) -> Iterator[SparkSession]:
    session = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    session.dataSource.register(DataGenDataSource)
    yield session
    session.stop()


def datagen(spark: SparkSession, **options: int) -> DataFrame:
    reader = spark.read.format(SHORT_NAME)
    for key, value in options.items():
        reader = reader.option(key.replace("_", "."), value)
    return reader.load()


def test_reads_every_sequence_number_once_across_partitions(spark: SparkSession) -> None:
    df = datagen(
        spark,
        task=TASK,
        start_seq=0,
        count=COUNT,
        num_partitions=PARTITIONS,
        ts_ms=TS_MS,
        record_size_bytes=SIZE,
    )
    rows = df.collect()

    assert len(rows) == COUNT
    assert sorted(row.seq for row in rows) == list(range(COUNT))
    for row in rows:
        assert row.task == TASK
        assert row.key == f"{TASK}-{row.seq}"
        value = json.loads(row.value)
        assert (value["task"], value["seq"], value["ts"]) == (TASK, row.seq, TS_MS)
        assert isinstance(value["payload"], str)
        assert len(row.value) == SIZE


def test_range_starts_at_start_seq_and_spark_partitions_match(spark: SparkSession) -> None:
    df = datagen(spark, task=2, start_seq=1_000, count=10, num_partitions=4)
    by_partition = df.selectExpr("spark_partition_id() AS p", "seq").groupBy("p").count().collect()
    assert sorted(row["count"] for row in by_partition) == [2, 2, 3, 3]
    assert sorted(row.seq for row in df.select("seq").collect()) == list(range(1_000, 1_010))


def test_full_job_writes_parquet(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "datagen.parquet"
    datagen(spark, task=TASK, count=COUNT, num_partitions=PARTITIONS).write.parquet(str(out))

    back = spark.read.parquet(str(out))
    assert back.count() == COUNT
    assert back.selectExpr("min(seq)", "max(seq)", "count(DISTINCT seq)").first() == (0, COUNT - 1, COUNT)
    assert list(out.glob("*.parquet"))


def test_bad_option_fails_with_its_name(spark: SparkSession) -> None:
    with pytest.raises(AnalysisException, match=r"option 'count' is required"):
        spark.read.format(SHORT_NAME).option("task", 1).load().collect()
