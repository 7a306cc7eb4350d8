"""The OpenAPI 3.1 document of the REST API, built from the route table (rest/routes.py) and the
schemas of Kafka Connect's bodies below, so it lists exactly the routes the server answers. Each
operation also names the gRPC calls it makes and the role they need (`x-sluiceway-rpcs`,
`x-sluiceway-role`), read from the protos' `method_policy`."""

from __future__ import annotations

import re
from typing import Any, Final

from sluiceway import __version__
from sluiceway.api.v1 import annotations_pb2
from sluiceway_server.rest.routes import ROUTES, Route
from sluiceway_server.rpc_methods import METHODS, policy

__all__ = ["SCHEMAS", "openapi_document"]

_STRING: Final = {"type": "string"}
_STRINGS: Final = {"type": "array", "items": _STRING}
_CONFIG: Final = {"type": "object", "additionalProperties": _STRING}
_PRIMITIVES: Final = {
    "type": "object",
    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str], /, **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


_STATE: Final = _object(
    ["state", "worker_id"],
    state={"type": "string", "enum": ["UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"]},
    worker_id=_STRING,
    trace={"type": "string", "description": "The stack trace of the failure; absent when there is none."},
)

SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "Error": _object(
        ["error_code", "message"],
        error_code={"type": "integer", "description": "The HTTP status again."},
        message=_STRING,
        reason={"type": "string", "description": "The gRPC API's ErrorInfo reason, when there is one."},
    ),
    "ServerInfo": _object(
        ["version", "commit", "kafka_cluster_id"], version=_STRING, commit=_STRING, kafka_cluster_id=_STRING
    ),
    "Health": _object(
        ["status", "message"],
        status={"type": "string", "enum": ["starting", "healthy", "unhealthy", "stopping"]},
        message=_STRING,
    ),
    "Config": _CONFIG,
    "LoggerLevel": _object(
        ["level"],
        level={"type": "string", "enum": ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]},
        last_modified={
            "type": ["integer", "null"],
            "description": "When it was last set, in ms; null: at start-up.",
        },
    ),
    "Loggers": {"type": "object", "additionalProperties": _ref("LoggerLevel")},
    "LoggerNames": _STRINGS,
    "ConfigPatch": {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
    "CreateConnectorRequest": _object(
        ["name", "config"],
        name=_STRING,
        config=_CONFIG,
        initial_state={"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"]},
    ),
    "ConnectorTaskId": _object(["connector", "task"], connector=_STRING, task={"type": "integer"}),
    "ConnectorInfo": _object(
        ["name", "config", "tasks", "type"],
        name=_STRING,
        config=_CONFIG,
        tasks={"type": "array", "items": _ref("ConnectorTaskId")},
        type={"type": "string", "enum": ["source", "sink", "unknown"]},
    ),
    "TaskState": {"allOf": [_object(["id"], id={"type": "integer"}), _STATE]},
    "ConnectorStateInfo": _object(
        ["name", "connector", "tasks", "type"],
        name=_STRING,
        connector=_STATE,
        tasks={"type": "array", "items": _ref("TaskState")},
        type={"type": "string", "enum": ["source", "sink", "unknown"]},
    ),
    "ConnectorList": {
        "oneOf": [
            _STRINGS,
            {
                "type": "object",
                "additionalProperties": _object(
                    [], status=_ref("ConnectorStateInfo"), info=_ref("ConnectorInfo")
                ),
            },
        ]
    },
    "TaskInfoList": {
        "type": "array",
        "items": _object(["id", "config"], id=_ref("ConnectorTaskId"), config=_CONFIG),
    },
    "TasksConfig": {"type": "object", "additionalProperties": _CONFIG},
    "ConnectorOffsets": _object(
        ["offsets"],
        offsets={
            "type": "array",
            "items": _object(
                ["partition", "offset"],
                partition=_PRIMITIVES,
                offset={"oneOf": [_PRIMITIVES, {"type": "null"}]},
            ),
        },
    ),
    "Message": _object(["message"], message=_STRING),
    "ActiveTopics": {"type": "object", "additionalProperties": _object(["topics"], topics=_STRINGS)},
    "PluginInfoList": {
        "type": "array",
        "items": _object(["class", "type"], **{"class": _STRING, "type": _STRING, "version": _STRING}),
    },
    "ConfigKeyInfo": _object(
        ["name", "type", "required", "importance", "documentation"],
        name=_STRING,
        type=_STRING,
        required={"type": "boolean"},
        default_value={"type": ["string", "null"]},
        importance=_STRING,
        documentation=_STRING,
        group={"type": ["string", "null"]},
        order={"type": "integer"},
        width=_STRING,
        display_name=_STRING,
        dependents=_STRINGS,
    ),
    "ConfigKeyInfoList": {"type": "array", "items": _ref("ConfigKeyInfo")},
    "ConfigInfos": _object(
        ["name", "error_count", "groups", "configs"],
        name=_STRING,
        error_count={"type": "integer"},
        groups=_STRINGS,
        configs={
            "type": "array",
            "items": _object(
                ["definition", "value"],
                definition=_ref("ConfigKeyInfo"),
                value=_object(
                    ["name", "errors", "visible"],
                    name=_STRING,
                    value={"type": ["string", "null"]},
                    recommended_values=_STRINGS,
                    errors=_STRINGS,
                    visible={"type": "boolean"},
                ),
            ),
        },
    ),
}

