"""Resource names: `connectors/{connector}`, `connectors/{connector}/tasks/{task}`, `plugins/{plugin}`."""

from __future__ import annotations

from sluiceway.common import names
from sluiceway.common.limits import MAX_CONNECTOR_NAME_LENGTH, echo
from sluiceway_server.api.errors import invalid_request
from sluiceway_server.errors import LimitExceededError

# The names themselves are parsed and formatted by `sluiceway.common.names`; this module maps a name the
# request got wrong to INVALID_ARGUMENT with a field violation (never INTERNAL). A name longer than
# any connector's can be is refused before anything else looks at it, and errors repeat only its
# beginning.

_MAX_CONNECTOR_RESOURCE = len(names.CONNECTORS_PREFIX) + MAX_CONNECTOR_NAME_LENGTH
_MAX_TASK_RESOURCE = _MAX_CONNECTOR_RESOURCE + len(names.TASKS_SEPARATOR) + len(str(names.MAX_TASK_NUMBER))
# Plugin class names are dotted Python paths; none comes near this.
_MAX_PLUGIN_RESOURCE = 1024


def _check_length(name: str, field: str, maximum: int) -> None:
    if len(name) > maximum:
        raise LimitExceededError(
            "max.connector.name.length", maximum, len(name), field, "the length of the resource name"
        )


def connector_name(name: str, field: str = "name") -> str:
    _check_length(name, field, _MAX_CONNECTOR_RESOURCE)
    try:
        return names.parse_connector_name(name)
    except names.InvalidNameError:
        raise invalid_request(field, f"expected connectors/{{connector}}, got {echo(name)}") from None


def task_name(name: str, field: str = "name") -> names.TaskName:
    _check_length(name, field, _MAX_TASK_RESOURCE)
    try:
        return names.parse_task_name(name)
    except names.InvalidTaskNumberError as exc:
        raise invalid_request(
            field,
            f"the task id must be a non-negative integer of at most {names.MAX_TASK_NUMBER} "
            f"in digits 0-9, got {echo(exc.number)}",
        ) from None
    except names.InvalidNameError:
        description = f"expected connectors/{{connector}}/tasks/{{task}}, got {echo(name)}"
        raise invalid_request(field, description) from None


def plugin_name(name: str, field: str = "name") -> str:
    if len(name) > _MAX_PLUGIN_RESOURCE:
        raise LimitExceededError(
            "max.plugin.name.length", _MAX_PLUGIN_RESOURCE, len(name), field, "the length of the plugin name"
        )
    if not name.startswith("plugins/") or len(name) == len("plugins/"):
        raise invalid_request(field, f"expected plugins/{{plugin}}, got {echo(name)}")
    return name[len("plugins/") :]


def format_connector(connector: str) -> str:
    return names.format_connector_name(connector)


def format_task(connector: str, task: int) -> str:
    return names.format_task_name(connector, task)
