"""End-to-end latency at a steady rate: DataGenSource → Kafka → SparkFileSink on the whole product
(embedded broker, Spark Connect local[2], one control plane, one executor, each its own process).

A record's create time is the `ts` field its DataGen batch gives it; it becomes visible when its
batch's directory is renamed into the lake, which sets the directory's change time (ctime). The
latency of a record is ctime minus ts, over the records created after a warm-up of 30 s by
default: on a Spark Connect server just started the first batches take seconds (Python workers
starting, the JIT compiling Spark) and the records that queue behind them take 10 to 20 s more to
drain (bench/README.md shows it per 10 s). The baseline, in the same run: raw confluent-kafka at
the same rate, each record's produce time to the time a consumer polling the topic receives it.

Time to the first record: a new DataGenSource → SparkFileSink pipeline on a topic of its own, from
the first create call until its first batch is visible in the lake; once on the Spark Connect
server just started (after the executor's warm-up of it), and `--first-rounds` times on the warm
stack after the latency run.

    .venv/bin/python bench/bench_latency.py --rate 10000 --seconds 90 --warmup 30 \
        [--tasks N] [--first-rounds 3] [--report FILE] [--plot FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import statistics
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

from bench_cluster import percentile
from bench_pipelines import create_topic
from bench_stack import Stack, running_stack, wait
from bench_steps import ConnectorSteps, connector_steps

PARTITIONS = 4
TARGET_P99_MS = 1000.0
TARGET_FIRST_S = 3.0


def lake_samples(spark: SparkSession, lake: Path, after_ms: int) -> list[tuple[int, float, int]]:
    """(ts, latency in ms, records) per batch and ts, for records with ts >= after_ms: the batch
    directory's ctime minus the records' `ts`."""
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
    samples = []
    for row in rows:
        visible_ms = os.stat(lake / f"task={row['writer']}" / f"batch={row['batch']}").st_ctime * 1000
        samples.append((int(row["ts"]), visible_ms - row["ts"], int(row["count"])))
    return sorted(samples)


def expand(samples: list[tuple[int, float, int]]) -> list[float]:
    return [latency for _, latency, count in samples for _ in range(count)]


def plot_latency(
    path: Path, samples: list[tuple[int, float, int]], started_ms: int, warmup: int, target_ms: float
) -> None:
    """Left: the latency of each (batch, ts) group of records against its create time. Right: the
    histogram of the records' latencies after the warm-up, with their p50 and p99."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (over_time, histogram) = plt.subplots(
        1, 2, figsize=(11, 3.8), dpi=110, gridspec_kw={"width_ratios": [3, 2]}
    )
    over_time.scatter(
        [(ts - started_ms) / 1000 for ts, _, _ in samples],
        [lat for _, lat, _ in samples],
        s=6,
        color="#2f6db5",
    )
    over_time.axhline(target_ms, color="#c0392b", linestyle="--", linewidth=1, label="p99 target")
    over_time.axvline(warmup, color="#7f8c8d", linestyle=":", linewidth=1, label="end of the warm-up")
    over_time.set_xlabel("record created (s after the source started)")
    over_time.set_ylabel("created → visible in the lake (ms)")
    over_time.set_title("Latency over time")
    over_time.legend(loc="upper right")
    steady = expand([sample for sample in samples if sample[0] >= started_ms + warmup * 1000])
    if steady:
        histogram.hist(steady, bins=40, color="#2f6db5")
        for share, style in ((0.5, "-"), (0.99, "--")):
            value = percentile(steady, share)
            histogram.axvline(
                value,
                color="#34495e",
                linestyle=style,
                linewidth=1,
                label=f"p{share * 100:.0f} {value:,.0f} ms",
            )
        histogram.axvline(target_ms, color="#c0392b", linestyle="--", linewidth=1, label="p99 target")
        histogram.legend(loc="upper right")
    histogram.set_xlabel("created → visible (ms), after the warm-up")
    histogram.set_ylabel("records")
    histogram.set_title("Histogram")
    figure.suptitle("DataGenSource → SparkFileSink at a steady rate, default settings")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def first_record_seconds(stack: Stack, name: str, rate: int) -> float:
    """Creates a SparkFileSink and a DataGenSource (``rate`` records/s) on a new topic and returns the
    seconds from the first create call until a batch of the sink is visible in the lake; deletes both."""
    topic, lake = f"first-{uuid.uuid4().hex[:6]}", stack.work / f"lake-{name}"
    create_topic(stack.admin, topic, PARTITIONS)
    began = time.monotonic()
    stack.client.create_connector(
        f"{name}-lake",
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(lake),
            "value.converter": "StringConverter",
        },
    )
    stack.client.create_connector(
        f"{name}-gen",
        {
            "connector.class": "DataGenSource",
            "topic": topic,
            "records.per.sec": str(rate),
            "value.converter": "StringConverter",
        },
    )
    wait(lambda: any(lake.glob("task=*/batch=*")), 300, f"the first record of {name}", poll=0.02)
    seconds = time.monotonic() - began
    stack.client.delete_connector(f"{name}-gen")
    stack.client.delete_connector(f"{name}-lake")
    return seconds