_REASONS: Final = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    204: "No content",
    400: "Bad request: the body, a parameter or the config",
    401: "No valid credentials",
    403: "The caller's role may not do this",
    404: "No such connector, task, plugin or route",
    409: "The connector already exists, or a conflict with its state",
    500: "The control plane failed, or the request ran out of time",
    503: "No leader is known yet; retry after Retry-After seconds",
}
_ROLE_NAMES: Final = {
    annotations_pb2.ROLE_VIEWER: "viewer",
    annotations_pb2.ROLE_OPERATOR: "operator",
    annotations_pb2.ROLE_ADMIN: "admin",
}


def _role(route: Route) -> str:
    """The strongest role among the route's calls (they are all of one role today)."""
    ranks = [policy(METHODS[rpc]).role for rpc in route.rpcs]
    return _ROLE_NAMES.get(max(ranks), "none") if ranks else "none"


def _json_body(schema: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(schema)}}}


def _operation(route: Route) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status in (route.ok, *route.also):
        entry: dict[str, Any] = {"description": _REASONS[status]}
        if status != 204 and route.response is not None:
            entry.update(_json_body(route.response))
        responses[str(status)] = entry
    for status in (400, 401, 403, 404, 409, 500, 503):
        if route.open and status in (401, 403):
            continue
        responses.setdefault(str(status), {"description": _REASONS[status], **_json_body("Error")})
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": _STRING}
        for name in re.findall(r"{(\w+)}", route.path)
    ]
    for query in route.query:
        schema: dict[str, Any] = {"type": query.kind}
        if query.repeated:
            schema = {"type": "array", "items": schema}
        parameters.append(
            {"name": query.name, "in": "query", "required": False, "description": query.doc, "schema": schema}
        )
    operation: dict[str, Any] = {
        "summary": route.summary,
        "tags": [route.tag],
        "operationId": route.handler.__name__,
        "parameters": parameters,
        "responses": responses,
        "x-sluiceway-rpcs": list(route.rpcs),
        "x-sluiceway-role": _role(route),
    }
    if route.open:
        operation["security"] = []
    if route.request is not None:
        operation["requestBody"] = {"required": True, **_json_body(route.request)}
    return operation


def openapi_document() -> dict[str, Any]:
    """The whole document, built anew from the route table on each call."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Sluiceway: Kafka Connect's REST API",
            "version": __version__,
            "description": (
                "Kafka Connect's REST API, served by a Sluiceway control-plane replica over the same "
                "calls as its gRPC API. With authentication on, send a bearer token or a client "
                "certificate; each operation's x-sluiceway-role is the role it needs."
            ),
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
