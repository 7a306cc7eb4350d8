"""Parsing failed calls into typed errors: codes, ErrorInfo, BadRequest, RetryInfo."""

from __future__ import annotations

import pickle

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]

from sluiceway.client import RetryPolicy, SluicewayClient
from sluiceway.errors import (
    AbortedError,
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    FieldViolation,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SluicewayError,
    UnauthenticatedError,
    UnavailableError,
    error_class_for,
    from_rpc_error,
    from_status,
)
from tests.unit.client.fake_control_plane import Served, rich_status


class FakeRpcError(grpc.RpcError):
    """What a finished sync call raises: code(), details(), trailing_metadata()."""

    def __init__(
        self, code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, str | bytes], ...] = ()
    ) -> None:
        super().__init__(details)
        self._code = code
        self._details = details
        self._trailing = trailing

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    # The stub's metadata type is a private placeholder class; plain tuples are what grpc returns.
    def trailing_metadata(self) -> tuple[tuple[str, str | bytes], ...]:  # type: ignore[override]
        return self._trailing


def _error_from(status: grpc.Status) -> FakeRpcError:
    return FakeRpcError(status.code, status.details, status.trailing_metadata)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (grpc.StatusCode.NOT_FOUND, NotFoundError),
        (grpc.StatusCode.ALREADY_EXISTS, AlreadyExistsError),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgumentError),
        (grpc.StatusCode.FAILED_PRECONDITION, FailedPreconditionError),
        (grpc.StatusCode.ABORTED, AbortedError),
        (grpc.StatusCode.UNAVAILABLE, UnavailableError),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDeniedError),
        (grpc.StatusCode.UNAUTHENTICATED, UnauthenticatedError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceededError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhaustedError),
        (grpc.StatusCode.INTERNAL, SluicewayError),
        (grpc.StatusCode.UNKNOWN, SluicewayError),
    ],
)
def test_each_code_maps_to_its_class(code: grpc.StatusCode, cls: type[SluicewayError]) -> None:
    error = from_rpc_error(FakeRpcError(code, "boom"))
    assert type(error) is cls
    assert error_class_for(code) is cls
    assert error.code is code
    assert error.message == "boom"
    assert error.reason is None
    assert error.metadata == {}
    assert error.field_violations == []
    assert error.retry_delay is None


def test_rich_status_details_are_parsed() -> None:
    status = rich_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        "Config of connector gen has 2 error(s)",
        "INVALID_CONFIG",
        metadata={"connector": "gen"},
        violations=[
            ("topic", "topic: no value given"),
            ("tasks.max", "tasks.max: the lowest accepted value is 1"),
        ],
        retry_delay=1.5,
    )
    error = from_rpc_error(_error_from(status))
    assert isinstance(error, InvalidArgumentError)
    assert isinstance(error, ValueError)
    assert error.reason == "INVALID_CONFIG"
    assert error.metadata == {"connector": "gen"}
    assert error.field_violations == [
        FieldViolation("topic", "topic: no value given"),
        FieldViolation("tasks.max", "tasks.max: the lowest accepted value is 1"),
    ]
    assert error.retry_delay == pytest.approx(1.5)
    assert str(error) == "INVALID_ARGUMENT INVALID_CONFIG: Config of connector gen has 2 error(s)"
    assert error.status is not None
    assert len(error.status.details) == 3


def test_our_domain_wins_over_a_foreign_error_info() -> None:
    status = status_pb2.Status(code=grpc.StatusCode.UNAVAILABLE.value[0], message="down")
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="SIDECAR_DOWN", domain="mesh.example"))
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="NO_LEADER", domain="sluiceway"))
    error = from_status(status)
    assert isinstance(error, UnavailableError)
    assert error.reason == "NO_LEADER"


def test_mismatched_rich_status_keeps_transport_code_and_details() -> None:
    # A proxy rewrote the message; grpc_status.from_call refuses such a status.
    status = rich_status(grpc.StatusCode.NOT_FOUND, "Connector x not found", "CONNECTOR_NOT_FOUND")
    error = from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND, "rewritten", status.trailing_metadata))
    assert isinstance(error, NotFoundError)
    assert error.message == "rewritten"
    assert error.reason == "CONNECTOR_NOT_FOUND"


def test_corrupt_trailer_is_ignored() -> None:
    error = from_rpc_error(
        FakeRpcError(grpc.StatusCode.NOT_FOUND, "gone", (("grpc-status-details-bin", b"\xff\xff\xff"),))
    )
    assert isinstance(error, NotFoundError)
    assert error.reason is None


def test_rpc_error_without_call_methods() -> None:
    error = from_rpc_error(grpc.RpcError("bare"))
    assert type(error) is SluicewayError
    assert error.code is grpc.StatusCode.UNKNOWN
    assert error.message == "bare"


def test_aio_error_is_parsed_from_its_trailing_metadata() -> None:
    status = rich_status(
        grpc.StatusCode.PERMISSION_DENIED,
        "Topic tracking is disabled",
        "TOPIC_TRACKING_DISABLED",
        metadata={"setting": "topic.tracking.enable"},
    )
    aio_error = grpc.aio.AioRpcError(
        code=status.code,
        initial_metadata=grpc.aio.Metadata(),
        trailing_metadata=grpc.aio.Metadata(*status.trailing_metadata),
        details=status.details,
    )
    error = from_rpc_error(aio_error)
    assert isinstance(error, PermissionDeniedError)
    assert error.reason == "TOPIC_TRACKING_DISABLED"
    assert error.metadata == {"setting": "topic.tracking.enable"}


def test_errors_survive_pickling() -> None:
    status = rich_status(
        grpc.StatusCode.INVALID_ARGUMENT, "bad", "INVALID_CONFIG", violations=[("topic", "missing")]
    )
    error = from_rpc_error(_error_from(status))
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InvalidArgumentError
    assert (copy.code, copy.message, copy.reason) == (error.code, error.message, error.reason)
    assert copy.field_violations == error.field_violations
    assert copy.status == error.status


def test_server_errors_reach_the_caller_typed(served: Served) -> None:
    with SluicewayClient(served.target, retry=RetryPolicy.disabled()) as client:
        with pytest.raises(NotFoundError) as not_found:
            client.get_connector("missing")
        assert not_found.value.reason == "CONNECTOR_NOT_FOUND"
        assert not_found.value.metadata == {"connector": "missing"}
        assert not isinstance(not_found.value, grpc.RpcError)

        with pytest.raises(InvalidArgumentError) as invalid:
            client.create_connector("gen", {"connector.class": "DataGenSource"})
        assert invalid.value.reason == "INVALID_CONFIG"
        assert [v.field for v in invalid.value.field_violations] == ['connector.config["topic"]']

        client.create_connector("gen", {"connector.class": "DataGenSource", "topic": "t"})
        with pytest.raises(AlreadyExistsError):
            client.create_connector("gen", {"connector.class": "DataGenSource", "topic": "t"})
        with pytest.raises(FailedPreconditionError) as not_stopped:
            client.reset_offsets("gen")
        assert not_stopped.value.reason == "CONNECTOR_NOT_STOPPED"


def test_the_cause_is_the_grpc_error(served: Served) -> None:
    with SluicewayClient(served.target) as client, pytest.raises(NotFoundError) as info:
        client.connector_status("missing")
    assert isinstance(info.value.__cause__, grpc.RpcError)