def executor_warm_up_seconds(log: Path, timeout: float) -> float:
    """Waits for the executor's log to say its first Spark session is warmed up; the seconds it
    says the warm-up took."""
    pattern = re.compile(r"Spark Connect session 1 warmed up in ([0-9.]+)s")
    found: list[float] = []

    def warmed() -> bool:
        match = pattern.search(log.read_text(encoding="utf-8", errors="replace"))
        if match:
            found.append(float(match[1]))
        return bool(match)

    wait(warmed, timeout, "the executor's Spark warm-up", poll=0.2)
    return found[0]


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
    parser.add_argument("--seconds", type=int, default=90, help="how long the source generates")
    parser.add_argument("--warmup", type=int, default=30, help="seconds of records left out at the start")
    parser.add_argument("--tasks", type=int, default=1, help="tasks.max of both connectors (theirs: 1)")
    parser.add_argument(
        "--first-rounds", type=int, default=3, help="new pipelines timed to their first record"
    )
    parser.add_argument("--report", type=Path)
    parser.add_argument("--plot", type=Path, help="write a PNG of latency over time here (needs matplotlib)")
    args = parser.parse_args()

    with running_stack("sluiceway-latency-") as stack:
        client, spark, work = stack.client, stack.spark, stack.work
        # On a Spark Connect server that has run nothing yet, once the executor warmed it up.
        attached = time.monotonic()
        warm_up_s = executor_warm_up_seconds(stack.executor_log, 180)
        ready_after = time.monotonic() - attached
        first_cold = first_record_seconds(stack, "fresh", args.rate)
        raw_topic = f"latency-raw-{uuid.uuid4().hex[:6]}"
        create_topic(stack.admin, raw_topic, PARTITIONS)
        raw = raw_latencies(stack.bootstrap, raw_topic, args.rate, 20)

        topic, lake = f"latency-{uuid.uuid4().hex[:6]}", work / "lake"
        create_topic(stack.admin, topic, PARTITIONS)
        per_task = int(args.rate * args.seconds // args.tasks)
        client.create_connector(
            "lake",
            {
                "connector.class": "SparkFileSink",
                "topics": topic,
                "path": str(lake),
                "tasks.max": str(args.tasks),
                "value.converter": "StringConverter",
            },
        )
        started_ms = int(time.time() * 1000)
        client.create_connector(
            "gen",
            {
                "connector.class": "DataGenSource",
                "topic": topic,
                "tasks.max": str(args.tasks),
                "records.per.sec": str(args.rate / args.tasks),
                "max.records": str(per_task),
                "value.converter": "StringConverter",
            },
        )

        def complete() -> bool:
            if not any(lake.glob("task=*/batch=*")):
                return False
            return int(spark.read.parquet(str(lake)).count()) >= per_task * int(args.tasks)

        wait(complete, args.seconds + 300, "every record in the lake")
        everything = lake_samples(spark, lake, started_ms)
        samples = [sample for sample in everything if sample[0] >= started_ms + args.warmup * 1000]
        product = expand(samples)
        after = (started_ms + args.warmup * 1000) / 1000
        source_steps, sink_steps = (connector_steps(stack.executor_log, name) for name in ("gen", "lake"))
        client.delete_connector("gen")
        client.delete_connector("lake")
        first_warm = [first_record_seconds(stack, f"warm{i}", args.rate) for i in range(args.first_rounds)]
        alone = jobs_alone(spark, stack.bootstrap, topic, work, args.rate // args.tasks, args.tasks)
    if args.plot is not None:
        plot_latency(args.plot, everything, started_ms, args.warmup, TARGET_P99_MS)

    def row(name: str, values: list[float], target: str) -> str:
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        return f"| {name} | {len(values):,} | {p50:,.0f} | {p99:,.0f} | {max(values):,.0f} | {target} |"

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    report = "\n".join(
        [
            "## End-to-end latency",
            "",
            f"Run: {when}, {platform.machine()}, Python {platform.python_version()}; DataGenSource at "
            f"{args.rate:,} records/s in all ({args.tasks} task(s)) for {args.seconds} s into a topic of "
            f"{PARTITIONS} partitions, SparkFileSink ({args.tasks} task(s)) out of it, default batch "
            "settings; "
            f"records of the first {args.warmup} s left out. Baseline: raw confluent-kafka produce → "
            "consume at the same rate for 20 s.",
            "",
            "```sh",
            f".venv/bin/python bench/bench_latency.py --rate {args.rate} --seconds {args.seconds} "
            f"--warmup {args.warmup} --tasks {args.tasks}",
            "```",
            "",
            "| path | records | p50 (ms) | p99 (ms) | max (ms) | target |",
            "|---|---|---|---|---|---|",
            row(
                "DataGenSource → SparkFileSink (created → visible in the lake)",
                product,
                "p99 < 1,000, p50 < 500",
            ),
            row("raw produce → consume (baseline)", raw, "—"),
            "",
            "A new DataGenSource → SparkFileSink pipeline (a topic of its own, "
            f"{args.rate:,} records/s), from the first create call until its first batch is visible "
            "in the lake:",
            "",
            "| when | pipelines | min (s) | median (s) | max (s) | target |",
            "|---|---|---|---|---|---|",
            "| on a Spark Connect server that had run nothing, once the executor warmed it up "
            f"({warm_up_s:.1f} s by its log, {ready_after:.1f} s after it attached) | 1 | "
            f"{first_cold:.2f} | {first_cold:.2f} | {first_cold:.2f} | — |",
            f"| on the warm stack, after the latency run | {len(first_warm)} | {min(first_warm):.2f} | "
            f"{statistics.median(first_warm):.2f} | {max(first_warm):.2f} | < {TARGET_FIRST_S:.0f} |",
            "",
            "Where the time goes, from the executor's log (batches that ended after the warm-up):",
            "",
            "| step | batches | median (ms) | max (ms) |",
            "|---|---|---|---|",
            *step_rows("DataGenSource", source_steps, after, ("write", "commit")),
            *step_rows("SparkFileSink", sink_steps, after, ("plan", "plan_ahead", "write", "commit")),
            "",
            "A sink batch is planned ahead (plan_ahead) while the batch before commits, unless that",
            "batch was empty; its commit row is the commit with that plan beside it.",
            "",
            f"The same Spark jobs alone, for a batch of {args.rate // args.tasks:,} records (one second "
            "of one task), median of 5 runs after one untimed:",
            "",
            "| job | median (ms) |",
            "|---|---|",
            *[f"| {name} | {seconds * 1000:,.0f} |" for name, seconds in alone.items()],
            "",
            "Per 10 s of create time, from the start (the warm-up included):",
            "",
            "| created | records | p50 (ms) | p99 (ms) |",
            "|---|---|---|---|",
            *window_rows(everything, started_ms, args.warmup),
            "",
        ]
    )
    print(report)
    if args.report is not None:
        args.report.write_text(report)
    return 0


def jobs_alone(
    spark: SparkSession, bootstrap: str, topic: str, work: Path, records: int, tasks: int
) -> dict[str, float]:
    """The Spark jobs of one source batch and one sink batch of ``records`` records, each run alone
    (nothing else running) 5 times: the median seconds. A DataGen batch written to Kafka with the
    `sluiceway-kafka` writer; the same topic's last records read with the reader and written as
    Parquet."""
    from sluiceway_executor.datagen_records import datagen_frame
    from sluiceway_executor.datasources.registry import register
    from sluiceway_executor.kafka_ranges import exact_end_offsets

    register(spark)

    def source_job() -> None:
        frame = datagen_frame(spark, 0, 0, records, 100, 0, 1).select("key", "value")
        (
            frame.write.format("sluiceway-kafka")
            .mode("append")
            .option("bootstrap.servers", bootstrap)
            .option("topic", topic)
            .save()
        )

    ends = exact_end_offsets(bootstrap, [TopicPartition(topic, p) for p in range(PARTITIONS)], 30)
    # One sink task's partitions, holding ``records`` between them.
    share = records // (PARTITIONS // tasks)
    ranges = [
        {"topic": t, "partition": p, "start": max(0, end - share), "end": end} for (t, p), end in ends.items()
    ]
    written = [0]

    def sink_job() -> None:
        written[0] += 1
        (
            spark.read.format("sluiceway-kafka")
            .option("bootstrap.servers", bootstrap)
            .option("ranges", json.dumps(ranges[: PARTITIONS // tasks]))
            .load()
            .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value")
            .write.parquet(str(work / "alone" / str(written[0])))
        )

    medians = {}
    for name, job in (("DataGenSource's job", source_job), ("SparkFileSink's job", sink_job)):
        job()  # once untimed
        times = []
        for _ in range(5):
            began = time.perf_counter()
            job()
            times.append(time.perf_counter() - began)
        medians[name] = statistics.median(times)
    return medians


def window_rows(samples: list[tuple[int, float, int]], started_ms: int, warmup: int) -> list[str]:
    """p50 and p99 of the records created in each 10 s from the start, marking the warm-up."""
    windows: dict[int, list[tuple[int, float, int]]] = {}
    for sample in samples:
        windows.setdefault(max(sample[0] - started_ms, 0) // 10_000, []).append(sample)
    rows = []
    for index in sorted(windows):
        values = expand(windows[index])
        label = f"{index * 10} to {index * 10 + 10} s" + (" (warm-up)" if index * 10 < warmup else "")
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        rows.append(f"| {label} | {len(values):,} | {p50:,.0f} | {p99:,.0f} |")
    return rows


def step_rows(label: str, steps: ConnectorSteps, after: float, names: tuple[str, ...]) -> list[str]:
    """Per step, the median and longest seconds of the batches that ended after ``after``; for a
    source also the time between one batch's end and the next one's of the same task."""
    batches = [b for b in steps.batches if b.ended >= after]
    rows = []
    for name in names:
        values = [b.steps[name] * 1000 for b in batches if name in b.steps]
        if values:
            rows.append(
                f"| {label} {name} | {len(values)} | {statistics.median(values):,.0f} | {max(values):,.0f} |"
            )
    gaps: list[float] = []
    for task in {b.task for b in batches}:
        ends = [b.ended for b in batches if b.task == task]
        gaps.extend((later - earlier) * 1000 for earlier, later in itertools.pairwise(ends))
    if gaps:
        rows.append(
            f"| {label}: one batch's end to the next's, same task | {len(gaps)} | "
            f"{statistics.median(gaps):,.0f} | {max(gaps):,.0f} |"
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
