"""What the executor's Spark-side counts cost a sink (issue 35): `bench_pipelines.py --metrics-cost`.

The sink measurement of bench_pipelines.py (SparkFileSink, Parquet, from one topic read again by
every run), with the worker setting `metrics.task.counts.enable` on and off in turns. The setting
is read when an executor starts, so each measurement starts a new executor with it
(`SLUICEWAY_METRICS_TASK_COUNTS_ENABLE`), runs the sink once untimed (the new executor's first
Spark jobs) and then once timed; the script's first sink run, before all of them, is untimed too.
Rounds alternate which setting goes first, so a drift of the machine's speed during the script
falls on both alike.

Every run is checked: the lake holds every record (bench_pipelines.sink_run), and the executor's
/metrics count every record read and written, with the bytes read above 0 when counting is on and
at 0 when it is off, which shows the setting took effect."""

from __future__ import annotations

import statistics
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from bench_stack import Stack, wait
from bench_steps import ConnectorSteps

COUNTS_VARIABLE = "SLUICEWAY_METRICS_TASK_COUNTS_ENABLE"
# A sink run: (connector name, lake path, check made before the connector is deleted) -> its
# seconds and the steps the executor logged for it.
SinkRun = Callable[[str, str, Callable[[str], None]], tuple[float, ConnectorSteps]]


@dataclass
class Measured:
    """One setting's timed runs: records/s from the create call to the committed end, and the
    seconds of the write step (the Spark job) of the busiest task, summed over its batches."""

    counting: bool
    rates: list[float] = field(default_factory=list)
    write_seconds: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"SparkFileSink, counts {'on' if self.counting else 'off'}"


def _task_totals(url: str, connector: str) -> dict[str, float]:
    """The executor's series of ``connector``'s tasks, summed over the tasks, by sample name."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("connector") == connector:
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


def counts_check(stack: Stack, records: int, counting: bool) -> Callable[[str], None]:
    """The check of one run on the executor's /metrics (see the module doc)."""
    url = stack.client.server_info().executors[0].metrics_url

    def check(connector: str) -> None:
        # The executor counts a batch just after its commit, which the run's probe may see first.
        wait(
            lambda: _task_totals(url, connector).get("sluiceway_task_records_read_total") == records,
            30,
            f"{connector}'s records read on the executor's /metrics",
        )
        totals = _task_totals(url, connector)
        written = totals.get("sluiceway_task_records_written_total")
        bytes_read = totals.get("sluiceway_task_bytes_read_total", 0.0)
        if written != records or (bytes_read > 0) != counting:
            raise RuntimeError(
                f"{connector} (counts {'on' if counting else 'off'}): {written} records written and "
                f"{bytes_read} bytes read on the executor's /metrics, for {records} records"
            )

    return check


def measure(stack: Stack, records: int, runs: int, sink_run: SinkRun) -> tuple[Measured, Measured]:
    """``runs`` rounds of one timed run with counting on and one with it off (see the module doc)."""
    on, off = Measured(True), Measured(False)
    # The Spark Connect server's first jobs are slow (JVM warm-up) whichever setting runs them.
    sink_run("bench-cost-first", str(stack.work / "cost-first"), lambda _: None)
    for round_index in range(runs):
        order = (on, off) if round_index % 2 == 0 else (off, on)
        for measured in order:
            setting = "true" if measured.counting else "false"
            stack.restart_executor(
                {COUNTS_VARIABLE: setting, "SLUICEWAY_METRICS_LISTENERS": "http://127.0.0.1:0"}
            )
            check = counts_check(stack, records, measured.counting)
            tag = f"{round_index}-{setting}-{time.monotonic_ns() % 10**8}"
            sink_run(f"bench-cost-warm-{tag}", str(stack.work / f"cost-warm-{tag}"), check)
            seconds, steps = sink_run(f"bench-cost-{tag}", str(stack.work / f"cost-{tag}"), check)
            measured.rates.append(records / seconds)
            measured.write_seconds.append(steps.step_total("write"))
            print(
                f"round {round_index + 1}, counts {setting}: {records / seconds:,.0f} records/s, "
                f"{seconds:.2f} s, write step {measured.write_seconds[-1]:.2f} s",
                flush=True,
            )
    return on, off


def _spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def render(on: Measured, off: Measured, command: str, records: int) -> str:
    """The report: each setting's throughput, the ratios of on to off per round, and the cost."""
    paired = [a / b for a, b in zip(on.rates, off.rates, strict=True)]
    write_paired = [b / a for a, b in zip(on.write_seconds, off.write_seconds, strict=True)]
    low, mid, high = _spread(paired)
    w_low, w_mid, w_high = _spread(write_paired)
    rows = []
    for measured in (on, off):
        r_low, r_mid, r_high = _spread(measured.rates)
        s_low, s_mid, s_high = _spread(measured.write_seconds)
        rows.append(
            f"| {measured.name} | {r_low:,.0f} | {r_mid:,.0f} | {r_high:,.0f} | "
            f"{s_low:.2f} / {s_mid:.2f} / {s_high:.2f} |"
        )
    medians = statistics.median(on.rates) / statistics.median(off.rates)
    lines = [
        "### Cost of the Spark-side counts (metrics.task.counts.enable)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {records:,} records, "
        f"{len(on.rates)} timed runs with each setting, each after a new executor and one untimed run.",
        "",
        "```sh",
        command,
        "```",
        "",
        "| path | min records/s | median | max | write step, busiest task (s): min / median / max |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "| per round, counts on against off | min | median | max |",
        "|---|---|---|---|",
        f"| throughput on / off | {low:.3f} | {mid:.3f} | {high:.3f} |",
        f"| write step seconds off / on | {w_low:.3f} | {w_mid:.3f} | {w_high:.3f} |",
        "",
        f"Cost (1 - on/off): {1 - mid:+.1%} by the median of the rounds' ratios, {1 - medians:+.1%} by "
        f"the ratio of the medians, {1 - w_mid:+.1%} in the write step alone (median of the rounds); "
        f"the rounds' ratios of throughput range over {high - low:.1%}.",
        "",
    ]
    return "\n".join(lines)
