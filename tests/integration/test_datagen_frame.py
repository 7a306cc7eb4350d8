"""DataGen's records built by Spark SQL (`datagen_frame`) on the real Spark Connect server: the same
keys and values as the Python form (`datagen_record`) for every seq and size, including where seq
gains a digit and where the payload wraps the alphabet, split over the Spark partitions asked for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway_executor.datagen_records import datagen_frame, datagen_record
from sluiceway_server.embedded import EmbeddedSparkConnect

pytestmark = pytest.mark.integration

TASK = 7
TS_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def spark(spark_connect: EmbeddedSparkConnect) -> Iterator[SparkSession]:
    session = SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    yield session
    session.stop()


@pytest.mark.parametrize("size", [1, 40, 57, 100, 200, 1000])
def test_spark_sql_records_equal_the_python_ones(spark: SparkSession, size: int) -> None:
    # Seqs around 9→10, 99→100 and 999→1000 change the head's length and so the payload's.
    rows = datagen_frame(spark, TASK, 0, 1_205, size, TS_MS, partitions=3).collect()
    assert [row.seq for row in sorted(rows, key=lambda r: r.seq)] == list(range(1_205))
    for row in rows:
        key, value = datagen_record(TASK, row.seq, TS_MS, size)
        assert (row.key, row.value, row.task) == (key, value, TASK), row.seq


def test_a_range_far_from_zero_keeps_the_format(spark: SparkSession) -> None:
    start = 9_999_999_990
    rows = datagen_frame(spark, 3, start, 20, 120, TS_MS).collect()
    for row in rows:
        assert (row.key, row.value) == datagen_record(3, row.seq, TS_MS, 120)
        value = json.loads(row.value)
        assert (value["task"], value["seq"], value["ts"]) == (3, row.seq, TS_MS)
        assert len(row.value) == 120


def test_the_rows_come_in_the_slices_asked_for(spark: SparkSession) -> None:
    df = datagen_frame(spark, 2, 1_000, 10, 100, TS_MS, partitions=4)
    rows = df.selectExpr("spark_partition_id() AS p", "seq").collect()
    assert sorted(row.seq for row in rows) == list(range(1_000, 1_010))
    # Four slices of consecutive seqs, read by at most four Spark tasks (local[2] runs two).
    by_partition: dict[int, list[int]] = {}
    for row in rows:
        by_partition.setdefault(row.p, []).append(row.seq)
    assert 1 <= len(by_partition) <= 4
    slices = [(1_000, 1_001), (1_002, 1_004), (1_005, 1_006), (1_007, 1_009)]
    for seqs in by_partition.values():
        # Each Spark task reads whole slices.
        assert all(all(s in seqs for s in range(lo, hi + 1)) for lo, hi in slices if lo in seqs)


def test_batches_of_one_task_reuse_the_compiled_code(
    spark: SparkSession, spark_connect: EmbeddedSparkConnect
) -> None:
    log = spark_connect.managed.log_path
    for seq in range(3):  # the first batches compile
        datagen_frame(spark, 5, seq * 1_000, 900 + seq, 100, TS_MS + seq, 2).selectExpr(
            "count(value)"
        ).collect()
    before = log.read_text(errors="replace").count("Code generated")
    for seq in range(3, 8):
        datagen_frame(spark, 5, seq * 1_000, 900 + seq, 100, TS_MS + seq, 2).selectExpr(
            "count(value)"
        ).collect()
    assert log.read_text(errors="replace").count("Code generated") == before


def test_a_full_job_writes_every_record_once(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "datagen.parquet"
    datagen_frame(spark, TASK, 0, 50_000, 120, TS_MS, partitions=3).write.parquet(str(out))
    back = spark.read.parquet(str(out))
    assert back.selectExpr("count(*)", "min(seq)", "max(seq)", "count(DISTINCT seq)").first() == (
        50_000,
        0,
        49_999,
        50_000,
    )
