"""Resource names (AIP-122): `connectors/{connector}`, `connectors/{connector}/tasks/{task}`,
`plugins/{plugin}`. Callers may pass bare ids or full names; requests always carry names."""

from __future__ import annotations

from sluiceway.common import names
from sluiceway.errors import FieldViolation, InvalidArgumentError, Reason

__all__ = [
    "connector_id",
    "connector_name",
    "parse_task_name",
    "plugin_name",
    "task_name",
]

_PLUGINS = "plugins/"


def _invalid(field: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{field}: {description}",
        reason=Reason.INVALID_REQUEST,
        field_violations=[FieldViolation(field, description)],
    )


def connector_name(name: str) -> str:
    """`"my-conn"` or `"connectors/my-conn"` -> `"connectors/my-conn"`."""
    return names.format_connector_name(connector_id(name))


def connector_id(name: str) -> str:
    """`"my-conn"` or `"connectors/my-conn"` -> `"my-conn"`."""
    connector = name.removeprefix(names.CONNECTORS_PREFIX)
    if not connector.strip():
        raise _invalid("name", f"a connector name is required, got {name!r}")
    # A slash would make the resource name ambiguous (e.g. a task name passed by mistake).
    try:
        return names.check_connector_id(connector)
    except names.InvalidNameError:
        raise _invalid(
            "name", f"{name!r} is not a connector name (expected 'NAME' or 'connectors/NAME')"
        ) from None


def task_name(connector: str, task: int) -> str:
    """`("my-conn", 0)` -> `"connectors/my-conn/tasks/0"`."""
    try:
        number = names.check_task_number(task)
    except names.InvalidNameError as exc:
        raise _invalid("task", exc.description) from None
    return names.format_task_name(connector_id(connector), number)


def parse_task_name(name: str) -> names.TaskName:
    """`"connectors/my-conn/tasks/3"` -> `TaskName("my-conn", 3)` (a `(connector, task)` tuple)."""
    try:
        return names.parse_task_name(name)
    except names.InvalidNameError as exc:
        raise _invalid("name", exc.description) from None


def plugin_name(plugin: str) -> str:
    """`"DataGenSource"` or `"plugins/DataGenSource"` -> `"plugins/DataGenSource"`; the server
    resolves aliases and full class paths."""
    bare = plugin.removeprefix(_PLUGINS)
    if not bare.strip() or "/" in bare:
        raise _invalid("plugin", f"{plugin!r} is not a plugin class name or alias")
    return _PLUGINS + bare
