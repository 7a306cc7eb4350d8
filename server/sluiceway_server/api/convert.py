"""Herder views ↔ API protos."""

from __future__ import annotations

from typing import Any

from google.protobuf import timestamp_pb2

import sluiceway
from sluiceway.api.v1 import common_pb2, connectors_pb2, plugins_pb2
from sluiceway.common.secrets import HIDDEN, redact_url_credentials
from sluiceway.connect.config import ConfigKey, ConfigValue, Password
from sluiceway.connect.plugins import PluginDesc, PluginType, class_name_of
from sluiceway.connect.validation import ConfigInfos
from sluiceway_server.api.names import format_connector, format_task
from sluiceway_server.herder.deleted_callbacks import DeletedCallbackResult
from sluiceway_server.herder.views import (
    ConnectorInfo,
    ConnectorStatusView,
    InstanceStatusView,
    TaskStatusView,
)
from sluiceway_server.model import ConnectorType, State, TargetState
from sluiceway_server.storage import ErrorEntry

CONNECTOR_TYPES = {
    ConnectorType.SOURCE: common_pb2.CONNECTOR_TYPE_SOURCE,
    ConnectorType.SINK: common_pb2.CONNECTOR_TYPE_SINK,
    ConnectorType.UNKNOWN: common_pb2.CONNECTOR_TYPE_UNSPECIFIED,
}
TARGET_STATES = {
    TargetState.STARTED: common_pb2.TARGET_STATE_RUNNING,
    TargetState.PAUSED: common_pb2.TARGET_STATE_PAUSED,
    TargetState.STOPPED: common_pb2.TARGET_STATE_STOPPED,
}
STATES = {
    State.UNASSIGNED: common_pb2.STATE_UNASSIGNED,
    State.RUNNING: common_pb2.STATE_RUNNING,
    State.PAUSED: common_pb2.STATE_PAUSED,
    State.STOPPED: common_pb2.STATE_STOPPED,
    State.FAILED: common_pb2.STATE_FAILED,
    State.RESTARTING: common_pb2.STATE_RESTARTING,
}
INITIAL_STATES = {
    connectors_pb2.INITIAL_STATE_UNSPECIFIED: TargetState.STARTED,
    connectors_pb2.INITIAL_STATE_RUNNING: TargetState.STARTED,
    connectors_pb2.INITIAL_STATE_PAUSED: TargetState.PAUSED,
    connectors_pb2.INITIAL_STATE_STOPPED: TargetState.STOPPED,
}


def timestamp(ms: int) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromMilliseconds(ms)
    return ts


def error_event(entry: ErrorEntry) -> common_pb2.ErrorEvent:
    # Status writes redact credentials in URLs already; records written before that are redacted here.
    return common_pb2.ErrorEvent(
        time=timestamp(entry.time_ms),
        message=redact_url_credentials(entry.message),
        trace=redact_url_credentials(entry.trace),
        worker_id=entry.worker_id,
    )


def instance_status(view: InstanceStatusView) -> connectors_pb2.InstanceStatus:
    message = connectors_pb2.InstanceStatus(
        state=STATES[view.state],
        worker_id=view.worker_id,
        trace=redact_url_credentials(view.trace or ""),
        generation=view.generation,
        recent_errors=[error_event(e) for e in view.recent_errors],
    )
    if view.update_time_ms > 0:
        message.update_time.CopyFrom(timestamp(view.update_time_ms))
    message.restart_attempt = view.restart_attempt
    if view.next_restart_ms > 0:
        message.next_restart_time.CopyFrom(timestamp(view.next_restart_ms))
    message.detail = view.detail
    if view.idle_since_ms > 0:
        message.idle_since.CopyFrom(timestamp(view.idle_since_ms))
    message.records_skipped = view.records_skipped
    message.records_dead_lettered = view.records_dead_lettered
    return message


def task_status(view: TaskStatusView) -> connectors_pb2.TaskStatus:
    return connectors_pb2.TaskStatus(
        name=format_task(view.connector, view.task), id=view.task, status=instance_status(view.status)
    )


