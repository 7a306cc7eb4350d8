"""Pipeline benchmarks, every figure a ratio against a baseline measured in
the same run on the same machine:

- sink:   SparkFileSink (Parquet) from a topic of N 100-byte JSON records, against raw
          confluent-kafka consumption of the same topic and a hand-written PySpark job doing
          the same read and write;
- source: DataGenSource into Kafka, against raw confluent-kafka production of the same records.

Each product run goes through the whole system: a real control plane, a real executor, the
connector created over the API. A sink run is timed until its consumer group has committed the
topic's end (probed every 20 ms); a source run until its last task's batch, holding the last
records, has returned and committed (from the executor's log). Record counts are checked on every
run.

    .venv/bin/python bench/bench_pipelines.py --records 1000000 --runs 3 --report FILE --plot FILE.png

With --metrics-cost, only the sink runs, with the executor's Spark-side counts on and off in turns
(bench_metrics_cost.py).
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

import bench_metrics_cost
from bench_stack import Stack, running_stack, wait
from bench_steps import ConnectorSteps, connector_steps
from process_usage import cpu_since, cpu_snapshot, peak_rss_mib
from sluiceway_executor.datagen_records import datagen_record
from sluiceway_executor.datasources.registry import register
from sluiceway_executor.kafka_ranges import exact_end_offsets

RECORD_SIZE = 100
SPARK_SERVER = "Spark Connect server (JVM and its Python workers)"


@dataclass
class Series:
    name: str
    rates: list[float] = field(default_factory=list)

    def add(self, records: int, seconds: float) -> None:
        self.rates.append(records / seconds)

    def summary(self) -> tuple[float, float, float]:
        return min(self.rates), statistics.median(self.rates), max(self.rates)


def ratio(product: Series, baseline: Series) -> tuple[float, float, float]:
    """Per-run ratios (run i of the product against run i of the baseline)."""
    values = [p / b for p, b in zip(product.rates, baseline.rates, strict=True)]
    return min(values), statistics.median(values), max(values)


def create_topic(admin: AdminClient, topic: str, partitions: int) -> None:
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)


def bench_producer(bootstrap: str) -> Producer:
    """The raw confluent-kafka producer the benchmarks fill their input topics with."""
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
            "batch.num.messages": 10000,
            "compression.type": "lz4",
        }
    )


def produce_datagen(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """Raw confluent-kafka production of the DataGen records; returns seconds."""
    producer = bench_producer(bootstrap)
    ts = int(time.time() * 1000)

    # Generated inside the timed loop, as a source connector must generate its records too.
    def generated() -> Iterator[tuple[bytes, bytes]]:
        for seq in range(records):
            key, value = datagen_record(seq % partitions, seq, ts, RECORD_SIZE)
            yield key.encode(), value.encode()

    return produce_all(producer, topic, generated())


def produce_all(producer: Producer, topic: str, records: Iterable[tuple[bytes, bytes]]) -> float:
    """Produces every (key, value) and waits for all acknowledgements; returns seconds, counting
    from before the first record is taken from `records`."""
    started = time.perf_counter()
    for index, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
        if index % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - started
    if remaining:
        raise RuntimeError(f"{remaining} records not delivered")
    return elapsed


def topic_end_total(bootstrap: str, topic: str, partitions: int) -> int:
    ends = exact_end_offsets(bootstrap, [TopicPartition(topic, p) for p in range(partitions)], 60)
    return sum(ends.values())


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """Raw confluent-kafka consumption of every record; returns seconds."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-raw-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    done: set[int] = set()
    started = time.perf_counter()
    while len(done) < partitions:
        for message in consumer.consume(10000, 1.0):
            error = message.error()
            if error is None:
                seen += 1
            elif error.code() == KafkaError._PARTITION_EOF:
                done.add(message.partition() or 0)
            else:
                raise RuntimeError(error)
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen != expected:
        raise RuntimeError(f"raw consumer saw {seen} records, expected {expected}")
    return elapsed


