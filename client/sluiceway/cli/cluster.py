"""`sluiceway cluster info`: the control-plane cluster, its members and executors."""

from __future__ import annotations

import argparse

from sluiceway.cli import output
from sluiceway.cli.common import Context, add_command, add_group


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "cluster", "the control-plane cluster")
    add_command(group, "info", "show the version, leader, members and executors", _info)


def _info(ctx: Context, args: argparse.Namespace) -> int:
    info = ctx.client.server_info()

    def table() -> None:
        leader = (
            f"{info.leader.id} (epoch {info.leader.leader_epoch})"
            if info.HasField("leader")
            else "(none: election under way)"
        )
        fields: list[tuple[str, object]] = [
            ("Version", info.version + (f" ({info.commit})" if info.commit else "")),
            ("Kafka cluster", info.kafka_cluster_id or "-"),
            ("Group", info.group_id or "-"),
            ("This replica", info.this_replica.id or "-"),
            ("Leader", leader),
            ("Config position", info.config_position),
        ]
        ctx.write(output.render_fields(fields))
        ctx.write("\n")
        if info.members:
            rows = [
                [m.id, m.advertised_address, "yes" if m.leader else "", m.leader_epoch if m.leader else ""]
                for m in info.members
            ]
            output.print_table(["MEMBER", "ADDRESS", "LEADER", "EPOCH"], rows, ctx.out)
        else:
            ctx.write("No members.\n")
        ctx.write("\n")
        if info.executors:
            rows = [
                [
                    e.id,
                    e.host or "-",
                    e.spark_remote or "-",
                    len(e.tasks),
                    output.timestamp_label(e.last_heartbeat_time),
                    e.version or "-",
                    e.metrics_url or "-",
                ]
                for e in info.executors
            ]
            output.print_table(
                ["EXECUTOR", "HOST", "SPARK", "TASKS", "LAST HEARTBEAT", "VERSION", "METRICS"], rows, ctx.out
            )
            ctx.write("\n")
            tasks = [[e.id, task] for e in info.executors for task in e.tasks]
            if tasks:
                output.print_table(["EXECUTOR", "TASK"], tasks, ctx.out)
        else:
            ctx.write("No executors attached.\n")

    ctx.emit(info, table)
    return 0
