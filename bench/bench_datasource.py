"""The `sluiceway-kafka` Spark data source against raw confluent-kafka clients, on the same records,
every figure also given as a ratio against a baseline measured in the same run:

- write: the data source's writer producing N DataGen-format records from a DataFrame pinned in
         Spark (one Spark job), against one raw confluent-kafka producer loop producing the same
         records from a list already in memory, with the same producer settings;
- read:  the data source's reader reading a topic of those N records (one Spark job that counts
         the rows and sums the value lengths), against one raw confluent-kafka consumer reading
         the same topic to its end.

Only the broker (Tansu, in memory) and a Spark Connect server (`local[2]`) are started: no control
plane, no executor. Both Spark paths and the raw producer are warmed up before the first run.
Record counts are checked on every run: the end offsets of every written topic, the rows and value
bytes the Spark read returned, the messages the raw consumer received.

    .venv/bin/python bench/bench_datasource.py --records 200000 --runs 3 --report FILE
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

from bench_pipelines import (
    RECORD_SIZE,
    Series,
    consume_all,
    create_topic,
    produce_all,
    ratio,
    topic_end_total,
)
from bench_stack import running_services
from sluiceway_executor.datagen_records import datagen_record
from sluiceway_executor.datasources.registry import register
from sluiceway_executor.kafka_ranges import exact_end_offsets

FORMAT: Final = "sluiceway-kafka"
SECTION: Final = "## sluiceway-kafka data source against raw confluent-kafka"

# Given to both producers: the raw one directly, the Spark writer as its `producer.config` option
# (which also forces enable.idempotence=true and acks=all, set here on the raw producer too).
PRODUCER_SETTINGS: Final[dict[str, str]] = {
    "partitioner": "murmur2_random",
    "linger.ms": "10",
    "batch.num.messages": "10000",
    "batch.size": str(1024 * 1024),
    "compression.type": "lz4",
    "queue.buffering.max.messages": "500000",
}

Record = tuple[bytes, bytes]


def make_records(count: int, partitions: int, size: int) -> list[Record]:
    """DataGen records (key, JSON value) as bytes; `task` cycles over the partition count."""
    ts = int(time.time() * 1000)
    records = []
    for seq in range(count):
        key, value = datagen_record(seq % partitions, seq, ts, size)
        records.append((key.encode(), value.encode()))
    return records


def raw_producer(bootstrap: str) -> Producer:
    return Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", **PRODUCER_SETTINGS}
    )


def pinned_frame(spark: SparkSession, records: Sequence[Record], spark_partitions: int) -> DataFrame:
    """The records as a DataFrame (key, value: binary) computed once and kept in Spark, so a write
    of it times the writer rather than the transfer from this process."""
    table = pa.table(
        {
            "key": pa.array([key for key, _ in records], pa.binary()),
            "value": pa.array([value for _, value in records], pa.binary()),
        }
    )
    return spark.createDataFrame(table).repartition(spark_partitions).localCheckpoint(eager=True)


def spark_write(frame: DataFrame, bootstrap: str, topic: str) -> float:
    started = time.perf_counter()
    (
        frame.write.format(FORMAT)
        .mode("append")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("producer.config", json.dumps(PRODUCER_SETTINGS))
        .save()
    )
    return time.perf_counter() - started


def spark_read(spark: SparkSession, bootstrap: str, topic: str, partitions: int) -> tuple[float, int, int]:
    """Reads the whole topic in one job; returns seconds, rows and the sum of the value lengths."""
    ends = exact_end_offsets(bootstrap, [TopicPartition(topic, p) for p in range(partitions)], 60)
    ranges = [{"topic": t, "partition": p, "start": 0, "end": end} for (t, p), end in ends.items()]
    started = time.perf_counter()
    row = (
        spark.read.format(FORMAT)
        .option("bootstrap.servers", bootstrap)
        .option("ranges", json.dumps(ranges))
        .load()
        .agg(F.count("*").alias("rows"), F.sum(F.length("value")).alias("bytes"))
        .collect()[0]
    )
    return time.perf_counter() - started, int(row["rows"]), int(row["bytes"] or 0)


def check_written(bootstrap: str, topic: str, partitions: int, expected: int, what: str) -> None:
    written = topic_end_total(bootstrap, topic, partitions)
    if written != expected:
        raise RuntimeError(f"{what} wrote {written} records to {topic}, expected {expected}")


def new_topic(admin: AdminClient, prefix: str, partitions: int) -> str:
    topic = f"bench-ds-{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(admin, topic, partitions)
    return topic


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="partitions of every topic")
    parser.add_argument(
        "--spark-partitions", type=int, default=2, help="partitions of the DataFrame the writer produces"
    )
    parser.add_argument(
        "--report",
        type=Path,
        help=f"write the markdown section ({SECTION!r}) into this file: it replaces a section with "
        "that heading, or is appended",
    )
    args = parser.parse_args()
    count, partitions = args.records, args.partitions
    with running_services("sluiceway-bench-ds-") as services:
        bootstrap = services.broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bootstrap})
        spark = SparkSession.builder.remote(services.spark_server.remote).getOrCreate()
        register(spark)
        records = make_records(count, partitions, RECORD_SIZE)
        value_bytes = sum(len(value) for _, value in records)
        frame = pinned_frame(spark, records, args.spark_partitions)

        # Warm-up, not timed: Spark's Python workers, the writer's pooled producer, the raw producer's id.
        warm = new_topic(admin, "warm", partitions)
        small = pinned_frame(spark, records[:1_000], args.spark_partitions)
        spark_write(small, bootstrap, warm)
        spark_read(spark, bootstrap, warm, partitions)
        producer = raw_producer(bootstrap)
        produce_all(producer, warm, records[:1_000])

        produce, write = Series("raw produce"), Series(f"{FORMAT} write")
        consume, read = Series("raw consume"), Series(f"{FORMAT} read")
        small_write: list[float] = []
        small_read: list[float] = []
        for _ in range(args.runs):
            raw_topic = new_topic(admin, "raw", partitions)
            produce.add(count, produce_all(producer, raw_topic, records))
            check_written(bootstrap, raw_topic, partitions, count, "the raw producer")

            spark_topic = new_topic(admin, "spark", partitions)
            write.add(count, spark_write(frame, bootstrap, spark_topic))
            check_written(bootstrap, spark_topic, partitions, count, "the Spark writer")

            consume.add(count, consume_all(bootstrap, raw_topic, partitions, count))

            seconds, rows, read_bytes = spark_read(spark, bootstrap, raw_topic, partitions)
            if (rows, read_bytes) != (count, value_bytes):
                raise RuntimeError(
                    f"the Spark read returned {rows} rows of {read_bytes} value bytes, "
                    f"expected {count} of {value_bytes}"
                )
            read.add(count, seconds)

            small_topic = new_topic(admin, "small", partitions)
            small_write.append(spark_write(small, bootstrap, small_topic))
            check_written(bootstrap, small_topic, partitions, 1_000, "the small Spark write")
            seconds, rows, _ = spark_read(spark, bootstrap, small_topic, partitions)
            if rows != 1_000:
                raise RuntimeError(f"the small Spark read returned {rows} rows, expected 1000")
            small_read.append(seconds)
        producer.close()

        report = render(args, produce, write, consume, read, small_write, small_read)
        print(report)
        if args.report:
            write_section(args.report, report)
        spark.stop()
        return 0


def write_section(path: Path, section: str) -> None:
    """Puts `section` (which starts with the SECTION heading) in place of the file's section with
    that heading, up to the next second-level heading; appends it when there is none."""
    text = path.read_text() if path.exists() else ""
    lines = text.splitlines()
    if SECTION in lines:
        start = lines.index(SECTION)
        end = next(
            (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
            len(lines),
        )
        lines[start:end] = [*section.rstrip("\n").splitlines(), *([""] if end < len(lines) else [])]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text(text.rstrip("\n") + ("\n\n" if text else "") + section.rstrip("\n") + "\n")


def render(
    args: argparse.Namespace,
    produce: Series,
    write: Series,
    consume: Series,
    read: Series,
    small_write: list[float],
    small_read: list[float],
) -> str:
    def row(series: Series) -> str:
        low, mid, high = series.summary()
        return f"| {series.name} | {low:,.0f} | {mid:,.0f} | {high:,.0f} |"

    def ratio_row(product: Series, baseline: Series) -> str:
        low, mid, high = ratio(product, baseline)
        return f"| {product.name} / {baseline.name} | {low:.2f} | {mid:.2f} | {high:.2f} |"

    def seconds_row(label: str, values: list[float]) -> str:
        return f"| {label} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} |"

    settings: dict[str, Any] = {"enable.idempotence": "true", "acks": "all", **PRODUCER_SETTINGS}
    lines = [
        SECTION,
        "",
        f"Latest run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
        f"Python {platform.python_version()}; {args.records:,} DataGen records of {RECORD_SIZE} bytes, "
        f"topics of {args.partitions} partitions, a DataFrame of {args.spark_partitions} partitions "
        f"for the writer, {args.runs} runs. Broker: Tansu (memory), Spark Connect local[2], both on "
        "this machine.",
        "",
        "```sh",
        f".venv/bin/python bench/bench_datasource.py --records {args.records} --runs {args.runs} "
        f"--partitions {args.partitions} --spark-partitions {args.spark_partitions} "
        "--report FILE",
        "```",
        "",
        "Write: one Spark job writing a DataFrame pinned in Spark (`localCheckpoint`) against one raw "
        "producer loop over the same records in a Python list; both producers use "
        + ", ".join(f"`{k}={v}`" for k, v in settings.items())
        + ". Read: one Spark job reading the topic the raw producer wrote and counting rows and value "
        "bytes, against one raw consumer reading the same topic to its end. Spark's Python workers, "
        "the writer's producer and the raw producer are warmed up before the first run. Counts are "
        "verified on every run. The Spark jobs run their partitions two at a time on the cores of "
        "`local[2]`; each raw client is driven from one Python thread.",
        "",
        "### Throughput (records/s)",
        "",
        "| path | min | median | max |",
        "|---|---|---|---|",
        row(produce),
        row(write),
        row(consume),
        row(read),
        "",
        "### Ratios (per run, data source / raw client)",
        "",
        "| ratio | min | median | max |",
        "|---|---|---|---|",
        ratio_row(write, produce),
        ratio_row(read, consume),
        "",
        "### One small job (1,000 records), seconds",
        "",
        "| job | min | median | max |",
        "|---|---|---|---|",
        seconds_row(f"{FORMAT} write", small_write),
        seconds_row(f"{FORMAT} read", small_read),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