def handwritten_spark_job(
    spark: SparkSession, bootstrap: str, topic: str, partitions: int, path: str
) -> float:
    """What a Spark user writes by hand: read the topic's offset ranges, write Parquet."""
    ends = exact_end_offsets(bootstrap, [TopicPartition(topic, p) for p in range(partitions)], 60)
    ranges = [{"topic": t, "partition": p, "start": 0, "end": end} for (t, p), end in ends.items()]
    started = time.perf_counter()
    (
        spark.read.format("sluiceway-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("ranges", json.dumps(ranges))
        .load()
        .selectExpr(
            "topic",
            "partition",
            "offset",
            "timestamp",
            "CAST(key AS STRING) AS key",
            "CAST(value AS STRING) AS value",
        )
        .write.mode("overwrite")
        .parquet(path)
    )
    return time.perf_counter() - started


def committed_total(admin: AdminClient, group: str, topic: str, partitions: int) -> int:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    result = next(iter(admin.list_consumer_group_offsets([request]).values())).result(timeout=10)
    return sum(max(tp.offset, 0) for tp in result.topic_partitions)


def group_reached(admin: AdminClient, group: str, topic: str, partitions: int, target: int) -> bool:
    return committed_total(admin, group, topic, partitions) >= target


def topic_reached(bootstrap: str, topic: str, partitions: int, target: int) -> bool:
    return topic_end_total(bootstrap, topic, partitions) >= target


@dataclass
class ProductRun:
    """One timed product run: its seconds and where they went (bench_steps)."""

    seconds: float
    created: float  # epoch seconds of the create call
    steps: ConnectorSteps
    probed: float  # seconds until the benchmark's own probe saw the run complete
    # CPU seconds each process tree of the stack spent from the create call to the probe's end.
    cpu: dict[str, float] = field(default_factory=dict)


def stack_processes(stack: Stack) -> dict[str, int]:
    """The product's processes whose CPU the runs measure, by the name the report gives them."""
    return {"executor": stack.executor.process.pid, SPARK_SERVER: stack.spark_server_pid}


def sink_run(
    stack: Stack,
    args: argparse.Namespace,
    topic: str,
    name: str,
    path: str,
    check: Callable[[str], None] | None = None,
) -> ProductRun:
    """One SparkFileSink run; ``check`` (given the connector's name) runs after the timing, while
    the connector still exists."""
    created, started, used = time.time(), time.perf_counter(), cpu_snapshot(stack_processes(stack))
    stack.client.create_connector(
        name,
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": path,
            "format": "parquet",
            "tasks.max": str(args.tasks),
            "value.converter": "StringConverter",
            **batch_settings(args),
        },
    )
    group_done = functools.partial(
        group_reached, stack.admin, f"connect-{name}", topic, args.partitions, args.records
    )
    # Probed every 20 ms: the run is charged half a pause on average, and the baseline none.
    wait(group_done, 900, name, poll=0.02)
    seconds = time.perf_counter() - started
    cpu = cpu_since(used, stack_processes(stack))
    if check is not None:
        check(name)
    stack.client.delete_connector(name)
    written = stack.spark.read.parquet(path).count()
    if written != args.records:
        raise RuntimeError(f"SparkFileSink wrote {written} records, expected {args.records}")
    return ProductRun(seconds, created, connector_steps(stack.executor_log, name), seconds, cpu)


def source_run(stack: Stack, args: argparse.Namespace, topic: str, name: str) -> ProductRun:
    per_task = args.records // args.tasks
    created, started, used = time.time(), time.perf_counter(), cpu_snapshot(stack_processes(stack))
    stack.client.create_connector(
        name,
        {
            "connector.class": "DataGenSource",
            "topic": topic,
            "tasks.max": str(args.tasks),
            "max.records": str(per_task),
            "record.size.bytes": str(RECORD_SIZE),
            "value.converter": "StringConverter",
            **batch_settings(args),
        },
    )
    expected = per_task * args.tasks
    done = functools.partial(topic_reached, stack.bootstrap, topic, args.partitions, expected)
    wait(done, 900, name)
    probed = time.perf_counter() - started
    cpu = cpu_since(used, stack_processes(stack))

    def every_task_logged() -> bool:
        return len({b.task for b in connector_steps(stack.executor_log, name).batches}) == int(args.tasks)

    wait(every_task_logged, 30, f"{name}'s batches in the executor's log")
    stack.client.delete_connector(name)
    if topic_end_total(stack.bootstrap, topic, args.partitions) != expected:
        raise RuntimeError("DataGenSource wrote a wrong count")
    steps = connector_steps(stack.executor_log, name)
    # Timed to the end of the task that finished last, from the executor's log: its batch returns
    # once Spark's producers have every record acknowledged, as the raw producer's flush does. The
    # probe that saw the records in the topic comes later by however long one probe takes.
    seconds = max(b.ended for b in steps.batches) - created
    return ProductRun(seconds, created, steps, probed, cpu)


