"""Resource names: `connectors/{connector}`, `connectors/{connector}/tasks/{task}`, `plugins/{plugin}`."""

from __future__ import annotations

from sluiceway_server.api.errors import invalid_request

CONNECTORS = "connectors/"


def connector_name(name: str, field: str = "name") -> str:
    if not name.startswith(CONNECTORS) or len(name) == len(CONNECTORS) or "/" in name[len(CONNECTORS) :]:
        raise invalid_request(field, f"expected connectors/{{connector}}, got {name!r}")
    return name[len(CONNECTORS) :]


def task_name(name: str, field: str = "name") -> tuple[str, int]:
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "connectors" or parts[2] != "tasks" or not parts[1]:
        raise invalid_request(field, f"expected connectors/{{connector}}/tasks/{{task}}, got {name!r}")
    if not parts[3].isdigit():
        raise invalid_request(field, f"the task id must be a non-negative integer, got {parts[3]!r}")
    return parts[1], int(parts[3])


def plugin_name(name: str, field: str = "name") -> str:
    if not name.startswith("plugins/") or len(name) == len("plugins/"):
        raise invalid_request(field, f"expected plugins/{{plugin}}, got {name!r}")
    return name[len("plugins/") :]


def format_connector(connector: str) -> str:
    return CONNECTORS + connector


def format_task(connector: str, task: int) -> str:
    return f"{CONNECTORS}{connector}/tasks/{task}"
