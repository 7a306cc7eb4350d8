"""The REST API's routes, each with the gRPC calls it makes. This table is the only list of routes:
the HTTP server (rest/app.py) registers exactly these, and the OpenAPI document (rest/openapi.py) is
built from them. Which role a route needs is not written here: it is the role of the gRPC calls it
makes (their `method_policy` in the protos), checked by the same interceptor as on the gRPC side."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sluiceway.api.v1 import cluster_pb2, connectors_pb2, offsets_pb2, plugins_pb2, topics_pb2
from sluiceway_server.rest import handlers
from sluiceway_server.rest.handlers import Handler
from sluiceway_server.rpc_methods import method_path

__all__ = ["ROUTES", "Query", "Route"]


def _rpc(module: object, service: str, method: str) -> str:
    return method_path(module.DESCRIPTOR.services_by_name[service], method)  # type: ignore[attr-defined]


def _cluster(method: str) -> str:
    return _rpc(cluster_pb2, "ClusterService", method)


def _connectors(method: str) -> str:
    return _rpc(connectors_pb2, "ConnectorService", method)


def _offsets(method: str) -> str:
    return _rpc(offsets_pb2, "OffsetService", method)


def _topics(method: str) -> str:
    return _rpc(topics_pb2, "TopicService", method)


def _plugins(method: str) -> str:
    return _rpc(plugins_pb2, "PluginService", method)


@dataclass(frozen=True)
class Query:
    """A query parameter: its name, JSON type, and a sentence."""

    name: str
    kind: str
    doc: str
    repeated: bool = False


@dataclass(frozen=True)
class Route:
    """One method on one path. `rpcs` are the gRPC methods it calls (empty: answered by the REST
    layer alone, and open to every caller, like gRPC's health service); `ok` is its success
    status; `request` and `response` name schemas of rest/openapi.py (None: no body)."""

    method: str
    path: str
    handler: Handler
    summary: str
    rpcs: tuple[str, ...]
    ok: int
    request: str | None = None
    response: str | None = None
    query: tuple[Query, ...] = ()
    tag: str = "connectors"
    # Other success statuses the route answers with (their bodies: `response`, or none for 204).
    also: tuple[int, ...] = ()

    @property
    def open(self) -> bool:
        return not self.rpcs


_NAME = "/connectors/{connector}"
_INCLUDE_TASKS = Query("includeTasks", "boolean", "Restart the connector's tasks as well (default false).")
_ONLY_FAILED = Query("onlyFailed", "boolean", "Restart only the instances that are FAILED (default false).")

ROUTES: Final[tuple[Route, ...]] = (
    Route(
        "GET",
        "/",
        handlers.root,
        "Version and commit of this control plane, and the Kafka cluster it keeps its state in",
        (_cluster("GetServerInfo"),),
        200,
        response="ServerInfo",
        tag="cluster",
    ),
    Route(
        "GET",
        "/health",
        handlers.health,
        "Whether this replica is ready",
        (),
        200,
        response="Health",
        tag="cluster",
    ),
    Route("GET", "/openapi.json", handlers.openapi, "This document", (), 200, tag="cluster"),
    Route(
        "GET",
        "/admin/loggers",
        handlers.list_loggers,
        "This replica's root logger and every logger with a level of its own (KIP-495)",
        (_cluster("ListLoggers"),),
        200,
        response="Loggers",
        tag="admin",
    ),
    Route(
        "GET",
        "/admin/loggers/{logger}",
        handlers.get_logger,
        "The level one logger of this replica logs at",
        (_cluster("GetLogger"),),
        200,
        response="LoggerLevel",
        tag="admin",
    ),
    Route(
        "PUT",
        "/admin/loggers/{logger}",
        handlers.set_logger_level,
        "Set the level of a logger of this replica and of the loggers below it with a level of their own",
        (_cluster("SetLoggerLevel"),),
        200,
        request="LoggerLevel",
        response="LoggerNames",
        query=(Query("scope", "string", "`worker` (the default): this replica; `cluster` is refused."),),
        tag="admin",
    ),
    Route(
        "GET",
        "/connectors",
        handlers.list_connectors,
        "The connectors' names, or with `expand` their status and info by name",
        (_connectors("ListConnectors"),),
        200,
        response="ConnectorList",
        query=(
            Query("expand", "string", "`status`, `info`, or both (repeat the parameter).", repeated=True),
        ),
    ),
    Route(
        "POST",
        "/connectors",
        handlers.create_connector,
        "Create a connector (KIP-980's `initial_state`: RUNNING, PAUSED or STOPPED)",
        (_connectors("CreateConnector"),),
        201,
        request="CreateConnectorRequest",
        response="ConnectorInfo",
    ),
    Route(
        "GET",
        _NAME,
        handlers.get_connector,
        "A connector's config, tasks and type",
        (_connectors("GetConnector"),),
        200,
        response="ConnectorInfo",
    ),
    Route(
        "DELETE",
        _NAME,
        handlers.delete_connector,
        "Delete a connector and stop its tasks",
        (_connectors("DeleteConnector"),),
        204,
    ),
    Route(
        "GET",
        f"{_NAME}/config",
        handlers.get_config,
        "A connector's config",
        (_connectors("GetConnector"),),
        200,
        response="Config",
    ),
    Route(
        "PUT",
        f"{_NAME}/config",
        handlers.put_config,
        "Replace a connector's config, or create the connector (201)",
        (_connectors("ReplaceConnectorConfig"),),
        200,
        request="Config",
        response="ConnectorInfo",
        also=(201,),
    ),
    Route(
        "PATCH",
        f"{_NAME}/config",
        handlers.patch_config,
        "Change some keys of a connector's config; a null value removes the key",
        (_connectors("PatchConnectorConfig"),),
        200,
        request="ConfigPatch",
        response="ConnectorInfo",
    ),
    Route(
        "GET",
        f"{_NAME}/status",
        handlers.status,
        "The state of a connector and of each of its tasks",
        (_connectors("GetConnectorStatus"),),
        200,
        response="ConnectorStateInfo",
    ),
    Route(
        "GET",
        f"{_NAME}/tasks",
        handlers.tasks,
        "A connector's tasks and their configs",
        (_connectors("ListTasks"),),
        200,
        response="TaskInfoList",
    ),
    Route(
        "GET",
        f"{_NAME}/tasks-config",
        handlers.tasks_config,
        "Each task's config under `{connector}-{task}` (Kafka Connect deprecates this route)",
        (_connectors("ListTasks"),),
        200,
        response="TasksConfig",
    ),
    Route(
        "GET",
        f"{_NAME}/tasks/{{task}}/status",
        handlers.task_status,
        "The state of one task",
        (_connectors("GetTaskStatus"),),
        200,
        response="TaskState",
    ),
    Route(
        "POST",
        f"{_NAME}/tasks/{{task}}/restart",
        handlers.restart_task,
        "Restart one task",
        (_connectors("RestartTask"),),
        204,
    ),
    Route(
        "PUT",
        f"{_NAME}/pause",
        handlers.pause,
        "Pause a connector and its tasks",
        (_connectors("PauseConnector"),),
        202,
    ),
    Route(
        "PUT",
        f"{_NAME}/resume",
        handlers.resume,
        "Resume a paused or stopped connector",
        (_connectors("ResumeConnector"),),
        202,
    ),
    Route(
        "PUT",
        f"{_NAME}/stop",
        handlers.stop,
        "Stop a connector and shut its tasks down (KIP-875)",
        (_connectors("StopConnector"),),
        204,
    ),
    Route(
        "POST",
        f"{_NAME}/restart",
        handlers.restart,
        "Restart a connector (204); with includeTasks or onlyFailed the chosen instances (202, states)",
        (_connectors("RestartConnector"),),
        202,
        response="ConnectorStateInfo",
        query=(_INCLUDE_TASKS, _ONLY_FAILED),
        also=(204,),
    ),
    Route(
        "GET",
        f"{_NAME}/offsets",
        handlers.get_offsets,
        "A connector's offsets (KIP-875)",
        (_offsets("GetConnectorOffsets"),),
        200,
        response="ConnectorOffsets",
        tag="offsets",
    ),
    Route(
        "PATCH",
        f"{_NAME}/offsets",
        handlers.alter_offsets,
        "Alter a stopped connector's offsets (KIP-875)",
        (_offsets("AlterConnectorOffsets"),),
        200,
        request="ConnectorOffsets",
        response="Message",
        tag="offsets",
    ),
    Route(
        "DELETE",
        f"{_NAME}/offsets",
        handlers.reset_offsets,
        "Reset a stopped connector's offsets (KIP-875)",
        (_offsets("ResetConnectorOffsets"),),
        200,
        response="Message",
        tag="offsets",
    ),
    Route(
        "GET",
        f"{_NAME}/topics",
        handlers.topics,
        "The topics a connector has used (KIP-558)",
        (_topics("GetActiveTopics"),),
        200,
        response="ActiveTopics",
        tag="topics",
    ),
    Route(
        "PUT",
        f"{_NAME}/topics/reset",
        handlers.reset_topics,
        "Empty a connector's set of topics (KIP-558)",
        (_topics("ResetActiveTopics"),),
        202,
        tag="topics",
    ),
    Route(
        "GET",
        "/connector-plugins",
        handlers.list_plugins,
        "The installed connector plugins; with connectorsOnly=false transforms and predicates too",
        (_plugins("ListPlugins"),),
        200,
        response="PluginInfoList",
        query=(Query("connectorsOnly", "boolean", "List connector plugins only (default true)."),),
        tag="plugins",
    ),
    Route(
        "GET",
        "/connector-plugins/{plugin}/config",
        handlers.plugin_config,
        "A plugin's config keys",
        (_plugins("GetPluginConfigDefinition"),),
        200,
        response="ConfigKeyInfoList",
        tag="plugins",
    ),
    Route(
        "PUT",
        "/connector-plugins/{plugin}/config/validate",
        handlers.validate,
        "Check a config against a plugin, key by key, without creating anything",
        (_plugins("ValidateConnectorConfig"),),
        200,
        request="Config",
        response="ConfigInfos",
        tag="plugins",
    ),
)
