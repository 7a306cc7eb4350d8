"""End-to-end latency at a steady rate: DataGenSource → Kafka → SparkFileSink on the whole product
(embedded broker, Spark Connect local[2], one control plane, one executor, each its own process).

A record's create time is the `ts` field its DataGen batch gives it; it becomes visible when its
batch's directory is renamed into the lake, which sets the directory's change time (ctime). The
latency of a record is ctime minus ts, over the records created after a warm-up. The baseline, in the
same run: raw confluent-kafka at the same rate, each record's produce time to the time a consumer
polling the topic receives it.

    .venv/bin/python bench/bench_latency.py --rate 10000 --seconds 60 --warmup 15 [--report FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

from bench_cluster import percentile
from bench_pipelines import create_topic, wait
from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import (
    ManagedProcess,
    control_plane_argv,
    executor_argv,
    free_port,
    spawn,
    start_broker,
    start_spark_connect,
    wait_serving,
)

TASKS = 2
PARTITIONS = 4
TARGET_P99_MS = 2000.0


def lake_latencies(spark: SparkSession, lake: Path, after_ms: int) -> list[float]:
    """Each record's batch directory's ctime minus its `ts`, for records with ts >= after_ms."""
    rows = (
        spark.read.parquet(str(lake))
        .select(
            F.get_json_object(F.col("value").cast("string"), "$.ts").cast("long").alias("ts"),
            F.col("task").alias("writer"),
            F.col("batch"),
        )
        .where(F.col("ts") >= after_ms)
        .groupBy("writer", "batch", "ts")
        .count()
        .collect()
    )
    latencies: list[float] = []
    for row in rows:
        visible_ms = os.stat(lake / f"task={row['writer']}" / f"batch={row['batch']}").st_ctime * 1000
        latencies.extend([visible_ms - row["ts"]] * int(row["count"]))
    return latencies


def raw_latencies(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    """Produce `rate` records a second for `seconds`, each carrying its produce time; a consumer
    polling meanwhile records when each arrives."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True})
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"latency-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
        }
    )
    # Assigned, not subscribed: a group join on Tansu waits about half the session timeout.
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(PARTITIONS)])
    latencies: list[float] = []
    started = time.monotonic()
    sent = 0
    expected = int(rate * seconds)
    while len(latencies) < expected and time.monotonic() - started < seconds + 60:
        due = min(expected, int((time.monotonic() - started) * rate))
        while sent < due:
            producer.produce(topic, json.dumps({"ts": time.time() * 1000}).encode())
            sent += 1
        producer.poll(0)
        for message in consumer.consume(10_000, timeout=0.01):
            value = message.value()
            if message.error() is None and value is not None:
                received = time.time() * 1000
                latencies.append(received - float(json.loads(value)["ts"]))
    producer.flush(30)
    consumer.close()
    return latencies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--rate", type=int, default=10_000, help="records a second, all tasks together")
    parser.add_argument("--seconds", type=int, default=60, help="how long the source generates")
    parser.add_argument("--warmup", type=int, default=15, help="seconds of records left out at the start")
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="sluiceway-latency-"))
    logs = work / "logs"
    broker = start_broker(logs)
    spark_server = start_spark_connect(logs)
    address = f"127.0.0.1:{free_port()}"
    settings = {f"{k}.storage.replication.factor": "1" for k in ("config", "offset", "status")}
    children: list[ManagedProcess] = []
    try:
        plane = spawn(
            "control-plane", control_plane_argv(broker.bootstrap_servers, address, "bench", settings), logs
        )
        children.append(plane)
        wait_serving(address, 60, plane)
        children.append(spawn("executor", executor_argv(address, spark_server.remote), logs))
        client = SluicewayClient(address, timeout=60)
        wait(lambda: len(client.server_info().executors) == 1, 60, "the executor to attach")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        spark = SparkSession.builder.remote(spark_server.remote).getOrCreate()

        raw_topic = f"latency-raw-{uuid.uuid4().hex[:6]}"
        create_topic(admin, raw_topic, PARTITIONS)
        raw = raw_latencies(broker.bootstrap_servers, raw_topic, args.rate, 20)

        topic, lake = f"latency-{uuid.uuid4().hex[:6]}", work / "lake"
        create_topic(admin, topic, PARTITIONS)
        per_task = int(args.rate * args.seconds // TASKS)
        client.create_connector(
            "lake",
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(lake),
                "tasks.max": str(TASKS),
                "value.converter": "StringConverter",
            },
        )
        started_ms = int(time.time() * 1000)
        client.create_connector(
            "gen",
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": str(TASKS),
                "records.per.sec": str(args.rate / TASKS),
                "max.records": str(per_task),
                "value.converter": "StringConverter",
            },
        )

        def complete() -> bool:
            if not any(lake.glob("task=*/batch=*")):
                return False
            return int(spark.read.parquet(str(lake)).count()) >= per_task * TASKS

        wait(complete, args.seconds + 300, "every record in the lake")
        product = lake_latencies(spark, lake, started_ms + args.warmup * 1000)
        spark.stop()
        client.close()
    finally:
        for child in reversed(children):
            child.stop()
        spark_server.stop()
        broker.stop()

    def row(name: str, values: list[float], target: str) -> str:
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        return f"| {name} | {len(values):,} | {p50:,.0f} | {p99:,.0f} | {max(values):,.0f} | {target} |"

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    report = "\n".join(
        [
            "## End-to-end latency",
            "",
            f"Run: {when}, {platform.machine()}, Python {platform.python_version()}; DataGenSource at "
            f"{args.rate:,} records/s in all ({TASKS} tasks) for {args.seconds} s into a topic of "
            f"{PARTITIONS} partitions, SparkFileSink ({TASKS} tasks) out of it, default batch settings; "
            f"records of the first {args.warmup} s left out. Baseline: raw confluent-kafka produce → "
            "consume at the same rate for 20 s.",
            "",
            "```sh",
            f".venv/bin/python bench/bench_latency.py --rate {args.rate} --seconds {args.seconds} "
            f"--warmup {args.warmup}",
            "```",
            "",
            "| path | records | p50 (ms) | p99 (ms) | max (ms) | target |",
            "|---|---|---|---|---|---|",
            row("DataGenSource → SparkFileSink (created → visible in the lake)", product, "p99 < 2,000"),
            row("raw produce → consume (baseline)", raw, "—"),
            "",
        ]
    )
    print(report)
    if args.report is not None:
        args.report.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
