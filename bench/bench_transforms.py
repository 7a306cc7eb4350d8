"""What a chain of transforms costs a sink: bench_pipelines' sink (SparkFileSink, Parquet, from a
topic of N 100-byte DataGen JSON records) with the values typed by a declared `value.schema`, run
with and without three transforms (InsertField$Value of a static field, Cast$Value of `seq` to
string, and a Sql `where` every record passes), alternately in the same stack. The figure is the
chained runs' throughput over the plain runs' of the same round; counts are checked every run.

    .venv/bin/python bench/bench_transforms.py --records 1000000 --runs 3 [--report FILE]
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import time
import uuid
from pathlib import Path

from bench_pipelines import Series, create_topic, group_reached, produce_datagen, topic_end_total
from bench_stack import Stack, running_stack, wait
from sluiceway_executor.datasources.registry import register

TYPED = {
    "value.converter": "JsonConverter",
    "value.converter.schemas.enable": "false",
    # The lake writes each batch under task=N, so the value's own "task" field is left out.
    "value.schema": "seq BIGINT, ts BIGINT, payload STRING",
}
CHAIN = {
    "transforms": "origin,seqText,keepAll",
    "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.origin.static.field": "origin",
    "transforms.origin.static.value": "bench",
    "transforms.seqText.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.seqText.spec": "seq:string",
    "transforms.keepAll.type": "Sql",
    "transforms.keepAll.where": "value.ts > 0",
}


def sink_seconds(stack: Stack, args: argparse.Namespace, topic: str, chained: bool) -> float:
    name = f"bench-smt-{'chain' if chained else 'plain'}-{uuid.uuid4().hex[:6]}"
    path = str(stack.work / name)
    started = time.perf_counter()
    stack.client.create_connector(
        name,
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": path,
            "format": "parquet",
            "tasks.max": str(args.tasks),
            **TYPED,
            **(CHAIN if chained else {}),
        },
    )
    done = functools.partial(
        group_reached, stack.admin, f"connect-{name}", topic, args.partitions, args.records
    )
    wait(done, 900, name, poll=0.02)
    seconds = time.perf_counter() - started
    stack.client.delete_connector(name)
    lake = stack.spark.read.parquet(path)
    written = lake.count()
    if written != args.records:
        raise RuntimeError(f"{name} wrote {written} records, expected {args.records}")
    if chained and lake.filter("origin = 'bench'").count() != args.records:
        raise RuntimeError(f"{name}: the chain's field is missing from some rows")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--report", type=Path)
    args = parser.parse_args()
    began = time.time()
    plain, chain = Series("SparkFileSink, typed"), Series("SparkFileSink, typed, 3 transforms")
    ratios: list[float] = []
    loads: list[float] = []
    with running_stack("sluiceway-bench-smt-") as stack:
        register(stack.spark)
        topic = f"bench-smt-{uuid.uuid4().hex[:6]}"
        create_topic(stack.admin, topic, args.partitions)
        produce_datagen(stack.bootstrap, topic, args.records, args.partitions)
        assert topic_end_total(stack.bootstrap, topic, args.partitions) == args.records
        sink_seconds(stack, args, topic, chained=False)
        sink_seconds(stack, args, topic, chained=True)
        for run in range(args.runs):
            loads.append(os.getloadavg()[0])
            # Alternate which goes first, so neither always follows the other.
            order = (False, True) if run % 2 == 0 else (True, False)
            seconds = {chained: sink_seconds(stack, args, topic, chained) for chained in order}
            plain.add(args.records, seconds[False])
            chain.add(args.records, seconds[True])
            ratios.append(seconds[False] / seconds[True])
    lines = [
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(began))}, {platform.machine()}, "
        f"{args.records:,} records of 100 bytes, {args.partitions} partitions, tasks.max={args.tasks}, "
        f"{args.runs} timed runs of each after one untimed; 1-minute load at each round: "
        + ", ".join(f"{x:.1f}" for x in loads)
        + ".",
        "",
        "| path | min | median | max |",
        "|---|---|---|---|",
        *(
            f"| {s.name} (records/s) | " + " | ".join(f"{x:,.0f}" for x in s.summary()) + " |"
            for s in (plain, chain)
        ),
        f"| with transforms / without (per round) | {min(ratios):.2f} | {statistics.median(ratios):.2f} | "
        f"{max(ratios):.2f} |",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.report:
        args.report.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
