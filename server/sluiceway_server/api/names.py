"""Resource names: `connectors/{connector}`, `connectors/{connector}/tasks/{task}`, `plugins/{plugin}`."""

from __future__ import annotations

from sluiceway import names
from sluiceway_server.api.errors import invalid_request

# The names themselves are parsed and formatted by `sluiceway.names`; this module maps a name the
# request got wrong to INVALID_ARGUMENT with a field violation (never INTERNAL).


def connector_name(name: str, field: str = "name") -> str:
    try:
        return names.parse_connector_name(name)
    except names.InvalidNameError:
        raise invalid_request(field, f"expected connectors/{{connector}}, got {name!r}") from None


def task_name(name: str, field: str = "name") -> names.TaskName:
    try:
        return names.parse_task_name(name)
    except names.InvalidTaskNumberError as exc:
        raise invalid_request(
            field,
            f"the task id must be a non-negative integer of at most {names.MAX_TASK_NUMBER}, "
            f"got {exc.number!r}",
        ) from None
    except names.InvalidNameError:
        description = f"expected connectors/{{connector}}/tasks/{{task}}, got {name!r}"
        raise invalid_request(field, description) from None


def plugin_name(name: str, field: str = "name") -> str:
    if not name.startswith("plugins/") or len(name) == len("plugins/"):
        raise invalid_request(field, f"expected plugins/{{plugin}}, got {name!r}")
    return name[len("plugins/") :]


def format_connector(connector: str) -> str:
    return names.format_connector_name(connector)


def format_task(connector: str, task: int) -> str:
    return names.format_task_name(connector, task)
