"""`sluiceway offsets ...`: KIP-875 offsets of source and sink connectors."""

from __future__ import annotations

import argparse

from sluiceway.cli import output
from sluiceway.cli.common import Context, add_command, add_group
from sluiceway.cli.waiting import changing_offsets, wait_with_progress
from sluiceway.client import connector_id, load_offsets_file
from sluiceway.common.offsets import offsets_from_proto


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "offsets", "read, alter and reset connector offsets (KIP-875)")

    p = add_command(group, "get", "show a connector's offsets", _get)
    p.add_argument("name", metavar="NAME")

    p = add_command(
        group,
        "alter",
        "alter offsets of a STOPPED connector",
        _alter,
        description=(
            "Alter offsets of a STOPPED connector. The file holds Kafka Connect's body,\n"
            '  {"offsets": [{"partition": {...}, "offset": {...}}]}\n'
            "as `offsets get --output json` prints it; a null offset resets that partition.\n"
            "Sink partitions are {kafka_topic, kafka_partition} with offset {kafka_offset}."
        ),
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="JSON offsets file ('-' reads stdin)")

    p = add_command(group, "reset", "reset all offsets of a STOPPED connector", _reset)
    p.add_argument("name", metavar="NAME")


def _get(ctx: Context, args: argparse.Namespace) -> int:
    offsets = ctx.client.get_offsets(args.name)
    pairs = offsets_from_proto(offsets.offsets)

    def table() -> None:
        if not pairs:
            ctx.write(f"No offsets for connector {connector_id(args.name)}.\n")
            return
        rows = [
            [output.compact_json(partition), output.compact_json(offset) if offset is not None else "null"]
            for partition, offset in pairs
        ]
        output.print_table(["PARTITION", "OFFSET"], rows, ctx.out)

    # Kafka Connect's body, which `offsets alter --file` reads back; integers stay exact.
    body = {"offsets": [{"partition": partition, "offset": offset} for partition, offset in pairs]}
    ctx.emit(body, table)
    return 0


def _alter(ctx: Context, args: argparse.Namespace) -> int:
    items = load_offsets_file(args.file)
    waiting = changing_offsets(args.name, reset=False)
    response = wait_with_progress(ctx, waiting, lambda: ctx.client.alter_offsets(args.name, items))
    ctx.emit(response, lambda: ctx.write(f"{response.message or 'Offsets altered.'}\n"))
    return 0


def _reset(ctx: Context, args: argparse.Namespace) -> int:
    waiting = changing_offsets(args.name, reset=True)
    response = wait_with_progress(ctx, waiting, lambda: ctx.client.reset_offsets(args.name))
    ctx.emit(response, lambda: ctx.write(f"{response.message or 'Offsets reset.'}\n"))
    return 0
