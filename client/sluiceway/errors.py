"""Typed errors of the Sluiceway API, and the reasons they carry.

Every failed call surfaces as a `SluicewayError` whose subclass follows the gRPC status code,
carrying the `google.rpc` details the server attached: `ErrorInfo` (domain "sluiceway", an
UPPER_SNAKE reason from `sluiceway.api.v1.ErrorReason`, metadata), `BadRequest` field
violations and `RetryInfo`. Parsing lives here; servers build statuses themselves.

`Reason` is the proto's `ErrorReason` as a StrEnum, and `REASON_ERRORS` is the one table of what
each reason means on the wire: the subclass a client raises for it and, through that class, the
status code the server sends with it. Server, executors and this library all take both from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from enum import StrEnum, auto
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

# googleapis-common-protos ships .pyi files but no py.typed marker.
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from sluiceway.api.v1 import errors_pb2

__all__ = [
    "ERROR_DOMAIN",
    "NOT_RETURNED",
    "REASON_ERRORS",
    "AbortedError",
    "AlreadyExistsError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "FieldViolation",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "Reason",
    "ResourceExhaustedError",
    "SluicewayError",
    "UnauthenticatedError",
    "UnavailableError",
    "error_class_for",
    "from_rpc_error",
    "from_status",
    "status_code_for",
]

ERROR_DOMAIN = "sluiceway"
_DETAILS_KEY = "grpc-status-details-bin"


class Reason(StrEnum):
    """`sluiceway.api.v1.ErrorReason` by name: the `ErrorInfo.reason` strings of the API.

    Members are declared here so that type checkers see them; each value is looked up in the
    generated enum, so a member the proto lacks fails this import. A unit test checks that the
    members are exactly the proto's values, in its order."""

    @staticmethod
    def _generate_next_value_(name: str, start: int, count: int, last_values: list[str]) -> str:
        # Value() raises ValueError for a name errors.proto does not define.
        return errors_pb2.ErrorReason.Name(errors_pb2.ErrorReason.Value(name))

    ERROR_REASON_UNSPECIFIED = auto()
    CONNECTOR_NOT_FOUND = auto()
    TASK_NOT_FOUND = auto()
    PLUGIN_NOT_FOUND = auto()
    CONNECTOR_ALREADY_EXISTS = auto()
    INVALID_CONFIG = auto()
    INVALID_REQUEST = auto()
    INVALID_OFFSETS = auto()
    CONNECTOR_NOT_STOPPED = auto()
    CONSUMER_GROUP_ACTIVE = auto()
    CONNECTOR_REJECTED_OFFSETS = auto()
    NO_LEADER = auto()
    NOT_LEADER = auto()
    STORAGE_UNAVAILABLE = auto()
    TOPIC_TRACKING_DISABLED = auto()
    TOPIC_TRACKING_RESET_DISABLED = auto()
    REQUEST_TIMED_OUT = auto()
    PLUGIN_TIMEOUT = auto()
    STALE_GENERATION = auto()
    REQUEST_ID_REUSED = auto()
    UNAUTHENTICATED = auto()
    NOT_AUTHORIZED = auto()
    CONNECTOR_ERROR = auto()
    ETAG_MISMATCH = auto()
    LIMIT_EXCEEDED = auto()
    LOGGER_NOT_FOUND = auto()


@dataclasses.dataclass(frozen=True, slots=True)
class FieldViolation:
    """One `google.rpc.BadRequest.FieldViolation`: which field (a request field path or a
    connector config key) is wrong, and why."""

    field: str
    description: str


class SluicewayError(Exception):
    """A failed Sluiceway call. Also the fallback for status codes without a subclass."""

    # The default for direct construction; from_rpc_error always sets the real code.
    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        message: str,
        *,
        code: grpc.StatusCode | None = None,
        reason: str | None = None,
        metadata: Mapping[str, str] | None = None,
        field_violations: Iterable[FieldViolation] = (),
        retry_delay: float | None = None,
        status: status_pb2.Status | None = None,
    ) -> None:
        super().__init__(message)
        self.code: grpc.StatusCode = code if code is not None else self.default_code
        self.message: str = message
        # A plain str even when given a Reason, so that repr and pickling show the bare name.
        self.reason: str | None = None if reason is None else str(reason)
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field_violations: list[FieldViolation] = list(field_violations)
        self.retry_delay: float | None = retry_delay
        # The raw google.rpc.Status, for details this class does not model (DebugInfo, Help...).
        self.status: status_pb2.Status | None = status

    def __str__(self) -> str:
        head = f"{self.code.name} {self.reason}" if self.reason else self.code.name
        return f"{head}: {self.message}" if self.message else head

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code.name}, reason={self.reason!r}, message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only state does not survive Exception's default pickling (multiprocessing,
        # concurrent.futures); rebuild through a helper that restores every attribute.
        state = {
            "code": self.code,
            "reason": self.reason,
            "metadata": self.metadata,
            "field_violations": self.field_violations,
            "retry_delay": self.retry_delay,
            "status": self.status.SerializeToString() if self.status is not None else None,
        }
        return (_rebuild, (type(self), self.message, state))


