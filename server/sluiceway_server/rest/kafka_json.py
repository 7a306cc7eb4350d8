"""Kafka Connect's REST bodies from and to our API's messages. Field names, state and type words
follow Kafka Connect's entities (ConnectorInfo, ConnectorStateInfo, TaskInfo, ConfigInfos,
PluginInfo, ServerInfo, ConnectorOffsets); nothing here calls anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from sluiceway.api.v1 import cluster_pb2, common_pb2, connectors_pb2, offsets_pb2, plugins_pb2
from sluiceway.common.offsets import OffsetValueError, map_from_proto, map_to_proto

__all__ = [
    "BodyError",
    "config_infos",
    "config_key_info",
    "config_object",
    "connector_info",
    "connector_offsets",
    "connector_state_info",
    "initial_state",
    "offsets_request",
    "patch_object",
    "plugin_info",
    "server_info",
    "task_infos",
    "task_state",
    "tasks_config",
]

JsonObject = dict[str, Any]


class BodyError(ValueError):
    """A request body Kafka Connect would refuse (HTTP 400); the message says what is wrong."""


_CONNECTOR_TYPES: Final = {
    common_pb2.CONNECTOR_TYPE_SOURCE: "source",
    common_pb2.CONNECTOR_TYPE_SINK: "sink",
}
_PLUGIN_TYPES: Final = {
    plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR: "source",
    plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR: "sink",
    plugins_pb2.PLUGIN_TYPE_CONVERTER: "converter",
    plugins_pb2.PLUGIN_TYPE_TRANSFORMATION: "transformation",
    plugins_pb2.PLUGIN_TYPE_PREDICATE: "predicate",
}
_INITIAL_STATES: Final = {
    "RUNNING": connectors_pb2.INITIAL_STATE_RUNNING,
    "PAUSED": connectors_pb2.INITIAL_STATE_PAUSED,
    "STOPPED": connectors_pb2.INITIAL_STATE_STOPPED,
}


def connector_type(kind: common_pb2.ConnectorType.ValueType) -> str:
    return _CONNECTOR_TYPES.get(kind, "unknown")


def _last(resource_name: str) -> str:
    return resource_name.rsplit("/", 1)[-1]


def _task_number(resource_name: str) -> int:
    return int(_last(resource_name))


def connector_info(connector: connectors_pb2.Connector) -> JsonObject:
    """ConnectorInfo: name, config, tasks as {connector, task}, type."""
    name = _last(connector.name)
    return {
        "name": name,
        "config": dict(connector.config),
        "tasks": [{"connector": name, "task": _task_number(t)} for t in connector.tasks],
        "type": connector_type(connector.type),
    }


def _state(status: connectors_pb2.InstanceStatus) -> JsonObject:
    state: JsonObject = {
        "state": common_pb2.State.Name(status.state).removeprefix("STATE_"),
        "worker_id": status.worker_id,
    }
    if status.trace:  # Kafka Connect leaves `trace` out unless there is one
        state["trace"] = status.trace
    return state


def task_state(task: connectors_pb2.TaskStatus) -> JsonObject:
    """ConnectorStateInfo.TaskState: id, state, worker_id and, after a failure, trace."""
    return {"id": task.id, **_state(task.status)}


def connector_state_info(status: connectors_pb2.ConnectorStatus) -> JsonObject:
    """ConnectorStateInfo: name, connector state, task states by id, type."""
    return {
        "name": _last(status.name),
        "connector": _state(status.connector),
        "tasks": sorted((task_state(t) for t in status.tasks), key=lambda t: int(t["id"])),
        "type": connector_type(status.type),
    }


def task_infos(connector: str, tasks: Iterable[connectors_pb2.Task]) -> list[JsonObject]:
    """GET /connectors/{name}/tasks: TaskInfo per task, {id: {connector, task}, config}."""
    return [
        {"id": {"connector": connector, "task": _task_number(t.name)}, "config": dict(t.config)}
        for t in tasks
    ]


def tasks_config(connector: str, tasks: Iterable[connectors_pb2.Task]) -> JsonObject:
    """GET /connectors/{name}/tasks-config: each task's config under `name-N`."""
    return {f"{connector}-{_task_number(t.name)}": dict(t.config) for t in tasks}


def plugin_info(plugin: plugins_pb2.Plugin) -> JsonObject:
    """PluginInfo: class, type and, when known, version."""
    info: JsonObject = {"class": plugin.class_name, "type": _PLUGIN_TYPES.get(plugin.type, "unknown")}
    if plugin.version:
        info["version"] = plugin.version
    return info


