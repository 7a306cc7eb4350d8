"""One coroutine per Kafka Connect REST route: read the path, query and body, make the gRPC call(s)
through the gateway, and answer with Kafka Connect's body and status. No connector logic lives
here; every decision (validation, roles, forwarding, idempotency) is the gRPC API's."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import quote

from aiohttp import web

from sluiceway.api.v1 import cluster_pb2, connectors_pb2, offsets_pb2, plugins_pb2, topics_pb2
from sluiceway_server.readiness import HTTP_STATUS
from sluiceway_server.rest import kafka_json
from sluiceway_server.rest.errors import RestError
from sluiceway_server.rest.gateway import Caller, GrpcGateway

__all__ = ["Exchange", "Handler", "HealthSource"]

_TRUE_FALSE: Final = {"true": True, "false": False}
_EXPANSIONS: Final = {
    frozenset(): connectors_pb2.CONNECTOR_VIEW_NAMES,
    frozenset({"info"}): connectors_pb2.CONNECTOR_VIEW_INFO,
    frozenset({"status"}): connectors_pb2.CONNECTOR_VIEW_STATUS,
    frozenset({"info", "status"}): connectors_pb2.CONNECTOR_VIEW_FULL,
}


class HealthSource(Protocol):
    """The replica's readiness as GET /health reports it: `starting`, `healthy`, `unhealthy` or
    `stopping`, and a sentence."""

    def state(self) -> tuple[str, str]: ...


@dataclass(frozen=True)
class Exchange:
    """One HTTP request on its way to the gRPC API."""

    request: web.Request
    gateway: GrpcGateway
    caller: Caller
    health: HealthSource | None
    openapi: Callable[[], dict[str, Any]]

    def path(self, name: str) -> str:
        return self.request.match_info[name]

    @property
    def connector(self) -> str:
        return self.path("connector")

    @property
    def resource(self) -> str:
        return f"connectors/{self.connector}"

    def flag(self, name: str, default: bool) -> bool:
        """A true/false query parameter, as Kafka Connect reads them."""
        value = self.request.query.get(name)
        if value is None or value == "":
            return default
        parsed = _TRUE_FALSE.get(value.lower())
        if parsed is None:
            raise RestError(400, f"Query parameter {name} must be true or false, got {value!r}")
        return parsed

    def task_number(self) -> int:
        text = self.path("task")
        if not text.isdigit():
            raise RestError(404, f"Task {text!r} is not a task number")
        return int(text)

    async def body(self) -> Any:
        if not self.request.can_read_body:
            raise RestError(400, "This request needs a JSON body")
        try:
            return json.loads(await self.request.read())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RestError(400, f"The body is not valid JSON: {exc}") from None


Handler = Callable[[Exchange], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(body, status=status, headers=headers)


def _empty(status: int) -> web.Response:
    return web.Response(status=status)


def _location(name: str) -> dict[str, str]:
    return {"Location": f"/connectors/{quote(name, safe='')}"}


# --- cluster ---------------------------------------------------------------------------------


async def root(x: Exchange) -> web.StreamResponse:
    info = await x.gateway.call(x.gateway.cluster.GetServerInfo, cluster_pb2.GetServerInfoRequest(), x.caller)
    return _json(kafka_json.server_info(info))


async def health(x: Exchange) -> web.StreamResponse:
    if x.health is None:
        return _json({"status": "healthy", "message": "The control plane is serving requests."})
    status, message = x.health.state()
    return _json({"status": status, "message": message}, HTTP_STATUS.get(status, 500))  # type: ignore[call-overload]


async def openapi(x: Exchange) -> web.StreamResponse:
    return _json(x.openapi())


def _logger_level(logger: cluster_pb2.Logger) -> dict[str, Any]:
    modified = logger.last_modified.ToMilliseconds() if logger.HasField("last_modified") else None
    return {"level": logger.level, "last_modified": modified}


async def list_loggers(x: Exchange) -> web.StreamResponse:
    answer = await x.gateway.call(x.gateway.cluster.ListLoggers, cluster_pb2.ListLoggersRequest(), x.caller)
    return _json({logger.name: _logger_level(logger) for logger in answer.loggers})


async def get_logger(x: Exchange) -> web.StreamResponse:
    request = cluster_pb2.GetLoggerRequest(name=x.path("logger"))
    return _json(_logger_level(await x.gateway.call(x.gateway.cluster.GetLogger, request, x.caller)))


async def set_logger_level(x: Exchange) -> web.StreamResponse:
    # Kafka Connect's default scope is this worker; an unknown scope falls back to it, as there.
    if x.request.query.get("scope", "worker").lower() == "cluster":
        raise RestError(
            400,
            "scope=cluster is not served: each replica keeps its own log levels; set them on each "
            "replica (scope=worker, the default)",
        )
    body = await x.body()
    level = body.get("level") if isinstance(body, dict) else None
    if not isinstance(level, str):
        raise RestError(400, 'The body must name the new level: {"level": "DEBUG"}')
    request = cluster_pb2.SetLoggerLevelRequest(name=x.path("logger"), level=level)
    answer = await x.gateway.call(x.gateway.cluster.SetLoggerLevel, request, x.caller)
    return _json(list(answer.loggers))


# --- connectors ------------------------------------------------------------------------------


async def list_connectors(x: Exchange) -> web.StreamResponse:
    expand = frozenset(x.request.query.getall("expand", []))
    view = _EXPANSIONS.get(expand & {"info", "status"})
    assert view is not None
    request = connectors_pb2.ListConnectorsRequest(view=view)
    connectors = [
        c
        async for c in x.gateway.pages(
            x.gateway.connectors.ListConnectors, request, x.caller, lambda page: list(page.connectors)
        )
    ]
    if not expand & {"info", "status"}:
        return _json([kafka_json.connector_info(c)["name"] for c in connectors])
    expanded: dict[str, Any] = {}
    for connector in connectors:
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = kafka_json.connector_state_info(connector.status)
        if "info" in expand:
            entry["info"] = kafka_json.connector_info(connector)
        expanded[kafka_json.connector_info(connector)["name"]] = entry
    return _json(expanded)


async def create_connector(x: Exchange) -> web.StreamResponse:
    body = await x.body()
    if not isinstance(body, dict):
        raise RestError(400, "The body must be a JSON object with `name` and `config`")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RestError(400, "The body needs the connector's `name`")
    name = name.strip()
    config = kafka_json.config_object(body.get("config"))
    config.setdefault("name", name)  # Kafka Connect keeps the name in the config
    request = connectors_pb2.CreateConnectorRequest(
        connector_id=name,
        connector=connectors_pb2.Connector(config=config),
        initial_state=kafka_json.initial_state(body.get("initial_state")),
    )
    created = await x.gateway.call(x.gateway.connectors.CreateConnector, request, x.caller)
    return _json(kafka_json.connector_info(created), 201, _location(name))


async def _info(x: Exchange) -> connectors_pb2.Connector:
    request = connectors_pb2.GetConnectorRequest(name=x.resource, view=connectors_pb2.CONNECTOR_VIEW_INFO)
    return await x.gateway.call(x.gateway.connectors.GetConnector, request, x.caller)


async def get_connector(x: Exchange) -> web.StreamResponse:
    return _json(kafka_json.connector_info(await _info(x)))


async def get_config(x: Exchange) -> web.StreamResponse:
    return _json(dict((await _info(x)).config))


async def put_config(x: Exchange) -> web.StreamResponse:
    config = kafka_json.config_object(await x.body())
    config.setdefault("name", x.connector)
    request = connectors_pb2.ReplaceConnectorConfigRequest(name=x.resource, config=config)
    answer = await x.gateway.call(x.gateway.connectors.ReplaceConnectorConfig, request, x.caller)
    info = kafka_json.connector_info(answer.connector)
    return _json(info, 201, _location(x.connector)) if answer.created else _json(info)


async def patch_config(x: Exchange) -> web.StreamResponse:
    changed, removed = kafka_json.patch_object(await x.body())
    request = connectors_pb2.PatchConnectorConfigRequest(name=x.resource, set=changed, remove=removed)
    patched = await x.gateway.call(x.gateway.connectors.PatchConnectorConfig, request, x.caller)
    return _json(kafka_json.connector_info(patched))


async def delete_connector(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.DeleteConnectorRequest(name=x.resource)
    await x.gateway.call(x.gateway.connectors.DeleteConnector, request, x.caller)
    return _empty(204)


async def status(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.GetConnectorStatusRequest(name=x.resource)
    answer = await x.gateway.call(x.gateway.connectors.GetConnectorStatus, request, x.caller)
    return _json(kafka_json.connector_state_info(answer))


async def _tasks(x: Exchange) -> list[connectors_pb2.Task]:
    request = connectors_pb2.ListTasksRequest(parent=x.resource)
    return [
        t
        async for t in x.gateway.pages(
            x.gateway.connectors.ListTasks, request, x.caller, lambda page: list(page.tasks)
        )
    ]


async def tasks(x: Exchange) -> web.StreamResponse:
    return _json(kafka_json.task_infos(x.connector, await _tasks(x)))


async def tasks_config(x: Exchange) -> web.StreamResponse:
    return _json(kafka_json.tasks_config(x.connector, await _tasks(x)))


async def task_status(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.GetTaskStatusRequest(name=f"{x.resource}/tasks/{x.task_number()}")
    answer = await x.gateway.call(x.gateway.connectors.GetTaskStatus, request, x.caller)
    return _json(kafka_json.task_state(answer))


async def pause(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.PauseConnectorRequest(name=x.resource)
    await x.gateway.call(x.gateway.connectors.PauseConnector, request, x.caller)
    return _empty(202)


async def resume(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.ResumeConnectorRequest(name=x.resource)
    await x.gateway.call(x.gateway.connectors.ResumeConnector, request, x.caller)
    return _empty(202)


async def stop(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.StopConnectorRequest(name=x.resource)
    await x.gateway.call(x.gateway.connectors.StopConnector, request, x.caller)
    return _empty(204)


async def restart(x: Exchange) -> web.StreamResponse:
    include_tasks = x.flag("includeTasks", False)
    only_failed = x.flag("onlyFailed", False)
    request = connectors_pb2.RestartConnectorRequest(
        name=x.resource, include_tasks=include_tasks, only_failed=only_failed
    )
    answer = await x.gateway.call(x.gateway.connectors.RestartConnector, request, x.caller)
    if not include_tasks and not only_failed:  # Kafka Connect's plain restart answers 204
        return _empty(204)
    return _json(kafka_json.connector_state_info(answer), 202)


async def restart_task(x: Exchange) -> web.StreamResponse:
    request = connectors_pb2.RestartTaskRequest(name=f"{x.resource}/tasks/{x.task_number()}")
    await x.gateway.call(x.gateway.connectors.RestartTask, request, x.caller)
    return _empty(204)


# --- offsets and topics ----------------------------------------------------------------------


async def get_offsets(x: Exchange) -> web.StreamResponse:
    request = offsets_pb2.GetConnectorOffsetsRequest(name=x.resource)
    answer = await x.gateway.call(x.gateway.offsets.GetConnectorOffsets, request, x.caller)
    return _json(kafka_json.connector_offsets(answer))


async def alter_offsets(x: Exchange) -> web.StreamResponse:
    offsets = kafka_json.offsets_request(await x.body())
    request = offsets_pb2.AlterConnectorOffsetsRequest(name=x.resource, offsets=offsets)
    answer = await x.gateway.call(x.gateway.offsets.AlterConnectorOffsets, request, x.caller)
    return _json({"message": answer.message})


async def reset_offsets(x: Exchange) -> web.StreamResponse:
    request = offsets_pb2.ResetConnectorOffsetsRequest(name=x.resource)
    answer = await x.gateway.call(x.gateway.offsets.ResetConnectorOffsets, request, x.caller)
    return _json({"message": answer.message})


async def topics(x: Exchange) -> web.StreamResponse:
    request = topics_pb2.GetActiveTopicsRequest(name=x.resource)
    answer = await x.gateway.call(x.gateway.topics.GetActiveTopics, request, x.caller)
    return _json({x.connector: {"topics": sorted(answer.topics)}})


async def reset_topics(x: Exchange) -> web.StreamResponse:
    request = topics_pb2.ResetActiveTopicsRequest(name=x.resource)
    await x.gateway.call(x.gateway.topics.ResetActiveTopics, request, x.caller)
    return _empty(202)


# --- plugins ---------------------------------------------------------------------------------


async def list_plugins(x: Exchange) -> web.StreamResponse:
    request = plugins_pb2.ListPluginsRequest(include_all_types=not x.flag("connectorsOnly", True))
    listed = [
        kafka_json.plugin_info(p)
        async for p in x.gateway.pages(
            x.gateway.plugins.ListPlugins, request, x.caller, lambda page: list(page.plugins)
        )
    ]
    return _json(listed)


async def plugin_config(x: Exchange) -> web.StreamResponse:
    request = plugins_pb2.GetPluginConfigDefinitionRequest(name=f"plugins/{x.path('plugin')}")
    answer = await x.gateway.call(x.gateway.plugins.GetPluginConfigDefinition, request, x.caller)
    return _json([kafka_json.config_key_info(key) for key in answer.keys])


async def validate(x: Exchange) -> web.StreamResponse:
    config = kafka_json.config_object(await x.body())
    request = plugins_pb2.ValidateConnectorConfigRequest(plugin=f"plugins/{x.path('plugin')}", config=config)
    answer = await x.gateway.call(x.gateway.plugins.ValidateConnectorConfig, request, x.caller)
    return _json(kafka_json.config_infos(answer))