def batch_settings(args: argparse.Namespace) -> dict[str, str]:
    return {"batch.max.records": str(args.batch)} if args.batch else {}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max of the product connectors")
    parser.add_argument("--batch", type=int, help="batch.max.records of both connectors (default: theirs)")
    parser.add_argument("--report", type=Path, help="write the markdown report here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the throughputs here (needs matplotlib)")
    parser.add_argument(
        "--metrics-cost",
        action="store_true",
        help="measure only the sink, with metrics.task.counts.enable on and off in turns, --runs of each",
    )
    args = parser.parse_args()
    if args.metrics_cost:
        return metrics_cost(args)
    records, partitions = args.records, args.partitions
    with running_stack("sluiceway-bench-") as stack:
        work, bootstrap, spark = stack.work, stack.bootstrap, stack.spark
        register(spark)

        # Sink: one input topic, read again by every run.
        source_topic = f"bench-in-{uuid.uuid4().hex[:6]}"
        create_topic(stack.admin, source_topic, partitions)
        produce_datagen(bootstrap, source_topic, records, partitions)
        assert topic_end_total(bootstrap, source_topic, partitions) == records
        raw_consume, handwritten, sink = (
            Series("raw consume"),
            Series("hand-written Spark"),
            Series("SparkFileSink"),
        )
        # One untimed run of each Spark path first, so no timed run pays for the Spark Connect
        # server's first jobs (JVM warm-up, Python workers): the hand-written job, then the sink.
        handwritten_spark_job(spark, bootstrap, source_topic, partitions, str(work / "warm"))
        sink_run(
            stack, args, source_topic, f"bench-sink-warm-{uuid.uuid4().hex[:6]}", str(work / "sink-warm")
        )
        sink_runs: list[ProductRun] = []
        for run in range(args.runs):
            raw_consume.add(records, consume_all(bootstrap, source_topic, partitions, records))
            path = str(work / f"spark-{run}")
            handwritten.add(records, handwritten_spark_job(spark, bootstrap, source_topic, partitions, path))
            if spark.read.parquet(path).count() != records:
                raise RuntimeError("hand-written job wrote a wrong count")
            name, path = f"bench-sink-{run}-{uuid.uuid4().hex[:6]}", str(work / f"sink-{run}")
            sink_runs.append(sink_run(stack, args, source_topic, name, path))
            sink.add(records, sink_runs[-1].seconds)

        # Source: every run writes a fresh topic; one untimed run first, as for the sink.
        raw_produce, source = Series("raw produce"), Series("DataGenSource")
        warm_topic = f"bench-out-warm-{uuid.uuid4().hex[:6]}"
        create_topic(stack.admin, warm_topic, partitions)
        source_run(stack, args, warm_topic, f"bench-source-warm-{uuid.uuid4().hex[:6]}")
        source_runs: list[ProductRun] = []
        for run in range(args.runs):
            topic = f"bench-raw-{run}-{uuid.uuid4().hex[:6]}"
            create_topic(stack.admin, topic, partitions)
            raw_produce.add(records, produce_datagen(bootstrap, topic, records, partitions))
            topic = f"bench-out-{run}-{uuid.uuid4().hex[:6]}"
            create_topic(stack.admin, topic, partitions)
            source_runs.append(source_run(stack, args, topic, f"bench-source-{run}-{uuid.uuid4().hex[:6]}"))
            source.add((records // args.tasks) * args.tasks, source_runs[-1].seconds)
        # Read while every process still runs: the peaks cover all the runs above.
        memory = {
            "executor": peak_rss_mib(stack.executor.process.pid),
            SPARK_SERVER: peak_rss_mib(stack.spark_server_pid),
        }
    report = render(args, raw_consume, handwritten, sink, raw_produce, source, memory, sink_runs, source_runs)
    print(report)
    if args.report:
        args.report.write_text(report)
    if args.plot:
        plot_throughput(args.plot, [raw_consume, handwritten, sink, raw_produce, source], args.records)
    return 0


def metrics_cost(args: argparse.Namespace) -> int:
    """The sink with the executor's Spark-side counts on and off (bench_metrics_cost.py)."""
    with running_stack("sluiceway-bench-cost-") as stack:
        register(stack.spark)
        topic = f"bench-in-{uuid.uuid4().hex[:6]}"
        create_topic(stack.admin, topic, args.partitions)
        produce_datagen(stack.bootstrap, topic, args.records, args.partitions)
        assert topic_end_total(stack.bootstrap, topic, args.partitions) == args.records

        def run(name: str, path: str, check: Callable[[str], None]) -> tuple[float, ConnectorSteps]:
            done = sink_run(stack, args, topic, name, path, check)
            return done.seconds, done.steps

        on, off = bench_metrics_cost.measure(stack, args.records, args.runs, run)
    command = ".venv/bin/python bench/bench_pipelines.py " + " ".join(sys.argv[1:])
    report = bench_metrics_cost.render(on, off, command, args.records)
    print(report)
    if args.report:
        args.report.write_text(report)
    return 0


def plot_throughput(path: Path, series: list[Series], records: int) -> None:
    """A bar per path at its median throughput, with its min and max as the error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s.name for s in series]
    low, mid, high = zip(*(s.summary() for s in series), strict=True)
    figure, axes = plt.subplots(figsize=(7, 3.6), dpi=110)
    positions = list(range(len(series)))
    errors = [
        [m - lo for m, lo in zip(mid, low, strict=True)],
        [h - m for m, h in zip(mid, high, strict=True)],
    ]
    colors = ["#9aa7b8", "#9aa7b8", "#2f6db5", "#9aa7b8", "#2f6db5"]
    axes.bar(
        positions,
        [m / 1000 for m in mid],
        color=colors[: len(series)],
        yerr=[[e / 1000 for e in side] for side in errors],
        capsize=4,
    )
    axes.set_xticks(positions, names, rotation=15)
    axes.set_ylabel("thousand records/s")
    axes.set_title(f"Throughput, {records:,} records (median; bars: min to max)")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def where_time_went(label: str, runs: list[ProductRun], steps: tuple[str, ...]) -> list[str]:
    """One row per run: total, create → every task started, batches per task, and the busiest
    task's seconds in each step."""
    rows = []
    for index, run in enumerate(runs):
        start_up = max(run.steps.started, default=run.created) - run.created
        cells = [f"{run.steps.step_total(step):.2f}" for step in steps]
        rows.append(
            f"| {label} {index + 1} | {run.seconds:.2f} | {run.probed:.2f} | {start_up:.2f} | "
            f"{run.steps.batches_per_task()} | " + " | ".join(cells) + " |"
        )
    return rows


def cpu_rows(label: str, runs: list[ProductRun]) -> list[str]:
    """The report's CPU rows of one path's runs, a row per process."""

    def spread(values: list[float], form: str) -> str:
        return " / ".join(format(v, form) for v in (min(values), statistics.median(values), max(values)))

    rows = []
    for process in runs[0].cpu if runs else {}:
        seconds = [run.cpu[process] for run in runs]
        cores = [run.cpu[process] / run.probed for run in runs]
        rows.append(f"| {label} | {process} | {spread(seconds, '.1f')} | {spread(cores, '.2f')} |")
    return rows


def render(
    args: argparse.Namespace,
    raw_consume: Series,
    handwritten: Series,
    sink: Series,
    raw_produce: Series,
    source: Series,
    memory: dict[str, float],
    sink_runs: list[ProductRun],
    source_runs: list[ProductRun],
) -> str:
    def row(series: Series) -> str:
        low, mid, high = series.summary()
        return f"| {series.name} | {low:,.0f} | {mid:,.0f} | {high:,.0f} |"

    def ratio_row(label: str, product: Series, baseline: Series, target: str) -> str:
        low, mid, high = ratio(product, baseline)
        return f"| {label} | {low:.2f} | {mid:.2f} | {high:.2f} | {target} |"

    lines = [
        "# Benchmarks",
        "",
        f"Latest run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, "
        f"Python {platform.python_version()}; {args.records:,} records of {RECORD_SIZE} bytes, "
        f"{args.partitions} partitions, connectors with tasks.max={args.tasks}, {args.runs} runs each "
        "after one untimed run of each path. "
        "Broker: Tansu (memory), Spark Connect local[2], one control plane, one executor, "
        "all on this machine.",
        "",
        "Reproduce:",
        "",
        "```sh",
        f".venv/bin/python bench/bench_pipelines.py --records {args.records} --runs {args.runs} "
        f"--partitions {args.partitions} --tasks {args.tasks}"
        + (f" --batch {args.batch}" if args.batch else "")
        + " --report FILE --plot FILE.png",
        "```",
        "",
        "Product runs are timed from the create call: a sink run until its consumer group has committed",
        "the topic's end (probed every 20 ms), a source run until its last task's last batch has",
        "returned (the executor's log). Counts are verified after each run.",
        "",
        "### Throughput (records/s)",
        "",
        "| path | min | median | max |",
        "|---|---|---|---|",
        row(raw_consume),
        row(handwritten),
        row(sink),
        row(raw_produce),
        row(source),
        "",
        "### Ratios (per run, product / baseline)",
        "",
        "| ratio | min | median | max | target |",
        "|---|---|---|---|---|",
        ratio_row("SparkFileSink / hand-written Spark", sink, handwritten, "≥ 0.9, no run < 0.75"),
        ratio_row("SparkFileSink / raw consume", sink, raw_consume, "—"),
        ratio_row("DataGenSource / raw produce", source, raw_produce, "≥ 0.7"),
        "",
        "### Where a product run's time went (seconds, from the executor's log)",
        "",
        "A source run is timed to the end of its last task's last batch in the executor's log (the",
        "batch returns once Spark's producers have every record acknowledged, like the raw producer's",
        "flush); the benchmark's own probe of the topic's end sees it later by one slow probe. A sink",
        "run is timed by its probe of the committed offsets, every 20 ms and quick.",
        "Start-up is from the create call until every task's run began (config validation, task",
        "configs, assignment, the pipeline's start and its offset committer). The steps are those of",
        "the busiest task, summed over its batches; its tasks run side by side. A batch after the",
        "first is planned while the one before commits (plan_ahead, not a column here), and the",
        "commit column holds that plan's time too: the runner waits for it after the commit.",
        "",
        "| run | timed | probe saw it | start-up | batches per task | plan | write | commit |",
        "|---|---|---|---|---|---|---|---|",
        *where_time_went("SparkFileSink", sink_runs, ("plan", "write", "commit")),
        *where_time_went("DataGenSource", source_runs, ("plan", "write", "commit")),
        "",
        "### Peak memory over all the runs (MiB)",
        "",
        "Each process's own peak resident size (VmHWM), summed over the process and the ones it",
        "started that are still running at the end: an upper bound of the peak of the whole.",
        "",
        "| process | peak |",
        "|---|---|",
        *[f"| {name} | {mib:,.0f} |" for name, mib in memory.items()],
        "",
        "### CPU during the product runs",
        "",
        "CPU seconds (user and system) each process tree spent from a run's create call until its",
        "probe saw it complete, including the children it reaped (Spark's Python workers), and that",
        "divided by the same wall-clock seconds: the cores it kept busy on average. Median over the",
        "runs, with min and max. The broker, the control plane and the benchmark itself are not in it.",
        "",
        "| run | process | CPU seconds: min / median / max | cores busy: min / median / max |",
        "|---|---|---|---|",
        *cpu_rows("SparkFileSink", sink_runs),
        *cpu_rows("DataGenSource", source_runs),
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
