"""Draws deploy/grafana/dashboard-preview.png: what sluiceway-dashboard.json shows, computed from a
real run. It is not a Grafana screenshot (Grafana is not needed): this script evaluates each
panel's own PromQL, read from the JSON, over its own scrapes, and draws the panels with matplotlib
where the JSON's gridPos puts them.

The run: the embedded broker, a Spark Connect server, one control plane and one executor, each its
own process as in bench/bench_stack.py, with `metrics.listeners` set on both (the executor on port
0; `GetServerInfo` tells its address). A small pipeline is run and deleted first, so the new Spark
Connect server's slow first jobs stay out of the picture. Then a DataGenSource writes to a topic
of four partitions from the start, and a SparkFileSink reading the topic is created `--sink-after`
seconds later, so it starts behind and its lag shows and drains. Both /metrics endpoints are
scraped every second with prometheus-client's text parser for `--seconds` seconds.

The evaluator knows the part of PromQL the dashboard uses (selectors, rate, increase,
histogram_quantile, sum/max/min/avg/count by, comparisons with a number) and simplifies in two
ways: `rate` and `increase` take the samples in the window as they are, without Prometheus'
extrapolation to the window's edges, and `$__rate_interval` is `--rate-interval` (10 s: Grafana
derives it from the scrape interval, here 1 s). `$connector` and `$task` are "All".

    make bench-install   # matplotlib
    .venv/bin/python deploy/grafana/preview.py [--seconds 120] [--sink-after 30] [--out FILE.png]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TypeAlias

from prometheus_client.parser import text_string_to_metric_families

HERE: Final = Path(__file__).resolve().parent
# The benchmarks' stack (bench/bench_stack.py) is the one this script runs.
sys.path.insert(0, str(HERE.parents[1] / "bench"))
DASHBOARD: Final = HERE / "sluiceway-dashboard.json"
# Grafana's dark theme, approximately: page, panel, border, text, grid, and its classic palette.
PAGE, PANEL, BORDER, TEXT, MUTED, GRID = "#111217", "#181b1f", "#2c2f36", "#ccccdc", "#8e8e9e", "#2a2d33"
PALETTE: Final = (
    "#73bf69",
    "#f2cc0c",
    "#5794f2",
    "#ff9830",
    "#f2495c",
    "#b877d9",
    "#8ab8ff",
    "#fade2a",
    "#96d98d",
    "#ff7383",
    "#ca95e5",
    "#ffb357",
)

Labels: TypeAlias = tuple[tuple[str, str], ...]
Vector: TypeAlias = dict[Labels, float]
Snapshot: TypeAlias = dict[tuple[str, Labels], float]


# ---- scraping ---------------------------------------------------------------------------------


def scrape(url: str) -> Snapshot:
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@dataclass
class Scrapes:
    """One snapshot of both endpoints a second, taken on a thread of its own."""

    urls: list[str]
    times: list[float] = field(default_factory=list)
    snapshots: list[Snapshot] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        next_at = time.time()
        while not self._stop.is_set():
            now = time.time()
            merged: Snapshot = {}
            for url in self.urls:
                try:
                    merged.update(scrape(url))
                except OSError as exc:  # an endpoint that is down misses this scrape, as in Prometheus
                    print(f"scrape of {url} failed: {exc}", file=sys.stderr)
            self.times.append(now)
            self.snapshots.append(merged)
            next_at += 1.0
            self._stop.wait(max(0.0, next_at - time.time()))

    @contextmanager
    def running(self) -> Iterator[Scrapes]:
        thread = threading.Thread(target=self.run, name="scrapes", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()


# ---- the part of PromQL the dashboard uses ----------------------------------------------------

_TOKEN: Final = re.compile(
    r"""\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<duration>\d+[smh])(?=\])|(?P<number>\d+(?:\.\d+)?)"""
    r"|(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<op>=~|!~|!=|==|>=|<=|[=<>*/(){}\[\],]))"
)
_AGGREGATIONS: Final = frozenset({"sum", "max", "min", "avg", "count"})
_DURATION_S: Final = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Selector:
    name: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value)
    range_s: float | None


@dataclass(frozen=True)
class Call:
    function: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Aggregate:
    op: str
    by: tuple[str, ...]
    expr: Node


@dataclass(frozen=True)
class Compare:
    op: str
    expr: Node
    number: float


@dataclass(frozen=True)
class Number:
    value: float


Node: TypeAlias = Selector | Call | Aggregate | Compare | Number


class Parser:
    def __init__(self, expr: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position, text = 0, expr.strip()
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.lastgroup is None:
                raise ValueError(f"cannot read {text[position:]!r} of {expr!r}")
            self.tokens.append((match.lastgroup, match.group(match.lastgroup)))
            position = match.end()
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        text = self.peek()
        if expected is not None and text != expected:
            raise ValueError(f"expected {expected!r}, found {text!r} in {self.tokens}")
        self.at += 1
        return text

    def parse(self) -> Node:
        node = self.expr()
        if self.at != len(self.tokens):
            raise ValueError(f"left over: {self.tokens[self.at :]}")
        return node

    def expr(self) -> Node:
        node = self.unary()
        while self.peek() in ("==", "!=", ">", "<", ">=", "<=", "*", "/"):
            op = self.take()
            number = self.unary()
            if not isinstance(number, Number):
                raise ValueError("only comparisons and arithmetic with a number are known here")
            node = Compare(op, node, number.value)
        return node

    def labels(self) -> tuple[str, ...]:
        self.take("(")
        names = []
        while self.peek() != ")":
            names.append(self.take())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return tuple(names)

    def unary(self) -> Node:
        kind, text = self.tokens[self.at]
        if kind == "number":
            self.take()
            return Number(float(text))
        if text == "(":
            self.take()
            node = self.expr()
            self.take(")")
            return node
        self.take()
        if text in _AGGREGATIONS:
            by: tuple[str, ...] = ()
            if self.peek() == "by":
                self.take()
                by = self.labels()
            self.take("(")
            inner = self.expr()
            self.take(")")
            if self.peek() == "by":
                self.take()
                by = self.labels()
            return Aggregate(text, by, inner)
        if self.peek() == "(":
            self.take()
            args = [self.expr()]
            while self.peek() == ",":
                self.take()
                args.append(self.expr())
            self.take(")")
            return Call(text, tuple(args))
        matchers: list[tuple[str, str, str]] = []
        if self.peek() == "{":
            self.take()
            while self.peek() != "}":
                label, op, value = self.take(), self.take(), self.take()
                matchers.append((label, op, json.loads(value)))
                if self.peek() == ",":
                    self.take()
            self.take("}")
        range_s = None
        if self.peek() == "[":
            self.take()
            duration = self.take()
            range_s = float(duration[:-1]) * _DURATION_S[duration[-1]]
            self.take("]")
        return Selector(text, tuple(matchers), range_s)


def _matches(labels: Labels, matchers: Sequence[tuple[str, str, str]]) -> bool:
    named = dict(labels)
    for label, op, value in matchers:
        have = named.get(label, "")
        ok = {
            "=": have == value,
            "!=": have != value,
            "=~": re.fullmatch(value, have) is not None,
            "!~": re.fullmatch(value, have) is None,
        }[op]
        if not ok:
            return False
    return True


def _increase(points: Sequence[float]) -> float:
    """A counter's increase over its points, a drop counted as a reset to zero (as Prometheus does)."""
    total = 0.0
    for before, after in itertools.pairwise(points):
        total += after - before if after >= before else after
    return total


