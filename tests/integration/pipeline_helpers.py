"""Helpers for tests that run whole pipelines through real executors."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias


def parquet_counts(spark: SparkSession, path: Path) -> tuple[int, int]:
    """(rows, distinct (task, seq)) of the generated records in a sink's Parquet files."""
    if not any(path.rglob("_SUCCESS")):  # no committed job yet (in-flight files sit in _temporary)
        return 0, 0
    parsed = spark.read.parquet(str(path)).select(
        F.from_json(F.col("value").cast("string"), "task INT, seq LONG").alias("v")
    )
    row = parsed.agg(
        F.count(F.lit(1)).alias("rows"), F.count_distinct(F.col("v.task"), F.col("v.seq")).alias("distinct")
    ).first()
    assert row is not None
    return int(row["rows"]), int(row["distinct"])