def _rebuild(cls: type[SluicewayError], message: str, state: dict[str, Any]) -> SluicewayError:
    raw = state.pop("status")
    status = status_pb2.Status.FromString(raw) if raw is not None else None
    return cls(message, status=status, **state)


class NotFoundError(SluicewayError):
    """Unknown connector, task or plugin (Kafka Connect's 404)."""

    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(SluicewayError):
    """A connector with that name exists (Kafka Connect's 409)."""

    default_code = grpc.StatusCode.ALREADY_EXISTS


class InvalidArgumentError(SluicewayError, ValueError):
    """Invalid config, offsets or request; see `field_violations`. Also raised for input the
    client library rejects before sending it, so it is a ValueError as well."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPreconditionError(SluicewayError):
    """The call is valid but not in the connector's current state (e.g. offsets changed while
    not STOPPED), or the connector plugin refused it."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(SluicewayError):
    """The connector changed since the etag the call carried was read (reason ETAG_MISMATCH):
    read it again, then decide whether to retry."""

    default_code = grpc.StatusCode.ABORTED


class UnavailableError(SluicewayError):
    """The control plane could not serve the call now (no leader, storage or network down);
    the client retries these before raising one."""

    default_code = grpc.StatusCode.UNAVAILABLE


class PermissionDeniedError(SluicewayError):
    """The caller may not do this: its role does not allow the call (reason NOT_AUTHORIZED, with
    metadata principal, role and method), or the feature is disabled (e.g. topic tracking)."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class UnauthenticatedError(SluicewayError):
    """The server needs credentials and the call carried none it accepts (reason UNAUTHENTICATED):
    a bearer token (`TransportSecurity.token`, $SLUICEWAY_TOKEN) or a client certificate."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class DeadlineExceededError(SluicewayError):
    """The call's deadline passed; the message names the stage it was in when known."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class ResourceExhaustedError(SluicewayError):
    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


_BY_CODE: dict[grpc.StatusCode, type[SluicewayError]] = {
    cls.default_code: cls
    for cls in (
        NotFoundError,
        AlreadyExistsError,
        InvalidArgumentError,
        FailedPreconditionError,
        AbortedError,
        UnavailableError,
        PermissionDeniedError,
        UnauthenticatedError,
        DeadlineExceededError,
        ResourceExhaustedError,
    )
}
_BY_NUMBER: dict[int, grpc.StatusCode] = {code.value[0]: code for code in grpc.StatusCode}

# The one table of reasons: for each, the class a client raises when a call fails with it. The
# server sends each reason with that class's default_code (status_code_for), so the class the
# client picks from the status code is the one named here. Every member of Reason has a row.
REASON_ERRORS: Mapping[Reason, type[SluicewayError]] = {
    # The zero value: a failure the server did not expect, sent with INTERNAL only.
    Reason.ERROR_REASON_UNSPECIFIED: SluicewayError,
    Reason.CONNECTOR_NOT_FOUND: NotFoundError,
    Reason.TASK_NOT_FOUND: NotFoundError,
    Reason.PLUGIN_NOT_FOUND: NotFoundError,
    Reason.LOGGER_NOT_FOUND: NotFoundError,
    Reason.CONNECTOR_ALREADY_EXISTS: AlreadyExistsError,
    Reason.INVALID_CONFIG: InvalidArgumentError,
    Reason.INVALID_REQUEST: InvalidArgumentError,
    Reason.INVALID_OFFSETS: InvalidArgumentError,
    Reason.REQUEST_ID_REUSED: InvalidArgumentError,
    Reason.LIMIT_EXCEEDED: InvalidArgumentError,
    Reason.CONNECTOR_NOT_STOPPED: FailedPreconditionError,
    Reason.CONSUMER_GROUP_ACTIVE: FailedPreconditionError,
    Reason.CONNECTOR_REJECTED_OFFSETS: FailedPreconditionError,
    Reason.CONNECTOR_ERROR: FailedPreconditionError,
    Reason.STALE_GENERATION: FailedPreconditionError,
    Reason.ETAG_MISMATCH: AbortedError,
    Reason.NO_LEADER: UnavailableError,
    Reason.NOT_LEADER: UnavailableError,
    Reason.STORAGE_UNAVAILABLE: UnavailableError,
    Reason.TOPIC_TRACKING_DISABLED: PermissionDeniedError,
    Reason.TOPIC_TRACKING_RESET_DISABLED: PermissionDeniedError,
    Reason.NOT_AUTHORIZED: PermissionDeniedError,
    Reason.UNAUTHENTICATED: UnauthenticatedError,
    Reason.REQUEST_TIMED_OUT: DeadlineExceededError,
    Reason.PLUGIN_TIMEOUT: DeadlineExceededError,
}

# Reasons errors.proto defines for features that are not built: they have a row above, but no
# server or executor code may send them yet (a unit test scans for their use).
NOT_RETURNED: frozenset[Reason] = frozenset({Reason.STALE_GENERATION})


def status_code_for(reason: Reason) -> grpc.StatusCode:
    """The status code the server sends with `reason`: its class's default_code, and INTERNAL for
    the zero value (clients raise the base SluicewayError for both INTERNAL and that reason)."""
    if reason is Reason.ERROR_REASON_UNSPECIFIED:
        return grpc.StatusCode.INTERNAL
    return REASON_ERRORS[reason].default_code


def error_class_for(code: grpc.StatusCode) -> type[SluicewayError]:
    """The subclass raised for `code`; `SluicewayError` itself for codes without one."""
    return _BY_CODE.get(code, SluicewayError)


def from_status(status: status_pb2.Status) -> SluicewayError:
    """Builds the error for a `google.rpc.Status` (e.g. one read from a log or another API)."""
    code = _BY_NUMBER.get(status.code, grpc.StatusCode.UNKNOWN)
    return _build(code, status.message, status)


def from_rpc_error(exc: grpc.RpcError) -> SluicewayError:
    """Converts a failed call's `grpc.RpcError` (sync) or `grpc.aio.AioRpcError` into the
    matching `SluicewayError` subclass with its status details parsed.

    Both kinds expose `code()`, `details()` and a synchronous `trailing_metadata()` once
    the call has ended, which is all `grpc_status.rpc_status.from_call` reads.
    """
    code = _call_code(exc)
    message = _call_details(exc)
    status: status_pb2.Status | None
    try:
        status = rpc_status.from_call(exc)
    except ValueError:
        # The rich status disagrees with the call's code or message (e.g. a proxy rewrote
        # one of them). Its details are still the server's own: keep them, and the
        # transport-level code and message, which are what actually reached us.
        status = _status_from_trailer(exc)
    except (AttributeError, TypeError, DecodeError):
        # Not a completed call (an RpcError raised by hand, without code() or metadata),
        # or a trailer that is not a google.rpc.Status: the code and message still stand.
        status = None
    if not message and status is not None:
        message = status.message
    return _build(code, message, status)


def _call_code(exc: grpc.RpcError) -> grpc.StatusCode:
    code_fn = getattr(exc, "code", None)
    if callable(code_fn):
        code = code_fn()
        if isinstance(code, grpc.StatusCode):
            return code
    return grpc.StatusCode.UNKNOWN


def _call_details(exc: grpc.RpcError) -> str:
    details_fn = getattr(exc, "details", None)
    if callable(details_fn):
        details = details_fn()
        if isinstance(details, str):
            return details
    return str(exc)


def _status_from_trailer(exc: grpc.RpcError) -> status_pb2.Status | None:
    try:
        # grpc.RpcError's stub types its metadata loosely; aio errors return grpc.aio.Metadata.
        trailing: Any = exc.trailing_metadata() or ()
        for key, value in trailing:
            if key == _DETAILS_KEY and isinstance(value, bytes):
                return status_pb2.Status.FromString(value)
    except (AttributeError, TypeError, DecodeError):
        return None
    return None


def _build(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> SluicewayError:
    reason: str | None = None
    metadata: dict[str, str] = {}
    violations: list[FieldViolation] = []
    retry_delay: float | None = None
    if status is not None:
        for detail in status.details:
            reason, metadata, retry_delay = _apply_detail(detail, reason, metadata, violations, retry_delay)
    return error_class_for(code)(
        message,
        code=code,
        reason=reason,
        metadata=metadata,
        field_violations=violations,
        retry_delay=retry_delay,
        status=status,
    )


def _apply_detail(
    detail: any_pb2.Any,
    reason: str | None,
    metadata: dict[str, str],
    violations: list[FieldViolation],
    retry_delay: float | None,
) -> tuple[str | None, dict[str, str], float | None]:
    if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
        info = error_details_pb2.ErrorInfo()
        detail.Unpack(info)
        # Prefer our own domain's ErrorInfo when a proxy or library added another one.
        if reason is None or info.domain == ERROR_DOMAIN:
            reason = info.reason or None
            metadata = dict(info.metadata)
    elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
        bad = error_details_pb2.BadRequest()
        detail.Unpack(bad)
        violations.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
        info_retry = error_details_pb2.RetryInfo()
        detail.Unpack(info_retry)
        delay = info_retry.retry_delay
        retry_delay = max(0.0, delay.seconds + delay.nanos / 1e9)
    return reason, metadata, retry_delay
