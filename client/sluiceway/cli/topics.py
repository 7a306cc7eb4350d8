"""`sluiceway topics ...`: the topics a connector actively uses (KIP-558)."""

from __future__ import annotations

import argparse

from sluiceway.cli import output
from sluiceway.cli.common import Context, add_command, add_group
from sluiceway.client import connector_id


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "topics", "topics connectors actively use (KIP-558)")

    p = add_command(group, "get", "show the active topics of a connector", _get)
    p.add_argument("name", metavar="NAME")

    p = add_command(group, "reset", "forget the active topics of a connector", _reset)
    p.add_argument("name", metavar="NAME")


def _get(ctx: Context, args: argparse.Namespace) -> int:
    topics = ctx.client.active_topics(args.name)

    def table() -> None:
        if not topics.connector_exists:
            ctx.write(
                f"Connector {connector_id(args.name)} was deleted; its active topics are still recorded.\n"
            )
        if not topics.topics:
            ctx.write(f"No active topics for connector {connector_id(args.name)}.\n")
            return
        output.print_table(["TOPIC"], [[topic] for topic in sorted(topics.topics)], ctx.out)

    ctx.emit(topics, table)
    return 0


def _reset(ctx: Context, args: argparse.Namespace) -> int:
    done = ctx.client.reset_active_topics(args.name)

    def text() -> None:
        if done.connector_exists:
            ctx.write(f"Reset the active topics of connector {connector_id(args.name)}.\n")
        else:
            ctx.write(f"Connector {connector_id(args.name)} does not exist; no active topics of it remain.\n")

    ctx.emit(done, text)
    return 0
