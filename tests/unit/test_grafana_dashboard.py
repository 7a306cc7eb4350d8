"""deploy/grafana/sluiceway-dashboard.json against the code: a dashboard Grafana can import (unique
panel ids, panels on the 24-column grid without overlaps, every query on the `${datasource}`
variable), whose PromQL names only metrics our code registers, with label names those metrics
carry. The metrics come from the registries of a fresh ControlPlaneMetrics and ExecutorMetrics, so
renaming or removing a metric in the code fails here until the dashboard follows."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from sluiceway_executor.task_metrics import ExecutorMetrics
from sluiceway_server.metrics import ControlPlaneMetrics

ROOT: Final = Path(__file__).resolve().parents[2]
DASHBOARD: Final = ROOT / "deploy" / "grafana" / "sluiceway-dashboard.json"
DATASOURCE: Final = {"type": "prometheus", "uid": "${datasource}"}
GRID_COLUMNS: Final = 24

# The series names a scrape shows for each metric type, after the family's own name.
SUFFIXES: Final[Mapping[str, tuple[str, ...]]] = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}
# Labels Prometheus adds to every scraped series, and the bucket bound of histogram series.
TARGET_LABELS: Final = frozenset({"instance", "job"})
BUCKET_LABEL: Final = "le"
# The PromQL functions and aggregations the dashboard may call; anything else followed by `(` is a
# typo or a function this test does not know yet.
FUNCTIONS: Final = frozenset(
    {
        "sum",
        "max",
        "min",
        "avg",
        "count",
        "topk",
        "rate",
        "irate",
        "increase",
        "delta",
        "histogram_quantile",
        "clamp_min",
        "time",
    }
)
LABEL_VALUES: Final = re.compile(r"label_values\((?P<selector>.*),\s*(?P<label>\w+)\s*\)")
KEYWORDS: Final = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
OPERATOR_WORDS: Final = frozenset({"and", "or", "unless", "bool", "offset"})
TOKEN: Final = re.compile(
    r"""(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')"""
    r"|(?P<range>\[[^\]]*\])"
    r"|(?P<variable>\$\{?\w+\}?)"
    r"|(?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^=<>,(){}])"
    r"|(?P<space>\s+)"
)


@dataclass(frozen=True)
class Used:
    """What one PromQL expression names."""

    metrics: frozenset[str]
    labels: frozenset[str]


def tokens(expr: str) -> Iterator[tuple[str, str]]:
    position = 0
    while position < len(expr):
        match = TOKEN.match(expr, position)
        assert match is not None, f"cannot read {expr[position:]!r} in {expr!r}"
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind != "space":
            yield kind, match.group()


def names_in(expr: str) -> Used:
    """The metric names and label names in ``expr``: a name inside `{...}` or in the parentheses after
    by/without/on/ignoring is a label, a name before `(` (or before `by` and the like) a function,
    anything else a metric. Grafana's `label_values(selector, label)` names a label second."""
    variable_query = LABEL_VALUES.fullmatch(expr.strip())
    if variable_query is not None:
        inner = names_in(variable_query["selector"])
        return Used(inner.metrics, inner.labels | {variable_query["label"]})
    metrics: set[str] = set()
    labels: set[str] = set()
    listed = list(tokens(expr))
    in_braces = False
    in_label_list = False
    for index, (kind, text) in enumerate(listed):
        following = listed[index + 1][1] if index + 1 < len(listed) else ""
        if text == "{":
            in_braces = True
        elif text == "}":
            in_braces = False
        elif text == ")" and in_label_list:
            in_label_list = False
        elif kind != "name":
            continue
        elif in_braces or in_label_list:
            labels.add(text)
        elif text in KEYWORDS:
            assert following == "(", f"{text} without its label list in {expr!r}"
            in_label_list = True
        elif following == "(" or following in KEYWORDS:  # `sum by (...) (...)` too
            assert text in FUNCTIONS, f"unknown function {text!r} in {expr!r}"
        elif text not in OPERATOR_WORDS:
            metrics.add(text)
    return Used(frozenset(metrics), frozenset(labels))


