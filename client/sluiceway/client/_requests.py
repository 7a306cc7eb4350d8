"""Request building shared by the sync and asyncio clients: name handling, enum and config
coercion, and a fresh `request_id` for every mutation."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from sluiceway.api.v1 import (
    cluster_pb2,
    common_pb2,
    connectors_pb2,
    offsets_pb2,
    plugins_pb2,
    topics_pb2,
)
from sluiceway.client._names import connector_name, plugin_name, task_name
from sluiceway.common.offsets import OffsetValueError, map_to_proto
from sluiceway.errors import FieldViolation, InvalidArgumentError, Reason

ConfigValue: TypeAlias = str | int | float | bool
ConfigMapping: TypeAlias = Mapping[str, ConfigValue]
InitialStateLike: TypeAlias = str | connectors_pb2.InitialState.ValueType
ViewLike: TypeAlias = str | connectors_pb2.ConnectorView.ValueType
# A PartitionOffset, or Kafka Connect's JSON shape {"partition": {...}, "offset": {...} | None}.
OffsetLike: TypeAlias = common_pb2.PartitionOffset | Mapping[str, Any]


def _invalid(field: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"{field}: {description}",
        reason=Reason.INVALID_REQUEST,
        field_violations=[FieldViolation(field, description)],
    )


def new_request_id(request_id: str | None) -> str:
    """The caller's id, or a fresh one: one per logical call, reused by all its retries."""
    return request_id if request_id else str(uuid.uuid4())


