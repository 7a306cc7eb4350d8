"""`sluiceway connectors ...`: lifecycle, config, tasks and status of connectors."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Mapping

from sluiceway.api.v1 import common_pb2, connectors_pb2
from sluiceway.cli import output
from sluiceway.cli.common import (
    Context,
    UsageError,
    add_command,
    add_config_inputs,
    add_group,
    add_named_config_inputs,
    config_from_inputs,
    named_config_from_inputs,
    read_config_inputs,
)
from sluiceway.cli.top import add_top_command
from sluiceway.cli.waiting import deleting, wait_with_progress
from sluiceway.client import connector_id
from sluiceway.common.traces import summarize_trace

_VIEWS = ("names", "status", "info", "full")
_STATES = ("running", "paused", "stopped")
_ERROR_WIDTH = 100


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "connectors", "create, inspect and operate connectors")

    p = add_command(group, "list", "list connectors", _list)
    p.add_argument("--view", choices=_VIEWS, default="names", help="how much to show (default: names)")
    p.add_argument("--page-size", type=int, default=0, help=argparse.SUPPRESS)

    p = add_command(
        group,
        "create",
        "create a connector",
        _create,
        description="Create a connector from KEY=VALUE entries, a --file, or both (the entries win).\n"
        'NAME may be left out when the file names the connector: Kafka Connect\'s {"name", "config"}\n'
        "body, or a name entry (as in a Kafka Connect standalone .properties file).",
    )
    p.usage = (
        "%(prog)s [NAME] [KEY=VALUE ...] [-f FILE] [--initial-state {running,paused,stopped}]\n"
        "       [--validate-only] [global options]"
    )
    add_named_config_inputs(p)
    p.add_argument(
        "--initial-state",
        choices=_STATES,
        type=str.lower,
        help="KIP-980 state to start in (default: running, or the file's initial_state)",
    )
    p.add_argument("--validate-only", action="store_true", help="check the request; create nothing")

    p = add_command(group, "get", "show a connector: config, tasks and status", _get)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--view", choices=_VIEWS, default="full", help="how much to show (default: full)")

    p = add_command(
        group,
        "config",
        "show a connector's config, or replace it (creating the connector if missing)",
        _config,
    )
    p.add_argument("name", metavar="NAME")
    add_config_inputs(p, pairs_help="the new config; without any, the current config is shown")
    p.add_argument(
        "--etag", help="fail (ABORTED) instead of writing if the connector changed since this etag was read"
    )

    p = add_command(
        group,
        "patch",
        "set and remove single config keys",
        _patch,
        description="Set and remove single config keys. In a JSON --file, a null value removes its key.",
    )
    p.add_argument("name", metavar="NAME")
    add_config_inputs(p, pairs_help="keys to set")
    p.add_argument("--remove", action="extend", nargs="+", default=[], metavar="KEY", help="keys to remove")
    p.add_argument(
        "--etag", help="fail (ABORTED) instead of writing if the connector changed since this etag was read"
    )

    for verb, help_text, handler in (
        ("pause", "pause a connector and its tasks", _pause),
        ("resume", "resume a paused or stopped connector", _resume),
        ("stop", "stop a connector and its tasks, keeping its config (KIP-875)", _stop),
    ):
        p = add_command(group, verb, help_text, handler)
        p.add_argument("name", metavar="NAME")

    p = add_command(group, "delete", "delete a connector", _delete)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--delete-offsets", action="store_true", help="stop it, reset its offsets, then delete it (KIP-875)"
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="return once its tasks have left the executors and its deleted() callback has ended",
    )
    p.add_argument(
        "--etag", help="fail (ABORTED) instead of writing if the connector changed since this etag was read"
    )

    p = add_command(group, "restart", "restart a connector, its tasks, or one task", _restart)
    p.add_argument("name", metavar="NAME")
    p.add_argument("--include-tasks", action="store_true", help="restart its tasks too")
    p.add_argument("--only-failed", action="store_true", help="restart only FAILED instances")
    p.add_argument("--task", type=int, metavar="N", help="restart only task N")

    p = add_command(group, "status", "show the state of a connector and its tasks", _status)
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "-v",
        "--verbose",
        "--trace",
        dest="verbose",
        action="store_true",
        help="add whole traces and recent errors",
    )

    add_top_command(group)

    p = add_command(group, "tasks", "show a connector's task configs", _tasks)
    p.add_argument("name", metavar="NAME")

    p = add_command(
        group,
        "watch",
        "follow status changes as they happen, until interrupted",
        _watch,
        description="Follow status changes of one connector (or all) until interrupted; "
        "--output json prints one JSON object per line.",
    )
    p.add_argument("name", metavar="NAME", nargs="?", help="only this connector")
    p.add_argument("--no-initial", action="store_true", help="only changes, not the current statuses first")

    p = add_command(
        group,
        "validate",
        "validate a config against its plugin (exit code 1 when it has errors)",
        _validate,
        description="Validate a config against its plugin, as create would; exit code 1 when it has\n"
        "errors. NAME, KEY=VALUE and --file work as for create: NAME becomes the config's name.",
    )
    p.usage = "%(prog)s [NAME] [KEY=VALUE ...] [-f FILE] [--plugin PLUGIN] [global options]"
    add_named_config_inputs(p)
    p.add_argument("--plugin", help="plugin to validate against (default: the config's connector.class)")


# --- rendering --------------------------------------------------------------------------------


def _task_summary(status: connectors_pb2.ConnectorStatus) -> str:
    if not status.tasks:
        return "-"
    counts = Counter(output.state_label(task.status.state) for task in status.tasks)
    return ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))


def _connector_rows(
    connectors: Iterable[connectors_pb2.Connector], view: str
) -> tuple[list[str], list[list[str]]]:
    rows: list[list[str]] = []
    if view == "names":
        return ["NAME"], [[output.short_name(c.name)] for c in connectors]
    if view == "status":
        for c in connectors:
            rows.append(
                [
                    output.short_name(c.name),
                    output.connector_type_label(c.type or c.status.type),
                    output.state_label(c.status.connector.state),
                    c.status.connector.worker_id or "-",
                    _task_summary(c.status),
                ]
            )
        return ["NAME", "TYPE", "STATE", "WORKER", "TASKS"], rows
    for c in connectors:
        row = [
            output.short_name(c.name),
            output.connector_type_label(c.type),
            c.config.get("connector.class", "-"),
            output.target_state_label(c.target_state),
        ]
        if view == "full":
            row += [output.state_label(c.status.connector.state), _task_summary(c.status)]
        else:
            row.append(str(len(c.tasks)))
        rows.append(row)
    if view == "full":
        return ["NAME", "TYPE", "CLASS", "TARGET", "STATE", "TASKS"], rows
    return ["NAME", "TYPE", "CLASS", "TARGET", "TASKS"], rows


def _print_config(ctx: Context, config: Mapping[str, str]) -> None:
    items = sorted(config.items())
    if not items:
        ctx.write("No config.\n")
        return
    output.print_table(["KEY", "VALUE"], items, ctx.out)


def _state_text(instance: connectors_pb2.InstanceStatus) -> str:
    """The state with what qualifies it: the automatic restart a task waits for, or why a running
    task has nothing to do and since when, and the records it left out and dead-lettered."""
    state = output.state_label(instance.state)
    if instance.restart_attempt:
        due = output.timestamp_label(instance.next_restart_time)
        return f"{state} (restart {instance.restart_attempt} at {due})"
    notes: list[str] = []
    if instance.detail:
        since = output.timestamp_label(instance.idle_since)
        notes.append(instance.detail + (f", since {since}" if since != "-" else ""))
    counts = _record_counts(instance)
    if counts:
        notes.append(counts)
    return f"{state} ({'; '.join(notes)})" if notes else state


def _record_counts(instance: connectors_pb2.InstanceStatus) -> str:
    """`skipped 3, dead-lettered 2`: the records a task left out, and wrote to its dead-letter topic,
    each named only when not 0; "" when both are 0."""
    parts = []
    if instance.records_skipped:
        parts.append(f"skipped {instance.records_skipped}")
    if instance.records_dead_lettered:
        parts.append(f"dead-lettered {instance.records_dead_lettered}")
    return ", ".join(parts)


def _print_notices(ctx: Context, connector: connectors_pb2.Connector) -> None:
    for notice in connector.notices:
        ctx.write(f"Note: {notice.message}\n\n")


def _status_rows(status: connectors_pb2.ConnectorStatus) -> list[list[object]]:
    rows: list[list[object]] = []
    instances: list[tuple[str, connectors_pb2.InstanceStatus, tuple[str, str]]] = [
        ("connector", status.connector, ("", ""))
    ] + [(f"task {task.id}", task.status, output.progress_labels(task)) for task in status.tasks]
    for label, instance, (rate, lag) in instances:
        rows.append(
            [
                label,
                _state_text(instance),
                rate,
                lag,
                instance.worker_id or "-",
                output.generation_label(instance.generation),
                output.timestamp_label(instance.update_time),
                output.truncate(summarize_trace(instance.trace), _ERROR_WIDTH) if instance.trace else "",
            ]
        )
    return rows


def _print_status(ctx: Context, status: connectors_pb2.ConnectorStatus, *, verbose: bool = False) -> None:
    output.print_table(
        ["INSTANCE", "STATE", "RATE", "LAG", "WORKER", "GENERATION", "UPDATED", "ERROR"],
        _status_rows(status),
        ctx.out,
    )
    if not verbose:
        return
    instances = [("Connector", status.connector)] + [(f"Task {t.id}", t.status) for t in status.tasks]
    for label, instance in instances:
        if instance.trace:
            ctx.write(f"\n{label} trace:\n{instance.trace.rstrip()}\n")
        for event in instance.recent_errors:
            when = output.timestamp_label(event.time)
            ctx.write(f"\n{label} error at {when} on {event.worker_id or '-'}: {event.message}\n")


def _print_connector(ctx: Context, c: connectors_pb2.Connector) -> None:
    fields: list[tuple[str, object]] = [
        ("Name", output.short_name(c.name)),
        ("Type", output.connector_type_label(c.type)),
        ("Class", c.config.get("connector.class", "-")),
        ("Target state", output.target_state_label(c.target_state)),
        ("Etag", c.etag or "-"),
    ]
    if c.HasField("status"):
        state = output.state_label(c.status.connector.state)
        worker = c.status.connector.worker_id
        fields.append(("State", f"{state} on {worker}" if worker else state))
    fields.append(("Tasks", len(c.tasks)))
    ctx.write(output.render_fields(fields))
    if c.config:
        ctx.write("\n")
        _print_config(ctx, dict(c.config))
    if c.HasField("status"):
        ctx.write("\n")
        _print_status(ctx, c.status)


# --- handlers ---------------------------------------------------------------------------------


def _list(ctx: Context, args: argparse.Namespace) -> int:
    connectors = [c.raw for c in ctx.client.list_connectors(view=args.view, page_size=args.page_size)]

    def table() -> None:
        if not connectors:
            ctx.write("No connectors.\n")
            return
        headers, rows = _connector_rows(connectors, args.view)
        output.print_table(headers, rows, ctx.out)

    ctx.emit({"connectors": [output.message_to_json(c) for c in connectors]}, table)
    return 0


def _create(ctx: Context, args: argparse.Namespace) -> int:
    given = named_config_from_inputs(args.name, args.pairs, args.file)
    name, config = given.name, given.config
    initial_state = args.initial_state or given.initial_state or "running"
    ctx.sent_config = config
    created = ctx.client.create_connector(
        name, config, initial_state=initial_state, validate_only=args.validate_only
    ).raw

    def table() -> None:
        if args.validate_only:
            # Nothing was created: no etag, state or tasks to show, only the verdict.
            ctx.write(f"The config is valid; connector {name} was not created.\n")
            for notice in created.notices:
                ctx.write(f"\nNote: {notice.message}\n")
            return
        ctx.write(f"Created connector {name}.\n\n")
        _print_notices(ctx, created)
        _print_connector(ctx, created)

    ctx.emit(created, table)
    return 0


def _get(ctx: Context, args: argparse.Namespace) -> int:
    connector = ctx.client.get_connector(args.name, view=args.view).raw
    ctx.emit(connector, lambda: _print_connector(ctx, connector))
    return 0


def _config(ctx: Context, args: argparse.Namespace) -> int:
    if not args.pairs and not args.file:
        connector = ctx.client.get_connector(args.name, view="info").raw
        # Kafka Connect's GET /connectors/{name}/config returns the bare map too.
        ctx.emit(dict(connector.config), lambda: _print_config(ctx, dict(connector.config)))
        return 0
    config = config_from_inputs(args.pairs, args.file)
    ctx.sent_config = config
    replaced, created = ctx.client.replace_connector_config(args.name, config, etag=args.etag)
    connector = replaced.raw
    response = connectors_pb2.ReplaceConnectorConfigResponse(connector=connector, created=created)

    def table() -> None:
        name = output.short_name(connector.name) or connector_id(args.name)
        ctx.write(f"{'Created connector' if created else 'Replaced the config of'} {name}.\n\n")
        _print_notices(ctx, connector)
        _print_config(ctx, dict(connector.config))

    ctx.emit(response, table)
    return 0


def _patch(ctx: Context, args: argparse.Namespace) -> int:
    loaded, from_args = read_config_inputs(args.pairs, args.file)
    bad = [key for key in args.remove if "=" in key]
    if bad:
        raise UsageError(f"--remove takes keys, not KEY=VALUE ({bad[0]!r}); put KEY=VALUE before --remove")
    to_set = {key: value for key, value in loaded.config.items() if value is not None}
    to_set.update(from_args)
    # Arguments override the file: KEY=VALUE beats the file's null, --remove beats its value.
    to_remove = [key for key, value in loaded.config.items() if value is None and key not in from_args]
    for key in args.remove:
        if key in from_args:
            raise UsageError(f"{key!r} is both set and removed")
        to_set.pop(key, None)
        if key not in to_remove:
            to_remove.append(key)
    if not to_set and not to_remove:
        raise UsageError("nothing to change: pass KEY=VALUE arguments, --remove or --file")
    ctx.sent_config = to_set
    connector = ctx.client.patch_connector_config(args.name, set=to_set, remove=to_remove, etag=args.etag).raw

    def table() -> None:
        ctx.write(f"Patched connector {output.short_name(connector.name) or args.name}.\n\n")
        _print_config(ctx, dict(connector.config))

    ctx.emit(connector, table)
    return 0


def _lifecycle(ctx: Context, connector: connectors_pb2.Connector, verb: str, fallback: str) -> int:
    name = output.short_name(connector.name) or connector_id(fallback)
    ctx.emit(connector, lambda: ctx.write(f"{verb} connector {name}.\n"))
    return 0


def _pause(ctx: Context, args: argparse.Namespace) -> int:
    return _lifecycle(ctx, ctx.client.pause_connector(args.name).raw, "Paused", args.name)


def _resume(ctx: Context, args: argparse.Namespace) -> int:
    return _lifecycle(ctx, ctx.client.resume_connector(args.name).raw, "Resumed", args.name)


def _stop(ctx: Context, args: argparse.Namespace) -> int:
    return _lifecycle(ctx, ctx.client.stop_connector(args.name).raw, "Stopped", args.name)


def _delete(ctx: Context, args: argparse.Namespace) -> int:
    def call() -> connectors_pb2.DeleteConnectorResponse:
        return ctx.client.delete_connector(
            args.name, delete_offsets=args.delete_offsets, wait=args.wait, etag=args.etag
        )

    # Without either flag the call returns before the tasks leave: nothing to show progress of.
    waits = args.wait or args.delete_offsets
    waiting = deleting(args.name, delete_offsets=args.delete_offsets)
    answer = wait_with_progress(ctx, waiting, call) if waits else call()
    extra = " and its offsets" if args.delete_offsets else ""
    callback = answer.deleted_callback
    outcome = connectors_pb2.DeletedCallback.Outcome.Name(callback.outcome).removeprefix("OUTCOME_")

    def table() -> None:
        ctx.write(f"Deleted connector {connector_id(args.name)}{extra}.\n")
        if callback.outcome != connectors_pb2.DeletedCallback.OUTCOME_PENDING:
            ctx.write(f"Its deleted() callback: {outcome}.\n")
        if callback.error:
            ctx.write(f"{callback.error.rstrip()}\n")

    ctx.emit(answer, table)
    return 0


def _restart(ctx: Context, args: argparse.Namespace) -> int:
    name = connector_id(args.name)
    if args.task is not None:
        if args.include_tasks or args.only_failed:
            raise UsageError(
                "--task restarts one task; it cannot be combined with --include-tasks or --only-failed"
            )
        ctx.client.restart_task(name, args.task)
        ctx.emit({}, lambda: ctx.write(f"Restarting task {args.task} of connector {name}.\n"))
        return 0
    status = ctx.client.restart_connector(
        name, include_tasks=args.include_tasks, only_failed=args.only_failed
    ).raw

    def table() -> None:
        ctx.write(_restart_summary(name, status) + "\n\n")
        _print_status(ctx, status)

    ctx.emit(status, table)
    return 0


def _restart_summary(name: str, status: connectors_pb2.ConnectorStatus) -> str:
    """What a restart request restarts, read from its answer: the instances it restarts show as
    RESTARTING there. A task waiting for an automatic restart also shows RESTARTING, but with its
    attempt number; the request did not restart that one."""

    def restarts(instance: connectors_pb2.InstanceStatus) -> bool:
        return instance.state == common_pb2.STATE_RESTARTING and not instance.restart_attempt

    def tasks_label(ids: list[int]) -> str:
        return ("task " if len(ids) == 1 else "tasks ") + ", ".join(map(str, ids))

    tasks = [task.id for task in status.tasks if restarts(task.status)]
    if restarts(status.connector):
        return f"Restarting connector {name}" + (f" and its {tasks_label(tasks)}." if tasks else ".")
    if tasks:
        return f"Restarting {tasks_label(tasks)} of connector {name}."
    failed = [task.id for task in status.tasks if task.status.state == common_pb2.STATE_FAILED]
    if failed:
        # Only --only-failed without --include-tasks gets here with failed tasks.
        return (
            f"Nothing restarted: connector {name} is not FAILED; its {tasks_label(failed)} "
            f"{'is' if len(failed) == 1 else 'are'}, and --include-tasks restarts those."
        )
    return f"Nothing restarted: neither connector {name} nor any of its tasks is FAILED."


def _status(ctx: Context, args: argparse.Namespace) -> int:
    status = ctx.client.connector_status(args.name).raw

    def table() -> None:
        kind = output.connector_type_label(status.type)
        heading = output.short_name(status.name) or connector_id(args.name)
        ctx.write(f"Connector {heading}" + (f" ({kind})" if kind != "-" else "") + "\n\n")
        _print_status(ctx, status, verbose=args.verbose)

    ctx.emit(status, table)
    return 0


def _tasks(ctx: Context, args: argparse.Namespace) -> int:
    tasks = [task.raw for task in ctx.client.list_tasks(args.name)]

    def table() -> None:
        if not tasks:
            ctx.write("No tasks.\n")
            return
        rows = [
            [output.short_name(task.name).removeprefix("task "), key, value]
            for task in tasks
            for key, value in sorted(task.config.items())
        ]
        output.print_table(["TASK", "KEY", "VALUE"], rows, ctx.out)

    ctx.emit({"tasks": [output.message_to_json(task) for task in tasks]}, table)
    return 0


def _instance_label(name: str) -> str:
    """`connectors/x` -> `x`, `connectors/x/tasks/3` -> `x task 3`."""
    connector, sep, task = name.removeprefix("connectors/").partition("/tasks/")
    return f"{connector} task {task}" if sep else connector


def _watch(ctx: Context, args: argparse.Namespace) -> int:
    # No deadline: a watch runs until the user stops it (Ctrl-C exits with 130).
    for watched in ctx.client.watch_status(args.name, include_initial=not args.no_initial):
        event = watched.raw
        if ctx.json:
            ctx.write(json.dumps(output.message_to_json(event), ensure_ascii=False) + "\n")
        else:
            state = "REMOVED" if event.removed else _state_text(event.status)
            when = output.timestamp_label(event.status.update_time)
            worker = event.status.worker_id or "-"
            ctx.write(f"{when}  {_instance_label(event.name)}  {state}  {worker}\n")
        ctx.out.flush()
    return 0


def _validate(ctx: Context, args: argparse.Namespace) -> int:
    given = named_config_from_inputs(args.name, args.pairs, args.file)
    # The name is part of what is validated, as in the config create would send.
    config = {**given.config, "name": given.name}
    result = ctx.client.validate_config(config, args.plugin)

    def table() -> None:
        rows = [
            [
                info.value.name or info.definition.name,
                info.value.value if info.value.HasField("value") else "",
                e,
            ]
            for info in result.configs
            for e in info.value.errors
        ]
        if rows:
            output.print_table(output.CONFIG_ERROR_HEADERS, rows, ctx.out)
            ctx.write("\n")
        plugin = result.plugin_class_name or args.plugin or config.get("connector.class", "?")
        if result.error_count:
            plural = "s" if result.error_count != 1 else ""
            ctx.write(
                f"{result.error_count} error{plural} in the config of connector {given.name} for {plugin}.\n"
            )
        else:
            ctx.write(f"The config of connector {given.name} is valid for {plugin}.\n")

    ctx.emit(result, table)
    return 1 if result.error_count else 0