def _quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """histogram_quantile over cumulative (upper bound, count) buckets, interpolating linearly."""
    buckets = sorted(buckets)
    if len(buckets) < 2 or buckets[-1][1] <= 0:
        return math.nan
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):  # in the +Inf bucket: the highest finite bound, as Prometheus answers
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 0)
        lower, below = bound, count
    return lower


@dataclass
class Evaluator:
    scrapes: Scrapes

    def instant(self, node: Node, index: int) -> Vector:
        if isinstance(node, Number):
            return {(): node.value}
        if isinstance(node, Selector):
            if node.range_s is not None:
                raise ValueError(f"a range selector outside rate/increase: {node}")
            return {
                labels: value
                for (name, labels), value in self.scrapes.snapshots[index].items()
                if name == node.name and _matches(labels, node.matchers)
            }
        if isinstance(node, Compare):
            vector = self.instant(node.expr, index)
            if node.op in ("*", "/"):
                return {k: v * node.number if node.op == "*" else v / node.number for k, v in vector.items()}
            keep: Callable[[float], bool] = {
                "==": lambda v: v == node.number,
                "!=": lambda v: v != node.number,
                ">": lambda v: v > node.number,
                "<": lambda v: v < node.number,
                ">=": lambda v: v >= node.number,
                "<=": lambda v: v <= node.number,
            }[node.op]
            return {k: v for k, v in vector.items() if keep(v)}
        if isinstance(node, Aggregate):
            groups: dict[Labels, list[float]] = {}
            for labels, value in self.instant(node.expr, index).items():
                key = tuple((k, v) for k, v in labels if k in node.by)
                groups.setdefault(key, []).append(value)
            reduce: dict[str, Callable[[list[float]], float]] = {
                "sum": sum,
                "max": max,
                "min": min,
                "count": len,
                "avg": lambda values: sum(values) / len(values),
            }
            return {key: float(reduce[node.op](values)) for key, values in groups.items()}
        return self.call(node, index)

    def call(self, node: Call, index: int) -> Vector:
        if node.function in ("rate", "increase"):
            (selector,) = node.args
            assert isinstance(selector, Selector) and selector.range_s is not None, node
            now = self.scrapes.times[index]
            series: dict[Labels, list[tuple[float, float]]] = {}
            first = index
            while first > 0 and self.scrapes.times[first - 1] > now - selector.range_s:
                first -= 1
            for at in range(first, index + 1):
                for (name, labels), value in self.scrapes.snapshots[at].items():
                    if name == selector.name and _matches(labels, selector.matchers):
                        series.setdefault(labels, []).append((self.scrapes.times[at], value))
            found: Vector = {}
            for labels, points in series.items():
                if len(points) < 2:
                    continue
                grown = _increase([value for _, value in points])
                span = points[-1][0] - points[0][0]
                found[labels] = grown if node.function == "increase" else grown / span
            return found
        if node.function == "histogram_quantile":
            q_node, inner = node.args
            assert isinstance(q_node, Number), node
            by_group: dict[Labels, list[tuple[float, float]]] = {}
            for labels, value in self.instant(inner, index).items():
                named = dict(labels)
                key = tuple((k, v) for k, v in labels if k != "le")
                by_group.setdefault(key, []).append((float(named["le"]), value))
            quantiles = {key: _quantile(q_node.value, buckets) for key, buckets in by_group.items()}
            return {key: value for key, value in quantiles.items() if not math.isnan(value)}
        raise ValueError(f"{node.function} is not known to this evaluator")


