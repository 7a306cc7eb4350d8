"""What a process and the processes it started use, read from Linux's /proc: the peak resident memory
of the tree, and the CPU time it spent. The benchmarks size the executor and the Spark Connect server
with these (deploy/README.md's Sizing)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it that is alive now."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def peak_rss_mib(pid: int) -> float:
    """The sum of the peak resident memory (VmHWM) of ``pid`` and its descendants alive now: an upper
    bound of the tree's own peak, since the processes need not peak at once."""
    total_kib = 0
    for member in descendants(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total_kib += int(line.split()[1])
    return total_kib / 1024


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) spent so far by ``pid`` and its live descendants, and by the
    children each of them has waited for: a Python worker that Spark's daemon started and reaped is
    counted in the daemon's share."""
    ticks = 0
    for member in descendants(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: utime, stime, cutime, cstime are fields 14 to 17 of the whole line.
        ticks += sum(int(value) for value in fields[11:15])
    return ticks / _TICKS_PER_SECOND


def cpu_snapshot(pids: Mapping[str, int]) -> dict[str, float]:
    """``cpu_seconds`` of each named process tree now."""
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def cpu_since(before: Mapping[str, float], pids: Mapping[str, int]) -> dict[str, float]:
    """CPU seconds each named tree spent since ``before`` (a ``cpu_snapshot`` of the same names)."""
    return {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