def connector_status(view: ConnectorStatusView) -> connectors_pb2.ConnectorStatus:
    return connectors_pb2.ConnectorStatus(
        name=format_connector(view.name),
        type=CONNECTOR_TYPES[view.type],
        connector=instance_status(view.connector),
        tasks=[task_status(t) for t in view.tasks],
    )


def connector(
    info: ConnectorInfo | None, status: ConnectorStatusView | None = None, name: str | None = None
) -> connectors_pb2.Connector:
    message = connectors_pb2.Connector()
    if info is not None:
        message.name = format_connector(info.name)
        message.config.update(info.config)
        message.type = CONNECTOR_TYPES[info.type]
        message.tasks.extend(format_task(info.name, t) for t in info.tasks)
        message.target_state = TARGET_STATES[info.target_state]
        message.config_position = info.config_position
        message.etag = info.etag
        message.notices.extend(connectors_pb2.Notice(code=n.code, message=n.message) for n in info.notices)
    elif name is not None:
        message.name = format_connector(name)
    if status is not None:
        message.name = format_connector(status.name)
        message.type = CONNECTOR_TYPES[status.type]
        message.status.CopyFrom(connector_status(status))
    return message


def plugin(desc: PluginDesc) -> plugins_pb2.Plugin:
    return plugins_pb2.Plugin(
        name=f"plugins/{desc.class_name}",
        class_name=desc.class_name,
        type=plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR
        if desc.type is PluginType.SOURCE
        else plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR,
        version=desc.version,
        aliases=list(desc.aliases),
    )


def transform_plugin(cls: type, predicate: bool) -> plugins_pb2.Plugin:
    """A transform or predicate class as a Plugin: named by its class path, with its aliases."""
    class_name = class_name_of(cls)
    return plugins_pb2.Plugin(
        name=f"plugins/{class_name}",
        class_name=class_name,
        type=plugins_pb2.PLUGIN_TYPE_PREDICATE if predicate else plugins_pb2.PLUGIN_TYPE_TRANSFORMATION,
        version=str(getattr(cls, "VERSION", "") or sluiceway.__version__),
        aliases=[cls.__name__, *getattr(cls, "ALIASES", ())],
    )


def config_key(key: ConfigKey) -> plugins_pb2.ConfigKeyDefinition:
    definition = plugins_pb2.ConfigKeyDefinition(
        name=key.name,
        type=plugins_pb2.ConfigType.Value(f"CONFIG_TYPE_{key.type.name}"),
        required=key.required,
        importance=plugins_pb2.Importance.Value(f"IMPORTANCE_{key.importance.name}"),
        documentation=key.documentation or "",
        group=key.group or "",
        order_in_group=key.order_in_group,
        display_name=key.display_name or key.name,
        dependents=list(key.dependents),
        valid_values=key.valid_values(),
    )
    default = key.default_as_string()
    if default is not None:
        definition.default_value = default
    return definition


def render_value(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Password):
        return HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


def config_value(value: ConfigValue, secret: bool) -> plugins_pb2.ConfigValue:
    message = plugins_pb2.ConfigValue(
        name=value.name,
        recommended_values=[v for v in (render_value(r) for r in value.recommended_values) if v is not None],
        errors=[redact_url_credentials(error) for error in value.errors],
        visible=value.visible,
    )
    rendered = render_value(value.value)
    if rendered is not None:
        message.value = HIDDEN if secret else redact_url_credentials(rendered)
    return message


def validation(infos: ConfigInfos, secret_keys: set[str]) -> plugins_pb2.ValidateConnectorConfigResponse:
    response = plugins_pb2.ValidateConnectorConfigResponse(
        plugin_class_name=infos.plugin_class_name, error_count=infos.error_count, groups=list(infos.groups)
    )
    for info in infos.configs:
        entry = response.configs.add()
        if info.definition is not None:
            entry.definition.CopyFrom(config_key(info.definition))
        entry.value.CopyFrom(config_value(info.value, info.value.name in secret_keys))
    return response


def deleted_callback(result: DeletedCallbackResult) -> connectors_pb2.DeletedCallback:
    outcome = connectors_pb2.DeletedCallback.Outcome.Value(f"OUTCOME_{result.outcome.value}")
    return connectors_pb2.DeletedCallback(outcome=outcome, error=redact_url_credentials(result.error))