def substitute(expr: str, rate_interval: str) -> str:
    """The dashboard's variables as this preview sets them: every connector and task."""
    return (
        expr.replace("$__rate_interval", rate_interval)
        .replace('"$connector"', '".*"')
        .replace('"$task"', '".*"')
    )


def legend(template: str, labels: Labels) -> str:
    named = dict(labels)
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: named.get(m.group(1), ""), template) or "value"


# ---- drawing ----------------------------------------------------------------------------------


def _scaled(value: float, unit: str) -> str:
    if unit == "s":
        if value == 0:
            return "0 s"
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.3g} s"
    suffix = {"Bps": "B/s", "reqps": " req/s"}.get(unit, "")
    for factor, prefix in ((1e9, " G"), (1e6, " M"), (1e3, " K")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}{suffix.strip()}"
    return f"{value:.3g}{' ' + suffix.strip() if suffix else ''}"


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]


def evaluate_panel(evaluator: Evaluator, panel: Mapping[str, Any], rate_interval: str) -> list[Series]:
    found: list[Series] = []
    count = len(evaluator.scrapes.times)
    for target in panel["targets"]:
        tree = Parser(substitute(target["expr"], rate_interval)).parse()
        by_labels: dict[Labels, list[float]] = {}
        for index in range(count):
            for labels, value in evaluator.instant(tree, index).items():
                by_labels.setdefault(labels, [math.nan] * count)[index] = value
        for labels in sorted(by_labels):
            found.append(Series(legend(target.get("legendFormat", ""), labels), by_labels[labels]))
    return found


