"""`sluiceway plugins ...`: installed plugins and their config definitions."""

from __future__ import annotations

import argparse
import shutil
import textwrap

from sluiceway.api.v1 import plugins_pb2
from sluiceway.cli import output
from sluiceway.cli.common import Context, add_command, add_group

_HEADERS = ("KEY", "TYPE", "REQUIRED", "DEFAULT", "IMPORTANCE", "DESCRIPTION")
# Narrower than this, a description column is not worth having: whole descriptions go under their
# key's row instead, and cut ones keep at least this much.
_MIN_DESCRIPTION_WIDTH = 40
_MIN_CUT_WIDTH = 20
_INDENT = "    "


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = add_group(subparsers, "plugins", "installed connector plugins")

    p = add_command(group, "list", "list installed connector plugins", _list)
    p.add_argument("--all", action="store_true", help="include transforms and predicates")

    p = add_command(
        group,
        "config",
        "show a plugin's config definition",
        _config,
        description="Show the keys a plugin takes. A connector's own come first, then the keys every\n"
        "connector of its type has. On a terminal descriptions are cut to its width; --wide\n"
        "(the default when the output goes to a file or a pipe) shows them whole, wrapped.",
    )
    p.add_argument("plugin", metavar="PLUGIN", help="class path or alias, e.g. DataGenSource")
    p.add_argument("--wide", action="store_true", help="whole descriptions, wrapped to the terminal's width")


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
        wide = args.wide or not ctx.out.isatty()
        width = shutil.get_terminal_size().columns
        ctx.write(render_definition(definition, args.plugin, wide=wide, width=width))

    ctx.emit(definition, table)
    return 0


def framework_keys() -> frozenset[str]:
    """The keys Sluiceway defines for every connector (Kafka Connect's common, source and sink
    keys), as opposed to those a plugin defines for itself."""
    # Imported here: only this command needs the config definitions.
    from sluiceway.connect.framework_config import common_config_def, source_config_def
    from sluiceway.connect.sink_framework_config import sink_config_def

    definitions = (common_config_def(), source_config_def(), sink_config_def())
    return frozenset().union(*(definition.keys() for definition in definitions))


def _is_framework_key(name: str, framework: frozenset[str]) -> bool:
    # Topic creation groups (KIP-158) add keys under this prefix, one set per group.
    return name in framework or name.startswith("topic.creation.")


def render_definition(
    definition: plugins_pb2.PluginConfigDefinition, requested: str, *, wide: bool, width: int
) -> str:
    """The plugin's own keys, then the framework's, in one table aligned across both parts.
    `wide`: whole descriptions wrapped to `width` (in their column, or under their row when the
    column would be too narrow); otherwise each description's first line, cut to fit `width`."""
    plugin = definition.plugin
    heading = plugin.class_name or requested
    kind = output.plugin_type_label(plugin.type)
    detail = " ".join(part for part in (kind if kind != "-" else "", plugin.version) if part)
    framework = framework_keys()
    own = [key for key in definition.keys if not _is_framework_key(key.name, framework)]
    common = [key for key in definition.keys if _is_framework_key(key.name, framework)]
    keys = own + common

    fixed = [_fixed_cells(key) for key in keys]
    # Where the description column starts, from the widths of the other columns.
    offset = sum(max(len(row[i]) for row in [list(_HEADERS[:5]), *fixed]) + 2 for i in range(5))
    column = width - offset
    below = wide and column < _MIN_DESCRIPTION_WIDTH
    rows_of_keys = [
        _key_rows(cells, key.documentation, wide=wide, below=below, column=column)
        for cells, key in zip(fixed, keys, strict=True)
    ]
    table = output.render_table(
        _HEADERS[:5] if below else _HEADERS, [r for rows in rows_of_keys for r in rows]
    )
    header, *rendered = table.splitlines()
    lines_of_keys: list[list[str]] = []
    for key, rows in zip(keys, rows_of_keys, strict=True):
        key_lines, rendered = rendered[: len(rows)], rendered[len(rows) :]
        if below:
            wrapped = _wrap(key.documentation, max(width - len(_INDENT), _MIN_CUT_WIDTH))
            key_lines += [_INDENT + line for line in wrapped]
        lines_of_keys.append(key_lines)

    short = heading.rsplit(".", 1)[-1]
    parts = [heading + (f" ({detail})" if detail else ""), ""]
    if own:
        parts += [f"Keys of {short}:", header, *_joined(lines_of_keys[: len(own)]), ""]
    else:
        parts += [f"{short} has no keys of its own.", ""]
    if common:
        every = f"every {kind} connector" if kind in ("source", "sink") else "every connector"
        parts += [f"Keys {every} has:", header, *_joined(lines_of_keys[len(own) :]), ""]
    cut = not wide and any(len(key.documentation.strip()) > max(column, _MIN_CUT_WIDTH) for key in keys)
    if cut:
        parts.append("Descriptions are cut to the terminal's width: --wide shows them whole.")
    return "\n".join(parts).rstrip("\n") + "\n"


def _joined(lines_of_keys: list[list[str]]) -> list[str]:
    return [line for lines in lines_of_keys for line in lines]


def _fixed_cells(key: plugins_pb2.ConfigKeyDefinition) -> list[str]:
    return [
        key.name,
        output.enum_label(plugins_pb2.ConfigType, key.type, "CONFIG_TYPE_"),
        "yes" if key.required else "no",
        key.default_value if key.HasField("default_value") else "-",
        output.enum_label(plugins_pb2.Importance, key.importance, "IMPORTANCE_"),
    ]


def _key_rows(
    cells: list[str], documentation: str, *, wide: bool, below: bool, column: int
) -> list[list[str]]:
    """The table rows of one key: its row, then the rows that continue a description wrapped in
    its column. `below`: no description column (the caller writes descriptions under the rows)."""
    if below:
        return [cells]
    if not wide:
        return [[*cells, output.truncate(documentation, max(column, _MIN_CUT_WIDTH))]]
    first, *more = _wrap(documentation, column) or [""]
    return [[*cells, first], *(["", "", "", "", "", line] for line in more)]


def _wrap(text: str, width: int) -> list[str]:
    """`text` wrapped to `width`, keeping the line breaks its author put in."""
    return [
        wrapped
        for line in text.strip().splitlines()
        for wrapped in (textwrap.wrap(line, width, break_on_hyphens=False) or [""])
    ]
