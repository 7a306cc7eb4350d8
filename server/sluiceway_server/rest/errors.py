"""Failures as Kafka Connect's REST API reports them: an HTTP status and the body
`{"error_code": <status>, "message": "..."}`. The status follows the failure's `ErrorInfo` reason
(the same reasons the gRPC API sends), so a script written for Kafka Connect sees 404 for an unknown
connector, 409 for one that exists, 400 for a bad config; we add the reason itself as `reason`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import grpc
from aiohttp import web

from sluiceway.errors import Reason, SluicewayError

__all__ = ["HTTP_STATUS_BY_REASON", "RestError", "error_response", "http_status"]

# One row per reason the control plane sends (tests/unit/server/test_rest_bodies.py checks it).
# Kafka Connect answers a request that times out, and a connector that throws, with 500; it
# answers "rebalance in progress" with 409, where we have no rebalance but can be between
# leaders, which is 503 with Retry-After.
HTTP_STATUS_BY_REASON: Final[Mapping[Reason, int]] = {
    Reason.CONNECTOR_NOT_FOUND: 404,
    Reason.TASK_NOT_FOUND: 404,
    Reason.PLUGIN_NOT_FOUND: 404,
    Reason.LOGGER_NOT_FOUND: 404,
    Reason.CONNECTOR_ALREADY_EXISTS: 409,
    Reason.INVALID_CONFIG: 400,
    Reason.INVALID_REQUEST: 400,
    Reason.INVALID_OFFSETS: 400,
    Reason.REQUEST_ID_REUSED: 400,
    Reason.LIMIT_EXCEEDED: 400,
    Reason.CONNECTOR_NOT_STOPPED: 400,
    Reason.CONSUMER_GROUP_ACTIVE: 409,
    Reason.CONNECTOR_REJECTED_OFFSETS: 400,
    Reason.CONNECTOR_ERROR: 500,
    Reason.ETAG_MISMATCH: 412,
    Reason.NO_LEADER: 503,
    Reason.NOT_LEADER: 503,
    Reason.STORAGE_UNAVAILABLE: 503,
    Reason.TOPIC_TRACKING_DISABLED: 403,
    Reason.TOPIC_TRACKING_RESET_DISABLED: 403,
    Reason.NOT_AUTHORIZED: 403,
    Reason.UNAUTHENTICATED: 401,
    Reason.REQUEST_TIMED_OUT: 500,
    Reason.PLUGIN_TIMEOUT: 500,
}
# For a status without a reason of ours (gRPC's own failures).
_HTTP_STATUS_BY_CODE: Final[Mapping[grpc.StatusCode, int]] = {
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
}


class RestError(Exception):
    """A request the REST layer refuses itself, before any call: bad JSON, a bad path or query."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def http_status(error: SluicewayError) -> int:
    try:
        return HTTP_STATUS_BY_REASON[Reason(error.reason or "")]
    except (KeyError, ValueError):
        return _HTTP_STATUS_BY_CODE.get(error.code, 500)


def _message(error: SluicewayError) -> str:
    if error.reason != Reason.INVALID_CONFIG or not error.field_violations:
        return error.message
    lines = [f"{v.field}: {v.description}" for v in error.field_violations]
    return (
        f"{error.message}\nThe config has {len(lines)} error(s):\n"
        + "\n".join(lines)
        + "\nPUT /connector-plugins/{plugin}/config/validate lists them key by key."
    )


def error_response(failure: SluicewayError | RestError) -> web.Response:
    """The Kafka Connect error body for a failed call or a refused request."""
    if isinstance(failure, RestError):
        return web.json_response(
            {"error_code": failure.status, "message": failure.message}, status=failure.status
        )
    status = http_status(failure)
    body = {"error_code": status, "message": _message(failure)}
    if failure.reason:
        body["reason"] = failure.reason
    headers: dict[str, str] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="sluiceway"'
    if failure.retry_delay is not None or status == 503:
        headers["Retry-After"] = str(max(1, round(failure.retry_delay or 1)))
    return web.json_response(body, status=status, headers=headers)
