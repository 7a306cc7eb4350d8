"""Herder errors → gRPC statuses with google.rpc.ErrorInfo (domain "sluiceway"), BadRequest
field violations and RetryInfo. The status code follows the error's reason, through the shared
table in `sluiceway.errors`. Bad input never becomes INTERNAL or UNKNOWN."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from sluiceway.common.limits import MAX_REQUEST_BYTES
from sluiceway.common.log_context import log_fields
from sluiceway.errors import ERROR_DOMAIN, FieldViolation, Reason, status_code_for
from sluiceway_server.errors import (
    InvalidArgumentError,
    LimitExceededError,
    ServerError,
    UnavailableError,
)
from sluiceway_server.storage.record_log import NotLeaderError

log = logging.getLogger(__name__)


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


# gRPC carries the status in trailers, which clients refuse beyond 8 KiB by default: the message
# (percent-encoded, so up to 3 bytes per byte) and the status proto (base64) must fit together.
_MESSAGE_BYTES = 768
_DETAILS_BYTES = 3000
_METADATA_CHARS = 256
_DESCRIPTION_CHARS = 512


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cut_utf8(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode("utf-8", errors="ignore") + "…"


def build_status(
    code: grpc.StatusCode,
    message: str,
    reason: Reason,
    *,
    metadata: Mapping[str, str] | None = None,
    violations: Sequence[FieldViolation] = (),
    retry_after: float | None = None,
) -> grpc.Status:
    """The status with its ErrorInfo (and BadRequest, RetryInfo), kept within a size every gRPC
    client accepts: long texts are cut, and field violations beyond the budget are summed up in a
    last one."""
    info = error_details_pb2.ErrorInfo(
        reason=reason,
        domain=ERROR_DOMAIN,
        metadata={_cut(k, 64): _cut(v, _METADATA_CHARS) for k, v in (metadata or {}).items()},
    )
    status = status_pb2.Status(
        code=getattr(code_pb2, code.name), message=_cut_utf8(message, _MESSAGE_BYTES), details=[_pack(info)]
    )
    if retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(retry_after * 1e9))
        status.details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    if violations:
        bad_request = error_details_pb2.BadRequest()
        budget = _DETAILS_BYTES - status.ByteSize()
        for index, violation in enumerate(violations):
            entry = error_details_pb2.BadRequest.FieldViolation(
                field=_cut(violation.field, _METADATA_CHARS),
                description=_cut(violation.description, _DESCRIPTION_CHARS),
            )
            if bad_request.ByteSize() + entry.ByteSize() + 64 > budget:
                bad_request.field_violations.add(
                    field="", description=f"{len(violations) - index} more violation(s) not shown"
                )
                break
            bad_request.field_violations.append(entry)
        status.details.append(_pack(bad_request))
    converted: grpc.Status = rpc_status.to_status(status)
    return converted


def status_for(error: ServerError) -> grpc.Status:
    return build_status(
        status_code_for(error.reason),
        error.message,
        error.reason,
        metadata=error.metadata,
        violations=error.violations,
        retry_after=error.retry_after,
    )


def invalid_request(field: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Invalid {field}: {description}",
        reason=Reason.INVALID_REQUEST,
        violations=[FieldViolation(field, description)],
    )


async def abort(context: grpc.aio.ServicerContext[Any, Any], error: ServerError) -> NoReturn:
    await context.abort_with_status(status_for(error))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


def check_request_size(request: Message) -> None:
    """LIMIT_EXCEEDED for a request over MAX_REQUEST_BYTES (the transport takes a little more, so
    that the caller gets this answer rather than gRPC's bare RESOURCE_EXHAUSTED)."""
    size = request.ByteSize()
    if size > MAX_REQUEST_BYTES:
        raise LimitExceededError("max.request.bytes", MAX_REQUEST_BYTES, size, "request", "the request size")


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def request_log_fields(request: Any) -> dict[str, object]:
    """The connector (and task) a request is about, from its resource name or new connector's id,
    for the log lines written while it is carried out."""
    for field in ("name", "parent", "connector_id"):
        value = getattr(request, field, None)
        if not isinstance(value, str) or not value:
            continue
        if field == "connector_id":
            return {"connector": value}
        parts = value.split("/")
        if len(parts) >= 2 and parts[0] == "connectors" and parts[1]:
            fields: dict[str, object] = {"connector": parts[1]}
            # ASCII digits only: "²" is a digit to str.isdigit but no number to int().
            if len(parts) == 4 and parts[2] == "tasks" and parts[3].isascii() and parts[3].isdigit():
                fields["task"] = int(parts[3])
            return fields
    return {}


def mapped(method: F) -> F:
    """Turn herder errors into rich statuses; anything unexpected is a bug: log it, answer INTERNAL."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            check_request_size(request)
            with log_fields(**request_log_fields(request)):
                return await method(self, request, context)
        except ServerError as exc:
            await abort(context, exc)
        except grpc.aio.AbortError:
            raise
        except NotLeaderError as exc:
            # The term ended while the call ran: its write was refused, or (the leader's commit
            # given up, storage/leader_writer.py) is settled by the next leader.
            await abort(
                context,
                UnavailableError(
                    f"This replica stopped leading during the call: {exc}", reason=Reason.NOT_LEADER
                ),
            )
        except Exception:
            log.exception("unexpected error in %s", method.__qualname__)
            unexpected = Reason.ERROR_REASON_UNSPECIFIED
            await context.abort_with_status(
                build_status(status_code_for(unexpected), "internal error; see the server log", unexpected)
            )

    return wrapper  # type: ignore[return-value]
