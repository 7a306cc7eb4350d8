"""bench_jdbc.py's results and their markdown report."""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Final

from bench_jdbc_paths import Timed
from bench_pipelines import Series

# Each path's name in the tables, in the order they run in a round.
HW_TS: Final = "hand-written append (with timestamp)"
SINK_TS: Final = "JdbcSink insert (with timestamp)"
HW_PLAIN: Final = "hand-written append (no timestamp)"
SINK_PLAIN: Final = "JdbcSink insert (no timestamp)"
UPSERT: Final = "JdbcSink upsert (with timestamp)"
HW_SOURCE: Final = "hand-written JDBC read → sluiceway-kafka"
HW_SOURCE_ENVELOPE: Final = "hand-written JDBC read → sluiceway-kafka, envelopes"
SOURCE: Final = "JdbcSource (incrementing)"
FILE_STRING: Final = "SparkFileSink, DataGen string records"
FILE_TYPED: Final = "SparkFileSink, DataGen typed envelopes"
ORDER: Final = (
    HW_TS,
    SINK_TS,
    HW_PLAIN,
    SINK_PLAIN,
    UPSERT,
    HW_SOURCE,
    HW_SOURCE_ENVELOPE,
    SOURCE,
    FILE_STRING,
    FILE_TYPED,
)

# (figure, product, baseline, goal on the median or None)
RATIOS: Final = (
    ("JdbcSink insert / hand-written append, with timestamp", SINK_TS, HW_TS, 0.8),
    ("JdbcSink insert / hand-written append, no timestamp", SINK_PLAIN, HW_PLAIN, 0.8),
    ("JdbcSink upsert / hand-written *append* (not like for like)", UPSERT, HW_TS, None),
    ("JdbcSource / hand-written JDBC read → Kafka, envelopes (same format)", SOURCE, HW_SOURCE_ENVELOPE, 0.8),
    (
        "JdbcSource / hand-written JDBC read → Kafka, to_json only (6 times smaller records)",
        SOURCE,
        HW_SOURCE,
        None,
    ),
    ("SparkFileSink typed / string (same record count)", FILE_TYPED, FILE_STRING, None),
)


@dataclass
class Results:
    rates: dict[str, Series] = field(default_factory=dict)
    runs: dict[str, list[Timed]] = field(default_factory=dict)
    counts: dict[str, list[int]] = field(default_factory=dict)
    # Count mismatches, task errors and tables that disagree with the hand-written job's, warm-up
    # included; `checks` counts every check made.
    problems: list[str] = field(default_factory=list)
    checks: int = 0
    # os.getloadavg() at the start of each round and at the end.
    load: list[tuple[float, float, float]] = field(default_factory=list)
    # Bytes of one record's value, per kind of record.
    sizes: dict[str, int] = field(default_factory=dict)


def _ratios(results: Results, product: str, baseline: str) -> list[float] | None:
    if product not in results.rates or baseline not in results.rates:
        return None
    pairs = zip(results.rates[product].rates, results.rates[baseline].rates, strict=True)
    return [p / b for p, b in pairs]


def _met(values: list[float], goal: float | None) -> str:
    if goal is None:
        return "—"
    median = statistics.median(values)
    if median >= goal:
        low = min(values)
        return "yes" if low >= goal else f"yes (median; the lowest run {low:.2f})"
    short = goal - median
    return f"**no**: median {median:.2f}, {short:.2f} short ({short / goal:.0%} of the goal)"


def _time_rows(path: str, runs: list[Timed]) -> list[str]:
    rows = []
    for index, run in enumerate(runs):
        start_up = max(run.steps.started, default=run.created) - run.created
        ended = run.last_batch_ended
        steps = " | ".join(f"{run.steps.step_total(step):.2f}" for step in ("plan", "write", "commit"))
        rows.append(
            f"| {path} {index + 1} | {run.seconds:.2f} | "
            f"{'—' if ended is None else f'{ended:.2f}'} | {start_up:.2f} | "
            f"{run.steps.batches_per_task()} | {steps} | {len(run.errors)} |"
        )
    return rows