def config_value(key: str, value: object, field: str = "config") -> str:
    """Connector configs are string maps; render scalars the way Kafka Connect's JSON does."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    raise _invalid(f"{field}.{key}", f"a config value must be a string, number or boolean, got {value!r}")


def config_map(config: ConfigMapping, field: str = "config") -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in config.items():
        if not isinstance(key, str):
            raise _invalid(field, f"config keys must be strings, got {key!r}")
        result[key] = config_value(key, value, field)
    return result


_INITIAL_STATES: dict[str, connectors_pb2.InitialState.ValueType] = {
    "RUNNING": connectors_pb2.INITIAL_STATE_RUNNING,
    # Kafka Connect's own spelling of RUNNING.
    "STARTED": connectors_pb2.INITIAL_STATE_RUNNING,
    "PAUSED": connectors_pb2.INITIAL_STATE_PAUSED,
    "STOPPED": connectors_pb2.INITIAL_STATE_STOPPED,
}

_VIEWS: dict[str, connectors_pb2.ConnectorView.ValueType] = {
    "NAMES": connectors_pb2.CONNECTOR_VIEW_NAMES,
    "INFO": connectors_pb2.CONNECTOR_VIEW_INFO,
    "STATUS": connectors_pb2.CONNECTOR_VIEW_STATUS,
    "FULL": connectors_pb2.CONNECTOR_VIEW_FULL,
}


def initial_state(value: InitialStateLike) -> connectors_pb2.InitialState.ValueType:
    """RUNNING, PAUSED or STOPPED (any case, with or without INITIAL_STATE_) or the enum value."""
    if isinstance(value, str):
        key = value.strip().upper().removeprefix("INITIAL_STATE_")
        if key in _INITIAL_STATES:
            return _INITIAL_STATES[key]
        raise _invalid("initial_state", f"expected RUNNING, PAUSED or STOPPED, got {value!r}")
    if value not in connectors_pb2.InitialState.values():
        raise _invalid("initial_state", f"unknown InitialState value {value!r}")
    return value


def connector_view(value: ViewLike) -> connectors_pb2.ConnectorView.ValueType:
    """NAMES, INFO, STATUS or FULL (any case, with or without CONNECTOR_VIEW_) or the enum value."""
    if isinstance(value, str):
        key = value.strip().upper().removeprefix("CONNECTOR_VIEW_")
        if key in _VIEWS:
            return _VIEWS[key]
        raise _invalid("view", f"expected NAMES, INFO, STATUS or FULL, got {value!r}")
    if value not in connectors_pb2.ConnectorView.values():
        raise _invalid("view", f"unknown ConnectorView value {value!r}")
    return value


def _offset_map(path: str, value: object) -> common_pb2.OffsetMap:
    if not isinstance(value, Mapping):
        raise _invalid(path, f"expected an object, got {value!r}")
    try:
        return map_to_proto(value)
    except OffsetValueError as exc:
        raise _invalid(path, str(exc)) from None


def partition_offset(index: int, item: OffsetLike) -> common_pb2.PartitionOffset:
    if isinstance(item, common_pb2.PartitionOffset):
        return item
    path = f"offsets[{index}]"
    if not isinstance(item, Mapping):
        raise _invalid(path, f"expected an object with 'partition' and 'offset', got {item!r}")
    unknown = set(item) - {"partition", "offset"}
    if unknown:
        raise _invalid(path, f"unknown keys {sorted(unknown)} (expected 'partition' and 'offset')")
    if "partition" not in item or item["partition"] is None:
        raise _invalid(f"{path}.partition", "a partition is required")
    result = common_pb2.PartitionOffset(partition=_offset_map(f"{path}.partition", item["partition"]))
    # A missing or null offset resets that partition (KIP-875).
    offset = item.get("offset")
    if offset is not None:
        result.offset.CopyFrom(_offset_map(f"{path}.offset", offset))
    return result


def partition_offsets(offsets: Iterable[OffsetLike]) -> list[common_pb2.PartitionOffset]:
    return [partition_offset(index, item) for index, item in enumerate(offsets)]


# --- ConnectorService -------------------------------------------------------------------


def create_connector(
    name: str,
    config: ConfigMapping,
    initial: InitialStateLike,
    validate_only: bool,
    request_id: str | None,
) -> connectors_pb2.CreateConnectorRequest:
    connector = connector_name(name)
    return connectors_pb2.CreateConnectorRequest(
        connector_id=connector.removeprefix("connectors/"),
        connector=connectors_pb2.Connector(config=config_map(config)),
        initial_state=initial_state(initial),
        validate_only=validate_only,
        request_id=new_request_id(request_id),
    )


def get_connector(name: str, view: ViewLike, min_config_position: int) -> connectors_pb2.GetConnectorRequest:
    return connectors_pb2.GetConnectorRequest(
        name=connector_name(name), view=connector_view(view), min_config_position=min_config_position
    )


def list_connectors(
    view: ViewLike, page_size: int, page_token: str, min_config_position: int
) -> connectors_pb2.ListConnectorsRequest:
    if page_size < 0:
        raise _invalid("page_size", f"must not be negative, got {page_size}")
    return connectors_pb2.ListConnectorsRequest(
        view=connector_view(view),
        page_size=page_size,
        page_token=page_token,
        min_config_position=min_config_position,
    )


def replace_connector_config(
    name: str, config: ConfigMapping, request_id: str | None, etag: str | None = None
) -> connectors_pb2.ReplaceConnectorConfigRequest:
    return connectors_pb2.ReplaceConnectorConfigRequest(
        name=connector_name(name),
        config=config_map(config),
        request_id=new_request_id(request_id),
        etag=etag or "",
    )


def patch_connector_config(
    name: str,
    set: ConfigMapping | None,
    remove: Iterable[str],
    request_id: str | None,
    etag: str | None = None,
) -> connectors_pb2.PatchConnectorConfigRequest:
    to_set = config_map(set or {}, "set")
    to_remove = list(remove)
    both = sorted(set_key for set_key in to_set if set_key in to_remove)
    if both:
        raise _invalid("remove", f"keys both set and removed: {', '.join(both)}")
    return connectors_pb2.PatchConnectorConfigRequest(
        name=connector_name(name),
        set=to_set,
        remove=to_remove,
        request_id=new_request_id(request_id),
        etag=etag or "",
    )


def delete_connector(
    name: str, delete_offsets: bool, wait: bool, request_id: str | None, etag: str | None = None
) -> connectors_pb2.DeleteConnectorRequest:
    return connectors_pb2.DeleteConnectorRequest(
        name=connector_name(name),
        delete_offsets=delete_offsets,
        wait=wait,
        request_id=new_request_id(request_id),
        etag=etag or "",
    )


def pause_connector(name: str, request_id: str | None) -> connectors_pb2.PauseConnectorRequest:
    return connectors_pb2.PauseConnectorRequest(
        name=connector_name(name), request_id=new_request_id(request_id)
    )


def resume_connector(name: str, request_id: str | None) -> connectors_pb2.ResumeConnectorRequest:
    return connectors_pb2.ResumeConnectorRequest(
        name=connector_name(name), request_id=new_request_id(request_id)
    )


def stop_connector(name: str, request_id: str | None) -> connectors_pb2.StopConnectorRequest:
    return connectors_pb2.StopConnectorRequest(
        name=connector_name(name), request_id=new_request_id(request_id)
    )


def restart_connector(
    name: str, include_tasks: bool, only_failed: bool, request_id: str | None
) -> connectors_pb2.RestartConnectorRequest:
    return connectors_pb2.RestartConnectorRequest(
        name=connector_name(name),
        include_tasks=include_tasks,
        only_failed=only_failed,
        request_id=new_request_id(request_id),
    )


def list_tasks(name: str, min_config_position: int) -> connectors_pb2.ListTasksRequest:
    return connectors_pb2.ListTasksRequest(
        parent=connector_name(name), min_config_position=min_config_position
    )


def connector_status(name: str) -> connectors_pb2.GetConnectorStatusRequest:
    return connectors_pb2.GetConnectorStatusRequest(name=connector_name(name))


def task_status(name: str, task: int) -> connectors_pb2.GetTaskStatusRequest:
    return connectors_pb2.GetTaskStatusRequest(name=task_name(name, task))


def restart_task(name: str, task: int, request_id: str | None) -> connectors_pb2.RestartTaskRequest:
    return connectors_pb2.RestartTaskRequest(
        name=task_name(name, task), request_id=new_request_id(request_id)
    )


def watch_status(name: str | None, include_initial: bool) -> connectors_pb2.WatchStatusRequest:
    return connectors_pb2.WatchStatusRequest(
        name=connector_name(name) if name is not None else "", include_initial=include_initial
    )


# --- PluginService ----------------------------------------------------------------------


def list_plugins(include_all_types: bool) -> plugins_pb2.ListPluginsRequest:
    return plugins_pb2.ListPluginsRequest(include_all_types=include_all_types)


def plugin_config(plugin: str) -> plugins_pb2.GetPluginConfigDefinitionRequest:
    return plugins_pb2.GetPluginConfigDefinitionRequest(name=plugin_name(plugin))


def validate_config(config: ConfigMapping, plugin: str | None) -> plugins_pb2.ValidateConnectorConfigRequest:
    return plugins_pb2.ValidateConnectorConfigRequest(
        plugin=plugin_name(plugin) if plugin else "", config=config_map(config)
    )


# --- OffsetService ----------------------------------------------------------------------


def get_offsets(name: str) -> offsets_pb2.GetConnectorOffsetsRequest:
    return offsets_pb2.GetConnectorOffsetsRequest(name=connector_name(name))


def alter_offsets(
    name: str, offsets: Iterable[OffsetLike], request_id: str | None
) -> offsets_pb2.AlterConnectorOffsetsRequest:
    converted = partition_offsets(offsets)
    if not converted:
        # Kafka Connect rejects an empty offsets list as well.
        raise _invalid("offsets", "at least one partition is required")
    return offsets_pb2.AlterConnectorOffsetsRequest(
        name=connector_name(name), offsets=converted, request_id=new_request_id(request_id)
    )


def reset_offsets(name: str, request_id: str | None) -> offsets_pb2.ResetConnectorOffsetsRequest:
    return offsets_pb2.ResetConnectorOffsetsRequest(
        name=connector_name(name), request_id=new_request_id(request_id)
    )


# --- TopicService and ClusterService ----------------------------------------------------


def active_topics(name: str) -> topics_pb2.GetActiveTopicsRequest:
    return topics_pb2.GetActiveTopicsRequest(name=connector_name(name))


def reset_active_topics(name: str, request_id: str | None) -> topics_pb2.ResetActiveTopicsRequest:
    return topics_pb2.ResetActiveTopicsRequest(
        name=connector_name(name), request_id=new_request_id(request_id)
    )


def server_info() -> cluster_pb2.GetServerInfoRequest:
    return cluster_pb2.GetServerInfoRequest()
