"""Resource names (AIP-122): `connectors/{connector}`, `connectors/{connector}/tasks/{task}`,
`plugins/{plugin}`. Callers may pass bare ids or full names; requests always carry names."""

from __future__ import annotations

from sluiceway.errors import FieldViolation, InvalidArgumentError

__all__ = [
    "connector_id",
    "connector_name",
    "parse_task_name",
    "plugin_name",
    "task_name",
]

_CONNECTORS = "connectors/"
_TASKS = "/tasks/"
_PLUGINS = "plugins/"


def _invalid(field: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{field}: {description}",
        reason="INVALID_REQUEST",
        field_violations=[FieldViolation(field, description)],
    )


def connector_name(name: str) -> str:
    """`"my-conn"` or `"connectors/my-conn"` -> `"connectors/my-conn"`."""
    return _CONNECTORS + connector_id(name)


def connector_id(name: str) -> str:
    """`"my-conn"` or `"connectors/my-conn"` -> `"my-conn"`."""
    connector = name.removeprefix(_CONNECTORS)
    if not connector.strip():
        raise _invalid("name", f"a connector name is required, got {name!r}")
    # A slash would make the resource name ambiguous (e.g. a task name passed by mistake).
    if "/" in connector:
        raise _invalid("name", f"{name!r} is not a connector name (expected 'NAME' or 'connectors/NAME')")
    return connector


def task_name(connector: str, task: int) -> str:
    """`("my-conn", 0)` -> `"connectors/my-conn/tasks/0"`."""
    # bool is an int subclass; True as a task number is always a mistake.
    if isinstance(task, bool) or not isinstance(task, int) or task < 0:
        raise _invalid("task", f"a task number is a non-negative integer, got {task!r}")
    return f"{connector_name(connector)}{_TASKS}{task}"


def parse_task_name(name: str) -> tuple[str, int]:
    """`"connectors/my-conn/tasks/3"` -> `("my-conn", 3)`."""
    head, sep, number = name.rpartition(_TASKS)
    if not sep or not number.isdigit():
        raise _invalid("name", f"{name!r} is not a task name (expected 'connectors/NAME/tasks/N')")
    return connector_id(head), int(number)


def plugin_name(plugin: str) -> str:
    """`"DataGenSource"` or `"plugins/DataGenSource"` -> `"plugins/DataGenSource"`; the server
    resolves aliases and full class paths."""
    bare = plugin.removeprefix(_PLUGINS)
    if not bare.strip() or "/" in bare:
        raise _invalid("plugin", f"{plugin!r} is not a plugin class name or alias")
    return _PLUGINS + bare