def draw(dashboard: Mapping[str, Any], scrapes: Scrapes, out: Path, rate_interval: str, caption: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    evaluator = Evaluator(scrapes)
    panels = dashboard["panels"]
    grid_rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    header_in, unit_in, width_in = 0.75, 0.27, 16.0
    height_in = header_in + grid_rows * unit_in
    fig = plt.figure(figsize=(width_in, height_in), facecolor=PAGE)
    plt.rcParams.update({"font.size": 7, "text.color": TEXT, "axes.labelcolor": TEXT})

    def box(grid: Mapping[str, int], pad: float = 0.04) -> tuple[float, float, float, float]:
        """Figure coordinates (left, bottom, width, height) of a gridPos, less a gap between panels."""
        left = grid["x"] / 24 + pad / width_in
        top = 1 - (header_in + grid["y"] * unit_in) / height_in - pad / height_in
        width = grid["w"] / 24 - 2 * pad / width_in
        height = grid["h"] * unit_in / height_in - 2 * pad / height_in
        return left, top - height, width, height

    fig.text(0.006, 1 - 0.22 / height_in, dashboard["title"], fontsize=13, weight="bold", va="center")
    variables = "   ".join(
        f"{v.get('label', v['name'])}: {'preview' if v['type'] == 'datasource' else 'All'}"
        for v in dashboard["templating"]["list"]
    )
    fig.text(0.09, 1 - 0.22 / height_in, variables, fontsize=8, color=MUTED, va="center")
    fig.text(0.006, 1 - 0.55 / height_in, caption, fontsize=7.5, color=MUTED, va="center", style="italic")
    times = scrapes.times  # seconds since the epoch; the axis labels them with the local time

    for panel in panels:
        left, bottom, width, height = box(panel["gridPos"], pad=0.03)
        if panel["type"] == "row":
            fig.text(left, bottom + height / 2, panel["title"], fontsize=9.5, weight="bold", va="center")
            continue
        fig.patches.append(
            Rectangle(
                (left, bottom),
                width,
                height,
                transform=fig.transFigure,
                facecolor=PANEL,
                edgecolor=BORDER,
                zorder=-10,
            )
        )
        title_h = 0.2 / height_in
        fig.text(left + 0.004, bottom + height - title_h / 2, panel["title"], fontsize=8, weight="bold")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        series = evaluate_panel(evaluator, panel, rate_interval)
        present = [s for s in series if any(not math.isnan(v) for v in s.values)]
        if panel["type"] == "stat":
            _draw_stat(fig, (left, bottom, width, height - title_h), present, unit)
            continue
        legend_h = (0.14 + 0.13 * math.ceil(len(present) / 3)) / height_in if present else 0
        ax = fig.add_axes(
            (
                left + 0.035,
                bottom + legend_h + 0.2 / height_in,
                width - 0.045,
                height - title_h - legend_h - 0.28 / height_in,
            )
        )
        ax.set_facecolor(PANEL)
        for spine in ax.spines.values():
            spine.set_visible(False)
        ax.tick_params(colors=MUTED, labelsize=6.5, length=0)
        ax.grid(color=GRID, linewidth=0.6)
        ax.xaxis.set_major_formatter(FuncFormatter(_clock))
        ax.xaxis.set_major_locator(MaxNLocator(5, steps=[1, 2, 3, 5, 6, 10]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos, unit=unit: _scaled(v, unit)))
        ax.set_xlim(times[0], times[-1])
        if not present:
            ax.set_ylim(0, 1)
            ax.text(
                0.5, 0.5, "No data", transform=ax.transAxes, ha="center", va="center", color=MUTED, fontsize=9
            )
            continue
        for number, one in enumerate(present):
            color = PALETTE[number % len(PALETTE)]
            ax.plot(times, one.values, color=color, linewidth=1.1, label=one.name)
            ax.fill_between(times, one.values, color=color, alpha=0.08, linewidth=0)
        top = max(max(v for v in s.values if not math.isnan(v)) for s in present)
        ax.set_ylim(0, top * 1.12 if top > 0 else 1)
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(0, -0.12),
            ncol=3,
            frameon=False,
            fontsize=6.5,
            handlelength=1.2,
            labelcolor=TEXT,
            borderaxespad=0,
        )
    fig.savefig(out, dpi=72, facecolor=PAGE)
    plt.close(fig)


