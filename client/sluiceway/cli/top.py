"""`sluiceway connectors top`: every connector's tasks in one table that refreshes in place, with
each task's state, rate, lag and restarts, drawn by rich's Live display.

Each refresh lists the connectors and asks for each one's status, which carries its tasks'
progress (from the leader, see GetConnectorStatus). Written to something that is not a terminal
(a pipe, a file) or with `--output json`, it prints one snapshot and exits."""

from __future__ import annotations

import argparse
import datetime
import time
from typing import Any

from sluiceway.api.v1 import connectors_pb2
from sluiceway.cli import output
from sluiceway.cli.common import Context, UsageError, add_command
from sluiceway.errors import NotFoundError

__all__ = ["add_top_command"]

_HEADERS = ("CONNECTOR", "TASK", "STATE", "RATE", "LAG", "RESTARTS", "WORKER")


def add_top_command(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        group,
        "top",
        "a live table of every connector's tasks: state, records/s, lag, restarts",
        _top,
        description="A live table of every connector's tasks, refreshed in place until Ctrl-C: "
        "state, records per second over the last minute, lag (sinks), restarts on the executor "
        "running the task. Not on a terminal (or with --output json) it prints one snapshot.",
    )
    p.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="seconds between refreshes (default 2)"
    )


def _statuses(ctx: Context) -> list[connectors_pb2.ConnectorStatus]:
    found = []
    for connector in ctx.client.list_connectors():
        try:
            found.append(ctx.client.connector_status(connector.name).raw)
        except NotFoundError:  # deleted between the list and the status
            continue
    return found


def _rows(statuses: list[connectors_pb2.ConnectorStatus]) -> list[list[str]]:
    rows = []
    for status in statuses:
        name = output.short_name(status.name)
        if not status.tasks:
            rows.append([name, "-", output.state_label(status.connector.state), "", "", "", "-"])
        for task in status.tasks:
            rate, lag = output.progress_labels(task)
            restarts = str(task.progress.restarts) if task.HasField("progress") else "-"
            state = output.state_label(task.status.state)
            rows.append([name, str(task.id), state, rate, lag, restarts, task.status.worker_id or "-"])
    return rows


def _as_json(statuses: list[connectors_pb2.ConnectorStatus]) -> list[dict[str, Any]]:
    return [
        {
            "connector": output.short_name(status.name),
            "task": task.id,
            "state": output.state_label(task.status.state),
            "worker": task.status.worker_id,
            **({"progress": output.message_to_json(task.progress)} if task.HasField("progress") else {}),
        }
        for status in statuses
        for task in status.tasks
    ]


def _top(ctx: Context, args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    if args.interval <= 0:
        raise UsageError("--interval must be above 0")
    console = Console(file=ctx.out)

    def table() -> Table:
        statuses = _statuses(ctx)
        rows = _rows(statuses)
        shown = datetime.datetime.now().strftime("%H:%M:%S")
        drawn = Table(
            title=f"{ctx.connected_target} at {shown}: {len(statuses)} connector(s), {len(rows)} task(s)",
            title_justify="left",
            box=None,
            header_style="bold",
        )
        for header in _HEADERS:
            drawn.add_column(header, justify="right" if header in ("RATE", "LAG", "RESTARTS") else "left")
        for row in rows:
            drawn.add_row(*row, style="red" if row[2] == "FAILED" else None)
        return drawn

    if ctx.json:
        output.print_json(_as_json(_statuses(ctx)), ctx.out)
        return 0
    if not console.is_terminal:
        console.print(table())
        return 0
    try:
        with Live(table(), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(args.interval)
                live.update(table(), refresh=True)
    except KeyboardInterrupt:
        return 0