def render(
    args: argparse.Namespace, results: Results, pg_version: str, commit: str, began: float, ended: float
) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(began))
    minutes = (ended - began) / 60
    loads = [one for one, _, _ in results.load]
    command = (
        f".venv/bin/python bench/bench_jdbc.py --records {args.records} --runs {args.runs} "
        f"--partitions {args.partitions} --tasks {args.tasks}"
        + ("" if args.plain else " --no-plain")
        + " --report FILE"
    )
    lines = [
        "# Typed records and JDBC",
        "",
        f"Run: {stamp} ({minutes:.0f} min in all), commit {commit}, {platform.machine()}, Python "
        f"{platform.python_version()}; {args.records:,} records, topics of {args.partitions} partitions, "
        f"sinks with tasks.max={args.tasks}, {args.runs} timed runs of each path after one untimed "
        "round of every path. Broker: Tansu (memory), Spark Connect local[2], one control plane, one "
        f"executor, PostgreSQL {pg_version} (the tests' throwaway server: fsync and synchronous_commit "
        "off), all on this machine: 2 cores, shared with other processes.",
        "",
        "1-minute load average at the start of each round (the warm-up first) and at the end: "
        + ", ".join(f"{load:.1f}" for load in loads)
        + ". On 2 cores, a load above about 2 means the benchmark shared the CPU with others.",
        "",
        "```sh",
        command,
        "```",
        "",
        "What is compared. Sinks: each run is a new connector (default settings but `table.name.format`,",
        "a fresh table per run) timed from the create call until its group committed the topic's end;",
        "the hand-written job reads the same topic once with `sluiceway-kafka`, takes the payload out",
        "with from_json (decimal from its base64 by conv/unbase64, timestamp by timestamp_millis) and",
        "appends with Spark's JDBC writer at its defaults (batchsize 1000, no reWriteBatchedInserts;",
        "JdbcSink sends 3000 rows a round trip with reWriteBatchedInserts=true). Source: JdbcSource",
        "writes JsonConverter envelopes (the schema in every record); one hand-written job writes",
        "the same envelope around to_json(struct(*)), the goal's baseline, the other",
        "to_json(struct(*)) only (see the record sizes); all into topics made beforehand with the",
        "same partitions. Each round runs the baselines, then the product, path after path.",
        "",
        "### Against the goals (per run: the product's run against the baseline's of the same round)",
        "",
        "| figure | min | median | max | goal (median) | met? |",
        "|---|---|---|---|---|---|",
    ]
    for figure, product, baseline, goal in RATIOS:
        values = _ratios(results, product, baseline)
        if values is None:
            continue
        goal_text = "—" if goal is None else f"≥ {goal}"
        lines.append(
            f"| {figure} | {min(values):.2f} | {statistics.median(values):.2f} | {max(values):.2f} | "
            f"{goal_text} | {_met(values, goal)} |"
        )
    lines += [
        "",
        "### Throughput (records or rows/s)",
        "",
        "| path | min | median | max |",
        "|---|---|---|---|",
    ]
    for path in ORDER:
        if path in results.rates:
            low, mid, high = results.rates[path].summary()
            lines.append(f"| {path} | {low:,.0f} | {mid:,.0f} | {high:,.0f} |")
    lines += [
        "",
        "### Record counts checked",
        "",
        f"Every run's output is counted (rows in the table, records in the topic, rows in the lake); "
        f"expected {args.records:,} each. The product's tables are also compared with the hand-written "
        "job's of the same round by count, distinct ids, sums of quantity and amount, count of active, "
        "min and max of name and created_at. "
        f"{results.checks} checks made, the warm-up's included; "
        + ("all passed." if not results.problems else f"{len(results.problems)} failed (listed below)."),
        "",
        "| path | found, each timed run |",
        "|---|---|",
    ]
    for path in ORDER:
        if path in results.counts:
            lines.append(f"| {path} | {', '.join(f'{n:,}' for n in results.counts[path])} |")
    if results.problems:
        lines += ["", "Failed checks:", ""] + [f"- {problem}" for problem in results.problems]
    lines += [
        "",
        "### Record sizes (bytes of one value)",
        "",
        "| records | bytes |",
        "|---|---|",
        *[f"| {kind} | {size:,} |" for kind, size in results.sizes.items()],
        "",
        "### Where a product run's time went (seconds)",
        "",
        "Timed: create call → the probe saw the work committed. Last batch: create call → the end of",
        "the last batch in the executor's log. Start-up: create call → every task's run began. The",
        "steps are the busiest task's, summed over its batches (plan: a sink's offset ranges; write:",
        "the batch's Spark jobs and, for JdbcSink, its SQL; commit: the offsets). Task errors: those",
        "the connector's tasks reported during the run (a failed batch, then an automatic restart).",
        "",
        "| run | timed | last batch | start-up | batches per task | plan | write | commit | task errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in ORDER:
        lines += _time_rows(path, results.runs.get(path, []))
    lines.append("")
    return "\n".join(lines)
