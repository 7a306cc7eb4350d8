"""Domain errors of the herder. Each carries an ErrorInfo reason (sluiceway.api.v1.ErrorReason);
the API layer maps the class to a gRPC code and never needs to parse messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluiceway.limits import echo


@dataclass(frozen=True)
class FieldViolation:
    field: str
    description: str


class HerderError(Exception):
    reason: str = "ERROR_REASON_UNSPECIFIED"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        violations: Sequence[FieldViolation] = (),
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason
        self.violations = list(violations)
        self.metadata = dict(metadata or {})


class NotFoundError(HerderError):
    reason = "CONNECTOR_NOT_FOUND"


class AlreadyExistsError(HerderError):
    reason = "CONNECTOR_ALREADY_EXISTS"


class InvalidArgumentError(HerderError):
    """Bad input: INVALID_CONFIG (a bad config: violations name request fields such as
    `connector.config["tasks.max"]`, metadata `config_keys` the keys) or INVALID_REQUEST (other
    request fields)."""

    reason = "INVALID_REQUEST"


class FailedPreconditionError(HerderError):
    reason = "CONNECTOR_NOT_STOPPED"


class AbortedError(HerderError):
    """The request was made against a state of the connector that is no longer current (etag)."""

    reason = "ETAG_MISMATCH"


class UnavailableError(HerderError):
    reason = "STORAGE_UNAVAILABLE"

    def __init__(
        self,
        message: str,
        *,
        reason: str | None = None,
        retry_after: float = 1.0,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, reason=reason, metadata=metadata)
        self.retry_after = retry_after


class PermissionDeniedError(HerderError):
    reason = "NOT_AUTHORIZED"


class UnauthenticatedError(HerderError):
    """The caller presented no credentials, or none this server accepts."""

    reason = "UNAUTHENTICATED"


class RequestTimeoutError(HerderError):
    """The caller's deadline passed; `stage` says what the request was doing (Kafka's TickThreadStage)."""

    reason = "REQUEST_TIMED_OUT"

    def __init__(self, stage: str) -> None:
        super().__init__(f"Request timed out while {stage}", metadata={"stage": stage})
        self.stage = stage


class PluginTimeoutError(HerderError):
    """Plugin code did not return within plugin.callback.timeout.ms; its thread is abandoned."""

    reason = "PLUGIN_TIMEOUT"

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(
            f"{what} did not return within {timeout:.1f}s (plugin.callback.timeout.ms)",
            metadata={"timeout_ms": str(int(timeout * 1000))},
        )


def connector_not_found(name: str) -> NotFoundError:
    return NotFoundError(f"Connector {echo(name)} not found", metadata={"connector": name})


class LimitExceededError(InvalidArgumentError):
    """The request goes over one of the documented limits (sluiceway.limits): `limit` names it."""

    reason = "LIMIT_EXCEEDED"

    def __init__(self, limit: str, maximum: int, actual: int, field: str, what: str) -> None:
        description = f"{what} is {actual}, more than the limit of {maximum} ({limit})"
        super().__init__(
            f"Invalid {field}: {description}",
            violations=[FieldViolation(field, description)],
            metadata={"limit": limit, "max": str(maximum), "actual": str(actual)},
        )