def registered(registries: list[CollectorRegistry]) -> dict[str, frozenset[str]]:
    """Every series name the registries expose, with the label names of its metric."""
    found: dict[str, frozenset[str]] = {}
    for registry in registries:
        # The registry lists its collectors only privately; our metrics are all prometheus-client
        # instruments, whose label names are likewise only on the instrument.
        for collector in list(registry._collector_to_names):
            assert isinstance(collector, MetricWrapperBase), collector
            labels = frozenset(collector._labelnames)
            for family in collector.describe():
                for suffix in SUFFIXES[family.type]:
                    extra = {BUCKET_LABEL} if suffix == "_bucket" else set()
                    found[family.name + suffix] = labels | extra
    return found


@pytest.fixture(scope="module")
def metrics() -> dict[str, frozenset[str]]:
    return registered([ControlPlaneMetrics().registry, ExecutorMetrics("e-1", "0.0.0").registry])


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def all_panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Top-level panels and those inside collapsed rows."""
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def queries(dashboard: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable."""
    found = [
        (f"panel {panel['title']!r} target {target['refId']}", target["expr"])
        for panel in all_panels(dashboard)
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            found.append(
                (f"variable {variable['name']}", query["query"] if isinstance(query, dict) else query)
            )
    return found


def test_the_extractor_reads_the_dashboards_kind_of_query() -> None:
    used = names_in(
        'histogram_quantile(0.99, sum by (phase, le) (rate(a_bucket{connector=~"$connector", x!="}"}'
        "[$__rate_interval]))) / on (job) b_total > 0"
    )
    assert used.metrics == {"a_bucket", "b_total"}
    assert used.labels == {"phase", "le", "connector", "x", "job"}
    assert names_in('label_values(c_total{a=~"$a"}, task)') == Used(
        frozenset({"c_total"}), frozenset({"a", "task"})
    )
    with pytest.raises(AssertionError, match="unknown function"):
        names_in("rates(c_total[5m])")


def test_it_is_a_dashboard_grafana_can_import(dashboard: dict[str, Any]) -> None:
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["title"] and dashboard["uid"]
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("connector", "task"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE
        assert variables[name]["definition"].startswith("label_values(")

    panels = all_panels(dashboard)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    cells: dict[tuple[int, int], str] = {}
    for panel in panels:
        grid = panel["gridPos"]
        x, y, w, h = (grid[key] for key in ("x", "y", "w", "h"))
        assert all(isinstance(v, int) for v in (x, y, w, h)) and w > 0 and h > 0, panel["title"]
        assert x >= 0 and y >= 0 and x + w <= GRID_COLUMNS, panel["title"]
        # Grafana would move overlapping panels itself, so the layout shown would not be this one.
        for cell in ((column, row) for column in range(x, x + w) for row in range(y, y + h)):
            assert cell not in cells, f"{panel['title']!r} overlaps {cells[cell]!r}"
            cells[cell] = panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_every_query_names_metrics_and_labels_the_code_registers(
    dashboard: dict[str, Any], metrics: dict[str, frozenset[str]]
) -> None:
    assert "sluiceway_task_records_read_total" in metrics  # the registries were read
    for where, expr in queries(dashboard):
        used = names_in(expr)
        assert used.metrics, f"{where}: no metric in {expr!r}"
        unknown = used.metrics - metrics.keys()
        assert not unknown, f"{where}: {sorted(unknown)} not registered by the code ({expr!r})"
        allowed = TARGET_LABELS.union(*(metrics[name] for name in used.metrics))
        stray = used.labels - allowed
        assert not stray, f"{where}: labels {sorted(stray)} are on none of {sorted(used.metrics)}"


def test_every_task_metric_of_the_executor_is_on_the_dashboard(
    dashboard: dict[str, Any], metrics: dict[str, frozenset[str]]
) -> None:
    """A metric added to task_metrics.py shows up here until a panel shows it."""
    used = set().union(*(names_in(expr).metrics for _, expr in queries(dashboard)))
    families = {
        name.removesuffix(suffix)
        for name in used
        for suffix in ("_total", "_bucket", "_sum", "_count")
        if name.endswith(suffix)
    } | used
    executor_metrics = {
        family.name
        for collector in ExecutorMetrics("e-1", "0.0.0").registry._collector_to_names
        if isinstance(collector, MetricWrapperBase)
        for family in collector.describe()
    }
    missing = {
        name for name in executor_metrics if name != "sluiceway_executor_info" and name not in families
    }
    assert not missing, f"executor metrics on no panel: {sorted(missing)}"
