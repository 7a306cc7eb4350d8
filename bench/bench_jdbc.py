"""Typed records and JDBC on the whole product, every figure against a baseline measured in the
same run on the same machine (bench_stack: the embedded Tansu broker, Spark Connect local[2], one
control plane, one executor; plus the tests' throwaway PostgreSQL server):

- JdbcSink, insert.mode=insert, from a topic of N typed records (Kafka Connect JSON envelopes of
  six fields, a Timestamp among them), against a hand-written PySpark job that reads the topic
  with `sluiceway-kafka`, takes the payload out with from_json and appends to a table with Spark's
  JDBC writer; and the same without the Timestamp field (smaller records) against the same job on
  that topic;
- JdbcSink, insert.mode=upsert (pk.mode=record_value, pk.fields=id), same topic, fresh table,
  against the same hand-written append (an upsert against an append: not like for like);
- JdbcSource, mode=incrementing, from a table of N rows, against a hand-written job that reads the
  table with Spark's JDBC reader and writes to_json(struct(*)) with the `sluiceway-kafka` writer;
- SparkFileSink (Parquet) from N DataGen typed envelopes (JsonConverter, schemas.enable=true)
  against the same from N DataGen string records (StringConverter).

A sink run is timed from the create call until its consumer group has committed the topic's end, a
source run until its committed offset holds the table's last id (the client's get_offsets); both
probed every 20 ms. Counts are checked after every run, and the product's tables against the
hand-written job's by aggregates. One untimed round of every path comes first.

    .venv/bin/python bench/bench_jdbc.py --records 200000 --runs 3 [--partitions 4] [--tasks 2] \\
        [--no-plain] [--report FILE]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_jdbc_paths import (
    WITH_TIMESTAMP,
    WITHOUT_TIMESTAMP,
    Timed,
    create_source_table,
    drop_table,
    file_sink_config,
    first_value,
    handwritten_append,
    handwritten_jdbc_to_kafka,
    jdbc_sink_config,
    jdbc_source_config,
    produce_rows,
    produce_typed_datagen,
    repo_root,
    row_count,
    row_value,
    run_connector,
    sink_done,
    source_done,
    start_postgres,
    table_summary,
)
from bench_jdbc_report import (
    FILE_STRING,
    FILE_TYPED,
    HW_PLAIN,
    HW_SOURCE,
    HW_SOURCE_ENVELOPE,
    HW_TS,
    SINK_PLAIN,
    SINK_TS,
    SOURCE,
    UPSERT,
    Results,
    render,
)
from bench_pipelines import Series, create_topic, produce_datagen, topic_end_total
from bench_stack import Stack, running_stack
from sluiceway.connect.data import envelope_to_bytes
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value
from sluiceway_executor.datasources.registry import register

if TYPE_CHECKING:  # at run time the import needs the checkout on sys.path (start_postgres)
    from tests.postgres_server import PostgresServer


class Bench:
    def __init__(self, stack: Stack, pg: PostgresServer, args: argparse.Namespace) -> None:
        self.stack, self.pg, self.args = stack, pg, args
        self.results = Results()
        self.topic_ts = self.topic_plain = self.topic_typed = self.topic_string = ""

    # -- set-up --

    def produce_inputs(self) -> None:
        stack, args = self.stack, self.args
        records, partitions, bootstrap = args.records, args.partitions, stack.bootstrap
        suffix = uuid.uuid4().hex[:6]
        self.topic_ts = f"bench-jdbc-ts-{suffix}"
        self.topic_plain = f"bench-jdbc-plain-{suffix}"
        self.topic_typed = f"bench-typed-{suffix}"
        self.topic_string = f"bench-string-{suffix}"
        for topic in (self.topic_ts, self.topic_plain, self.topic_typed, self.topic_string):
            create_topic(stack.admin, topic, partitions)
        produce_rows(bootstrap, self.topic_ts, records, timestamp=True)
        if args.plain:
            produce_rows(bootstrap, self.topic_plain, records, timestamp=False)
        produce_typed_datagen(bootstrap, self.topic_typed, records, partitions)
        produce_datagen(bootstrap, self.topic_string, records, partitions)
        for topic in (self.topic_ts, self.topic_typed, self.topic_string):
            if topic_end_total(bootstrap, topic, partitions) != records:
                raise RuntimeError(f"{topic} does not hold {records} records")
        sizes = self.results.sizes
        middle = max(records // 2, 1)
        sizes["JDBC topic, with timestamp"] = len(
            envelope_to_bytes(WITH_TIMESTAMP, row_value(middle, True)) or b""
        )
        sizes["JDBC topic, no timestamp"] = len(
            envelope_to_bytes(WITHOUT_TIMESTAMP, row_value(middle, False)) or b""
        )
        sizes["DataGen typed envelope"] = len(envelope_to_bytes(ORDER_SCHEMA, typed_value(middle)) or b"")
        sizes["DataGen string record"] = 100

    # -- recording --

    def record(
        self, path: str, timed: bool, label: str, seconds: float, found: int, run: Timed | None
    ) -> None:
        results, expected = self.results, self.args.records
        results.checks += 1
        if found != expected:
            results.problems.append(f"{label}, {path}: {found:,} records, expected {expected:,}")
        if run is not None and run.errors:
            results.problems.append(f"{label}, {path}: task errors: {'; '.join(run.errors)}")
        if not timed:
            return
        results.rates.setdefault(path, Series(path)).add(expected, seconds)
        results.counts.setdefault(path, []).append(found)
        if run is not None:
            results.runs.setdefault(path, []).append(run)

    def compare(self, label: str, what: str, mine: tuple[Any, ...], theirs: tuple[Any, ...]) -> None:
        self.results.checks += 1
        if mine != theirs:
            self.results.problems.append(f"{label}, {what}: {mine} against the hand-written job's {theirs}")

    # -- one round of every path --

    def round(self, label: str, timed: bool) -> None:
        self.results.load.append(os.getloadavg())
        tag = f"{label}_{uuid.uuid4().hex[:6]}"
        hw_ts = self.insert_pair(label, tag, timed, timestamp=True)
        if self.args.plain:
            drop_table(self.pg, self.insert_pair(label, tag, timed, timestamp=False))
        self.upsert(label, tag, timed, hw_ts)
        drop_table(self.pg, hw_ts)
        self.source_pair(label, tag, timed)
        self.file_sinks(label, tag, timed)

    def insert_pair(self, label: str, tag: str, timed: bool, timestamp: bool) -> str:
        """The hand-written append, then JdbcSink insert, from the same topic; returns the
        hand-written job's table (kept for the upsert's check)."""
        stack, pg, args = self.stack, self.pg, self.args
        kind, topic = ("ts", self.topic_ts) if timestamp else ("plain", self.topic_plain)
        hw_path, sink_path = (HW_TS, SINK_TS) if timestamp else (HW_PLAIN, SINK_PLAIN)
        hw_table, sink_table = f"hw_{kind}_{tag}", f"sink_{kind}_{tag}"
        seconds = handwritten_append(
            stack.spark, stack.bootstrap, topic, args.partitions, pg, hw_table, timestamp
        )
        self.record(hw_path, timed, label, seconds, row_count(pg, hw_table), None)
        name = f"bench-jdbc-sink-{kind}-{tag}".replace("_", "-")
        run = run_connector(
            stack,
            name,
            jdbc_sink_config(pg, topic, sink_table, args.tasks, "insert"),
            sink_done(stack, name, topic, args.partitions, args.records),
        )
        self.record(sink_path, timed, label, run.seconds, row_count(pg, sink_table), run)
        self.compare(
            label, sink_path, table_summary(pg, sink_table, timestamp), table_summary(pg, hw_table, timestamp)
        )
        drop_table(pg, sink_table)
        return hw_table

    def upsert(self, label: str, tag: str, timed: bool, hw_table: str) -> None:
        stack, pg, args = self.stack, self.pg, self.args
        table, name = f"upsert_{tag}", f"bench-jdbc-upsert-{tag}".replace("_", "-")
        run = run_connector(
            stack,
            name,
            jdbc_sink_config(pg, self.topic_ts, table, args.tasks, "upsert"),
            sink_done(stack, name, self.topic_ts, args.partitions, args.records),
        )
        self.record(UPSERT, timed, label, run.seconds, row_count(pg, table), run)
        self.compare(label, UPSERT, table_summary(pg, table, True), table_summary(pg, hw_table, True))
        drop_table(pg, table)

    def source_pair(self, label: str, tag: str, timed: bool) -> None:
        stack, pg, args = self.stack, self.pg, self.args
        bootstrap, partitions, records = stack.bootstrap, args.partitions, args.records
        table = f"src_{tag}"
        create_source_table(pg, table, records)
        hw_topic = f"bench-jdbc-hw-out-{tag}"
        create_topic(stack.admin, hw_topic, partitions)
        seconds = handwritten_jdbc_to_kafka(stack.spark, pg, table, bootstrap, hw_topic)
        self.record(HW_SOURCE, timed, label, seconds, topic_end_total(bootstrap, hw_topic, partitions), None)
        hw_envelopes = f"bench-jdbc-hw-env-{tag}"
        create_topic(stack.admin, hw_envelopes, partitions)
        seconds = handwritten_jdbc_to_kafka(stack.spark, pg, table, bootstrap, hw_envelopes, envelope=True)
        found = topic_end_total(bootstrap, hw_envelopes, partitions)
        self.record(HW_SOURCE_ENVELOPE, timed, label, seconds, found, None)
        prefix = f"bench-jdbc-out-{tag}-"
        create_topic(stack.admin, prefix + table, partitions)
        name = f"bench-jdbc-source-{tag}".replace("_", "-")
        run = run_connector(
            stack, name, jdbc_source_config(pg, table, prefix), source_done(stack, name, table, records)
        )
        found = topic_end_total(bootstrap, prefix + table, partitions)
        self.record(SOURCE, timed, label, run.seconds, found, run)
        sizes = self.results.sizes
        if "JdbcSource record" not in sizes:
            sizes["JdbcSource record"] = len(first_value(bootstrap, prefix + table, partitions))
            sizes["hand-written JDBC → Kafka record"] = len(first_value(bootstrap, hw_topic, partitions))
            sizes["hand-written JDBC → Kafka envelope"] = len(
                first_value(bootstrap, hw_envelopes, partitions)
            )
        drop_table(pg, table)

    def file_sinks(self, label: str, tag: str, timed: bool) -> None:
        stack, args = self.stack, self.args
        for path_name, topic, typed in (
            (FILE_STRING, self.topic_string, False),
            (FILE_TYPED, self.topic_typed, True),
        ):
            kind = "typed" if typed else "string"
            name = f"bench-file-{kind}-{tag}".replace("_", "-")
            path = str(stack.work / f"lake-{kind}-{tag}")
            run = run_connector(
                stack,
                name,
                file_sink_config(topic, path, args.tasks, typed),
                sink_done(stack, name, topic, args.partitions, args.records),
            )
            self.record(path_name, timed, label, run.seconds, stack.spark.read.parquet(path).count(), run)


def git(*argv: str) -> str:
    done = subprocess.run(["git", *argv], cwd=repo_root(), capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2, help="tasks.max of the sink connectors")
    parser.add_argument(
        "--no-plain", dest="plain", action="store_false", help="leave out the topic without a timestamp"
    )
    parser.add_argument("--report", type=Path, help="write the markdown report here")
    args = parser.parse_args()
    began = time.time()
    with running_stack("sluiceway-bench-jdbc-") as stack:
        register(stack.spark)
        pg = start_postgres(stack.work / "logs")
        try:
            version = str(pg.execute("SHOW server_version")[0][0])
            bench = Bench(stack, pg, args)
            bench.produce_inputs()
            bench.round("warm", timed=False)
            for run in range(args.runs):
                bench.round(f"run{run + 1}", timed=True)
            bench.results.load.append(os.getloadavg())
        finally:
            pg.stop()
        print(f"logs: {stack.work / 'logs'}")
    report = render(args, bench.results, version, git("rev-parse", "--short", "HEAD"), began, time.time())
    print(report)
    if args.report:
        args.report.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