def config_key_info(key: plugins_pb2.ConfigKeyDefinition) -> JsonObject:
    """ConfigKeyInfo. `width` is a display hint Kafka's ConfigDef carries and we do not: NONE."""
    return {
        "name": key.name,
        "type": plugins_pb2.ConfigType.Name(key.type).removeprefix("CONFIG_TYPE_"),
        "required": key.required,
        "default_value": key.default_value if key.HasField("default_value") else None,
        "importance": plugins_pb2.Importance.Name(key.importance).removeprefix("IMPORTANCE_"),
        "documentation": key.documentation,
        "group": key.group or None,
        # Kafka Connect reads this field as order_in_group but writes it as `order`.
        "order": key.order_in_group,
        "width": "NONE",
        "display_name": key.display_name or key.name,
        "dependents": list(key.dependents),
    }


def config_infos(response: plugins_pb2.ValidateConnectorConfigResponse) -> JsonObject:
    """ConfigInfos: the plugin's class, the error count, the groups and each key's definition and value."""
    configs = []
    for info in response.configs:
        value = info.value
        configs.append(
            {
                "definition": config_key_info(info.definition),
                "value": {
                    "name": value.name,
                    "value": value.value if value.HasField("value") else None,
                    "recommended_values": list(value.recommended_values),
                    "errors": list(value.errors),
                    "visible": value.visible,
                },
            }
        )
    return {
        "name": response.plugin_class_name,
        "error_count": response.error_count,
        "groups": list(response.groups),
        "configs": configs,
    }


def server_info(info: cluster_pb2.ServerInfo) -> JsonObject:
    return {"version": info.version, "commit": info.commit, "kafka_cluster_id": info.kafka_cluster_id}


def connector_offsets(offsets: offsets_pb2.ConnectorOffsets) -> JsonObject:
    """ConnectorOffsets: {"offsets": [{"partition": {...}, "offset": {...} or null}]}."""
    return {
        "offsets": [
            {
                "partition": map_from_proto(item.partition),
                "offset": map_from_proto(item.offset) if item.HasField("offset") else None,
            }
            for item in offsets.offsets
        ]
    }


# --- request bodies --------------------------------------------------------------------------


def _string_value(key: str, value: Any) -> str:
    """A config value as Kafka Connect's JSON reader takes it: strings as they are, and numbers and
    booleans as their JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise BodyError(f"The value of config key {key!r} must be a string, got {type(value).__name__}")


def config_object(body: Any, what: str = "The connector config") -> dict[str, str]:
    """A connector config: a JSON object of strings (numbers and booleans taken as their text)."""
    if not isinstance(body, Mapping):
        raise BodyError(f"{what} must be a JSON object of strings")
    if any(value is None for value in body.values()):
        key = next(k for k, v in body.items() if v is None)
        raise BodyError(f"The value of config key {key!r} must be a string, got null")
    return {str(key): _string_value(str(key), value) for key, value in body.items()}


def patch_object(body: Any) -> tuple[dict[str, str], list[str]]:
    """PATCH /connectors/{name}/config: the keys to set, and the keys to remove (JSON null)."""
    if not isinstance(body, Mapping):
        raise BodyError("The config patch must be a JSON object")
    removed = sorted(str(key) for key, value in body.items() if value is None)
    kept = {key: value for key, value in body.items() if value is not None}
    return config_object(kept, "The config patch"), removed


def initial_state(value: Any) -> connectors_pb2.InitialState.ValueType:
    """POST /connectors' optional `initial_state` (KIP-980), case-insensitive as in Kafka Connect."""
    if value is None:
        return connectors_pb2.INITIAL_STATE_RUNNING
    state = _INITIAL_STATES.get(str(value).upper()) if isinstance(value, str) else None
    if state is None:
        raise BodyError(f"initial_state must be one of RUNNING, PAUSED or STOPPED, got {value!r}")
    return state


def offsets_request(body: Any) -> list[common_pb2.PartitionOffset]:
    """PATCH /connectors/{name}/offsets: {"offsets": [{"partition": {...}, "offset": {...} or null}]}."""
    items = body.get("offsets") if isinstance(body, Mapping) else None
    if not isinstance(items, list) or not items:
        raise BodyError("Partitions / offsets need to be provided for an alter offsets request")
    result = []
    for number, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("partition"), Mapping):
            raise BodyError(f"offsets[{number}] needs a `partition` object")
        offset = item.get("offset")
        if offset is not None and not isinstance(offset, Mapping):
            raise BodyError(f"offsets[{number}].offset must be an object or null")
        try:
            entry = common_pb2.PartitionOffset(partition=map_to_proto(item["partition"]))
            if offset is not None:
                entry.offset.CopyFrom(map_to_proto(offset))
        except OffsetValueError as exc:
            raise BodyError(f"offsets[{number}]: {exc}") from None
        result.append(entry)
    return result
