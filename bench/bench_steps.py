"""Where a connector's time went, read from the executor's DEBUG log: each batch's line gives its
records and the seconds of its steps (a sink's plan and write, a source's write, and the commit);
each task's "started" line when its run began."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path

_STAMP = r"(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_BATCH = re.compile(
    _STAMP + r" DEBUG \S+ task connectors/(?P<connector>[^/]+)/tasks/(?P<task>\d+) batch \d+: "
    r"(?P<records>\?|\d+) record\(s\), \d+ offset\(s\) in (?P<total>[\d.]+)s \((?P<steps>[^)]*)\)"
)
_STARTED = re.compile(_STAMP + r" INFO \S+ task connectors/(?P<connector>[^/]+)/tasks/\d+ started ")


def _epoch(stamp: str) -> float:
    # The executor logs local time; the benchmark machine runs on UTC.
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.UTC).timestamp()


@dataclass
class Batch:
    ended: float  # epoch seconds
    task: int
    records: int | None
    seconds: float
    steps: dict[str, float]


@dataclass
class ConnectorSteps:
    """The batches of one connector (empty ones left out) and when its tasks' runs started."""

    started: list[float] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)

    def step_total(self, step: str) -> float:
        """The seconds of ``step`` of the busiest task (the tasks run side by side)."""
        per_task: dict[int, float] = {}
        for batch in self.batches:
            per_task[batch.task] = per_task.get(batch.task, 0.0) + batch.steps.get(step, 0.0)
        return max(per_task.values(), default=0.0)

    def batches_per_task(self) -> int:
        counts: dict[int, int] = {}
        for batch in self.batches:
            counts[batch.task] = counts.get(batch.task, 0) + 1
        return max(counts.values(), default=0)


def connector_steps(log: Path, connector: str) -> ConnectorSteps:
    found = ConnectorSteps()
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        started = _STARTED.match(line)
        if started and started["connector"] == connector:
            found.started.append(_epoch(started["at"]))
            continue
        batch = _BATCH.match(line)
        if not batch or batch["connector"] != connector or batch["records"] == "0":
            continue
        steps = {}
        for part in batch["steps"].split(", "):
            name, _, seconds = part.partition(" ")
            steps[name] = float(seconds.rstrip("s"))
        records = None if batch["records"] == "?" else int(batch["records"])
        found.batches.append(
            Batch(_epoch(batch["at"]), int(batch["task"]), records, float(batch["total"]), steps)
        )
    return found
