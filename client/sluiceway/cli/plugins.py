"""`sluiceway plugins ...`: installed plugins and their config definitions."""

from __future__ import annotations

import argparse

from sluiceway.api.v1 import plugins_pb2
from sluiceway.cli import output
from sluiceway.cli.common import Context, add_command, add_group

_DOC_WIDTH = 60


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "plugins", "installed connector plugins")

    p = add_command(group, "list", "list installed connector plugins", _list)
    p.add_argument("--all", action="store_true", help="include converters, transforms and predicates")

    p = add_command(group, "config", "show a plugin's config definition", _config)
    p.add_argument("plugin", metavar="PLUGIN", help="class path or alias, e.g. DataGenSource")


def _list(ctx: Context, args: argparse.Namespace) -> int:
    plugins = ctx.client.list_plugins(include_all_types=args.all)

    def table() -> None:
        if not plugins:
            ctx.write("No plugins.\n")
            return
        rows = [
            [p.class_name, output.plugin_type_label(p.type), p.version or "-", ", ".join(p.aliases)]
            for p in plugins
        ]
        output.print_table(["CLASS", "TYPE", "VERSION", "ALIASES"], rows, ctx.out)

    ctx.emit({"plugins": [output.message_to_json(p) for p in plugins]}, table)
    return 0


def _config(ctx: Context, args: argparse.Namespace) -> int:
    definition = ctx.client.plugin_config(args.plugin)

    def table() -> None:
        plugin = definition.plugin
        heading = plugin.class_name or args.plugin
        kind = output.plugin_type_label(plugin.type)
        detail = " ".join(part for part in (kind if kind != "-" else "", plugin.version) if part)
        ctx.write(heading + (f" ({detail})" if detail else "") + "\n\n")
        rows = [
            [
                key.name,
                output.enum_label(plugins_pb2.ConfigType, key.type, "CONFIG_TYPE_"),
                "yes" if key.required else "no",
                key.default_value if key.HasField("default_value") else "-",
                output.enum_label(plugins_pb2.Importance, key.importance, "IMPORTANCE_"),
                output.truncate(key.documentation, _DOC_WIDTH),
            ]
            for key in definition.keys
        ]
        output.print_table(["KEY", "TYPE", "REQUIRED", "DEFAULT", "IMPORTANCE", "DESCRIPTION"], rows, ctx.out)

    ctx.emit(definition, table)
    return 0