def _clock(value: float, _position: float) -> str:
    return datetime.fromtimestamp(value).strftime("%H:%M:%S")


def _draw_stat(fig: Any, where: tuple[float, float, float, float], series: list[Series], unit: str) -> None:
    """A stat panel: each series' last value, large, over its sparkline."""
    left, bottom, width, height = where
    if not series:
        fig.text(left + width / 2, bottom + height / 2, "No data", ha="center", va="center", color=MUTED)
        return
    slot = width / len(series)
    for number, one in enumerate(series):
        last = next(v for v in reversed(one.values) if not math.isnan(v))
        color = PALETTE[0]
        ax = fig.add_axes((left + number * slot + 0.004, bottom + 0.004, slot - 0.008, height * 0.45))
        ax.axis("off")
        ax.fill_between(range(len(one.values)), one.values, color=color, alpha=0.18, linewidth=0)
        ax.plot(range(len(one.values)), one.values, color=color, linewidth=1)
        ax.set_ylim(0, max(v for v in one.values if not math.isnan(v)) * 1.3 or 1)
        center = left + number * slot + slot / 2
        fig.text(
            center,
            bottom + height * 0.62,
            _scaled(last, unit),
            fontsize=22,
            weight="bold",
            color=color,
            ha="center",
            va="center",
        )
        fig.text(center, bottom + height * 0.9, one.name, fontsize=7, color=MUTED, ha="center", va="center")


# ---- the run ----------------------------------------------------------------------------------


@dataclass
class Run:
    source_records: float = 0.0
    sink_records: float = 0.0
    started: float = 0.0
    ended: float = 0.0


def _connector_total(url: str, name: str, connector: str) -> float:
    return sum(
        value
        for (metric, labels), value in scrape(url).items()
        if metric == name and ("connector", connector) in labels
    )


def warm_up(client: Any, executor_metrics: str, work: Path, timeout: float) -> None:
    """A small pipeline run to its end and deleted before the scrapes begin: the first jobs of a new
    Spark Connect server (and its Python workers) take tens of seconds, which is not what the
    picture is meant to show."""
    client.create_connector(
        "warm-up-source",
        {"connector.class": "DataGenSource", "topic": "warm-up", "tasks.max": "1", "max.records": "2000"},
    )
    client.create_connector(
        "warm-up-sink",
        {
            "connector.class": "SparkFileSink",
            "topics": "warm-up",
            "path": str(work / "warm-up"),
            "format": "parquet",
            "tasks.max": "1",
        },
    )
    deadline = time.monotonic() + timeout
    while _connector_total(executor_metrics, "sluiceway_task_records_written_total", "warm-up-sink") < 2000:
        if time.monotonic() > deadline:
            raise TimeoutError("the warm-up pipeline did not finish")
        time.sleep(1)
    for name in ("warm-up-source", "warm-up-sink"):
        client.delete_connector(name)
    # Their series leave the executor's metrics with their tasks; the scrapes start after that.
    while any("warm-up" in dict(labels).get("connector", "") for _, labels in scrape(executor_metrics)):
        if time.monotonic() > deadline:
            raise TimeoutError("the warm-up connectors' series did not leave")
        time.sleep(0.5)
    print("warmed up", file=sys.stderr)


