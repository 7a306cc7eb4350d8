"""The control plane's errors: raised by the herder, the cluster coordinator and the API layer alike.

An error carries a `Reason` from `sluiceway.errors`; the status code it is answered with comes from
that module's `REASON_ERRORS` table (`api/errors.py` asks `status_code_for`), never from the class.
The classes here only give a default reason, and some build their message and metadata from
structured arguments. A class refuses an explicit reason that the table gives another client error
than its default reason's, so catching `NotFoundError` catches only what a client sees as one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sluiceway.common.limits import echo
from sluiceway.errors import REASON_ERRORS, FieldViolation, Reason

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "FailedPreconditionError",
    "FieldViolation",
    "InvalidArgumentError",
    "LimitExceededError",
    "NotFoundError",
    "PermissionDeniedError",
    "PluginTimeoutError",
    "RequestTimeoutError",
    "ServerError",
    "UnauthenticatedError",
    "UnavailableError",
    "connector_not_found",
]


class ServerError(Exception):
    """A refused request: message, reason, BadRequest field violations and ErrorInfo metadata."""

    reason: Reason = Reason.ERROR_REASON_UNSPECIFIED
    # RetryInfo's delay in seconds; None sends no RetryInfo.
    retry_after: float | None = None

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        violations: Sequence[FieldViolation] = (),
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            chosen = reason
            wanted, given = REASON_ERRORS[type(self).reason], REASON_ERRORS[chosen]
            if type(self) is not ServerError and given is not wanted:
                raise TypeError(
                    f"{type(self).__name__} cannot carry {chosen}: clients raise "
                    f"{given.__name__} for it, not {wanted.__name__}"
                )
            self.reason = chosen
        self.violations = list(violations)
        self.metadata = dict(metadata or {})


class NotFoundError(ServerError):
    reason = Reason.CONNECTOR_NOT_FOUND


class AlreadyExistsError(ServerError):
    reason = Reason.CONNECTOR_ALREADY_EXISTS


class InvalidArgumentError(ServerError):
    """Bad input: INVALID_CONFIG (a bad config: violations name request fields such as
    `connector.config["tasks.max"]`, metadata `config_keys` the keys) or INVALID_REQUEST (other
    request fields)."""

    reason = Reason.INVALID_REQUEST


class FailedPreconditionError(ServerError):
    reason = Reason.CONNECTOR_NOT_STOPPED


class AbortedError(ServerError):
    """The request was made against a state of the connector that is no longer current (etag)."""

    reason = Reason.ETAG_MISMATCH


class UnavailableError(ServerError):
    """Worth retrying as it is: always answered with RetryInfo (`retry_after` seconds)."""

    reason = Reason.STORAGE_UNAVAILABLE

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        retry_after: float = 1.0,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, reason=reason, metadata=metadata)
        self.retry_after = retry_after


class PermissionDeniedError(ServerError):
    reason = Reason.NOT_AUTHORIZED


class UnauthenticatedError(ServerError):
    """The caller presented no credentials, or none this server accepts."""

    reason = Reason.UNAUTHENTICATED


class RequestTimeoutError(ServerError):
    """The caller's deadline passed; `stage` says what the request was doing (Kafka's TickThreadStage)."""

    reason = Reason.REQUEST_TIMED_OUT

    def __init__(self, stage: str) -> None:
        super().__init__(f"Request timed out while {stage}", metadata={"stage": stage})
        self.stage = stage


class PluginTimeoutError(ServerError):
    """Plugin code did not return within plugin.callback.timeout.ms; its thread is abandoned."""

    reason = Reason.PLUGIN_TIMEOUT

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(
            f"{what} did not return within {timeout:.1f}s (plugin.callback.timeout.ms)",
            metadata={"timeout_ms": str(int(timeout * 1000))},
        )


def connector_not_found(name: str) -> NotFoundError:
    return NotFoundError(f"Connector {echo(name)} not found", metadata={"connector": name})


class LimitExceededError(InvalidArgumentError):
    """The request goes over one of the documented limits (sluiceway.common.limits): `limit` names it."""

    reason = Reason.LIMIT_EXCEEDED

    def __init__(self, limit: str, maximum: int, actual: int, field: str, what: str) -> None:
        description = f"{what} is {actual}, more than the limit of {maximum} ({limit})"
        super().__init__(
            f"Invalid {field}: {description}",
            violations=[FieldViolation(field, description)],
            metadata={"limit": limit, "max": str(maximum), "actual": str(actual)},
        )
