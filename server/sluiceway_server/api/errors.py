"""Herder errors → gRPC statuses with google.rpc.ErrorInfo (domain "sluiceway"), BadRequest
field violations and RetryInfo. Bad input never becomes INTERNAL or UNKNOWN."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from sluiceway_server.herder.errors import (
    AbortedError,
    AlreadyExistsError,
    FailedPreconditionError,
    FieldViolation,
    HerderError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PluginTimeoutError,
    RequestTimeoutError,
    UnavailableError,
)

log = logging.getLogger(__name__)
DOMAIN = "sluiceway"

_CODES: Sequence[tuple[type[HerderError], grpc.StatusCode]] = (
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (AbortedError, grpc.StatusCode.ABORTED),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (RequestTimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (PluginTimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
)


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def build_status(
    code: grpc.StatusCode,
    message: str,
    reason: str,
    *,
    metadata: Mapping[str, str] | None = None,
    violations: Sequence[FieldViolation] = (),
    retry_after: float | None = None,
) -> grpc.Status:
    details = [
        _pack(error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=dict(metadata or {})))
    ]
    if violations:
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(field=v.field, description=v.description)
                        for v in violations
                    ]
                )
            )
        )
    if retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(retry_after * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=details)
    converted: grpc.Status = rpc_status.to_status(status)
    return converted


def status_for(error: HerderError) -> grpc.Status:
    code = next((c for cls, c in _CODES if isinstance(error, cls)), grpc.StatusCode.FAILED_PRECONDITION)
    return build_status(
        code,
        error.message,
        error.reason,
        metadata=error.metadata,
        violations=error.violations,
        retry_after=error.retry_after if isinstance(error, UnavailableError) else None,
    )


def invalid_request(field: str, description: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Invalid {field}: {description}",
        reason="INVALID_REQUEST",
        violations=[FieldViolation(field, description)],
    )


async def abort(context: grpc.aio.ServicerContext[Any, Any], error: HerderError) -> NoReturn:
    await context.abort_with_status(status_for(error))
    raise AssertionError("abort_with_status returned")  # pragma: no cover


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def mapped(method: F) -> F:
    """Turn herder errors into rich statuses; anything unexpected is a bug: log it, answer INTERNAL."""

    @functools.wraps(method)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await method(self, request, context)
        except HerderError as exc:
            await abort(context, exc)
        except grpc.aio.AbortError:
            raise
        except Exception:
            log.exception("unexpected error in %s", method.__qualname__)
            await context.abort_with_status(
                build_status(
                    grpc.StatusCode.INTERNAL, "internal error; see the server log", "ERROR_REASON_UNSPECIFIED"
                )
            )

    return wrapper  # type: ignore[return-value]