def run_stack(args: argparse.Namespace, scrapes_for: Callable[[list[str]], Scrapes]) -> tuple[Scrapes, Run]:
    """Starts the stack (bench/bench_stack.py's, with metrics served by the control plane and the
    executor), runs the pipeline while scraping, and stops everything again."""
    from confluent_kafka.cimpl import NewTopic

    from bench_stack import running_stack
    from sluiceway_server.embedded import free_port

    run = Run()
    plane_metrics = f"http://127.0.0.1:{free_port()}"
    own = Path(tempfile.mkdtemp(prefix="sluiceway-preview-config-")) / "executor.properties"
    own.write_text("metrics.listeners=http://127.0.0.1:0\n")  # port 0: any free one
    with running_stack(
        "sluiceway-preview-", {"metrics.listeners": plane_metrics}, ("--config", str(own))
    ) as stack:
        work, client, executor = stack.work, stack.client, stack.executor
        print(f"work directory and logs: {work}", file=sys.stderr)
        executor_metrics = client.server_info().executors[0].metrics_url
        print(f"scraping {plane_metrics}/metrics and {executor_metrics}", file=sys.stderr)

        warm_up(client, executor_metrics, work, args.warm_up_timeout)
        topic = "orders"
        stack.admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)
        scrapes = scrapes_for([f"{plane_metrics}/metrics", executor_metrics])
        with scrapes.running():
            run.started = time.time()
            time.sleep(3)  # a few scrapes before anything runs
            client.create_connector(
                "datagen",
                {
                    "connector.class": "DataGenSource",
                    "topic": topic,
                    "tasks.max": "2",
                    "records.per.sec": str(args.rate),
                },
            )
            time.sleep(args.sink_after)
            client.create_connector(
                "lake",
                {
                    "connector.class": "SparkFileSink",
                    "topics": topic,
                    "path": str(work / "lake"),
                    "format": "parquet",
                    "tasks.max": "2",
                    "batch.max.records": str(args.sink_batch),
                },
            )
            while time.time() < run.started + args.seconds:
                if executor.process.poll() is not None:
                    raise RuntimeError(f"the executor exited\n{executor.tail()}")
                time.sleep(1)
            run.ended = time.time()
        last = scrapes.snapshots[-1]
        for (name, labels), value in last.items():
            connector = dict(labels).get("connector")
            if name == "sluiceway_task_records_written_total" and connector == "datagen":
                run.source_records += value
            if name == "sluiceway_task_records_written_total" and connector == "lake":
                run.sink_records += value
    return scrapes, run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=120, help="how long to scrape (default 120)")
    parser.add_argument("--sink-after", type=float, default=30, help="when the sink starts (default 30 s)")
    parser.add_argument("--rate", type=float, default=1000, help="records/s of each source task")
    parser.add_argument("--sink-batch", type=int, default=10_000, help="the sink's batch.max.records")
    parser.add_argument("--warm-up-timeout", type=float, default=300, help="seconds (default 300)")
    parser.add_argument("--rate-interval", default="10s", help="what $__rate_interval stands for")
    parser.add_argument("--out", type=Path, default=HERE / "dashboard-preview.png")
    parser.add_argument("--scrapes", type=Path, help="also write the scrapes to this JSON file")
    parser.add_argument("--from-scrapes", type=Path, help="draw from a file --scrapes wrote; run nothing")
    args = parser.parse_args(argv)

    dashboard = json.loads(DASHBOARD.read_text())
    if args.from_scrapes:
        saved = json.loads(args.from_scrapes.read_text())
        scrapes = Scrapes(saved["urls"], saved["times"], [_snapshot(s) for s in saved["snapshots"]])
        run = Run(**saved["run"])
    else:
        scrapes, run = run_stack(args, Scrapes)
        if args.scrapes:
            args.scrapes.write_text(
                json.dumps(
                    {
                        "urls": scrapes.urls,
                        "times": scrapes.times,
                        "snapshots": [
                            [
                                [name, [list(pair) for pair in labels], value]
                                for (name, labels), value in s.items()
                            ]
                            for s in scrapes.snapshots
                        ],
                        "run": vars(run),
                    }
                )
            )
    caption = (
        f"Drawn by deploy/grafana/preview.py, not a Grafana screenshot: the dashboard's own queries "
        f"evaluated over {len(scrapes.times)} one-second scrapes of a real run "
        f"(DataGenSource → Kafka → SparkFileSink; {run.source_records:,.0f} records generated, "
        f"{run.sink_records:,.0f} written to the lake; $__rate_interval = {args.rate_interval})."
    )
    draw(dashboard, scrapes, args.out, args.rate_interval, caption)
    print(f"{args.out}: {args.out.stat().st_size / 1024:.0f} KiB; {caption}")
    return 0


def _snapshot(saved: list[list[Any]]) -> Snapshot:
    return {(name, tuple((k, v) for k, v in labels)): value for name, labels, value in saved}


if __name__ == "__main__":
    sys.exit(main())
