"""The API's resource-name mapping: any bad name is INVALID_ARGUMENT with a field violation,
never another exception (which the servicers would answer with INTERNAL)."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn, cast

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from hypothesis import example, given
from hypothesis import strategies as st

from sluiceway.api.v1 import connectors_pb2
from sluiceway.common.names import MAX_TASK_NUMBER
from sluiceway_server.api.connectors import ConnectorServicer
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.api.names import connector_name, format_connector, format_task, plugin_name, task_name
from sluiceway_server.errors import InvalidArgumentError, NotFoundError
from sluiceway_server.herder.herder import Herder

EXPLICIT = [
    "connectors/x/tasks/²",
    "connectors/x/tasks/-1",
    "connectors/x/tasks/99999999999999999999",
    "connectors/x/tasks/+1",
    "connectors/x/tasks/ 1",
    "connectors/x/tasks/2147483648",
    "connectors/x/tasks/",
    "connectors//tasks/0",
    "connectors/x",
    "",
]
name_like = st.one_of(
    st.text(),
    st.builds(lambda c, n: f"connectors/{c}/tasks/{n}", st.text(), st.text()),
    st.builds(lambda c, n: f"connectors/{c}/tasks/{n}", st.text(), st.integers()),
)


def check_mapping(name: str) -> None:
    for parse in (connector_name, task_name, plugin_name):
        error: InvalidArgumentError | None = None
        try:
            parse(name, "the_field")
        except InvalidArgumentError as exc:
            error = exc
        if error is not None:
            assert error.reason in ("INVALID_REQUEST", "LIMIT_EXCEEDED")
            assert [v.field for v in error.violations] == ["the_field"]
            assert error.violations[0].description
            # What is repeated of the name stays short whatever its length.
            assert len(error.message) < 400


@given(name_like)
@example("connectors/x/tasks/²")
@example("connectors/x/tasks/-1")
@example("connectors/x/tasks/99999999999999999999")
@example("connectors/x/tasks/" + "9" * 5000)
def test_name_mapping_raises_only_invalid_argument(name: str) -> None:
    # Anything other than InvalidArgumentError propagates and fails the test.
    check_mapping(name)


@pytest.mark.parametrize("name", EXPLICIT)
def test_bad_task_names_are_invalid_argument(name: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        task_name(name)
    assert info.value.reason == "INVALID_REQUEST"
    assert [v.field for v in info.value.violations] == ["name"]


def test_task_number_messages() -> None:
    with pytest.raises(InvalidArgumentError, match="the task id must be a non-negative integer") as info:
        task_name("connectors/x/tasks/²")
    assert "'²'" in info.value.violations[0].description
    with pytest.raises(InvalidArgumentError, match=r"expected connectors/\{connector\}/tasks/\{task\}"):
        task_name("connectors/x/task/1")
    with pytest.raises(InvalidArgumentError, match=r"expected connectors/\{connector\}"):
        connector_name("connectors/a/b", "parent")


def test_valid_names() -> None:
    assert task_name("connectors/my-conn/tasks/3") == ("my-conn", 3)
    assert task_name(f"connectors/c/tasks/{MAX_TASK_NUMBER}") == ("c", MAX_TASK_NUMBER)
    assert connector_name("connectors/my-conn") == "my-conn"
    assert format_task("my-conn", 3) == "connectors/my-conn/tasks/3"
    assert format_connector("my-conn") == "connectors/my-conn"


# --- through a servicer method: the status the client gets


class _AbortedError(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.status: grpc.Status | None = None

    def time_remaining(self) -> float | None:
        return None

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        self.status = status
        raise _AbortedError


class _Herder:
    def task_status(self, connector: str, task: int) -> NoReturn:
        raise NotFoundError(f"no task {connector}/{task}")


def _get_task_status(name: str) -> grpc.Status:
    servicer = ConnectorServicer(cast(Herder, _Herder()), cast(RequestIdCache, None), 5.0)
    context = _Context()
    request = connectors_pb2.GetTaskStatusRequest(name=name)
    with pytest.raises(_AbortedError):
        asyncio.run(servicer.GetTaskStatus(request, cast(Any, context)))
    assert context.status is not None
    return context.status


@given(name_like.filter(lambda s: not any("\ud800" <= c <= "\udfff" for c in s)))
@example("connectors/x/tasks/²")
@example("connectors/x/tasks/-1")
@example("connectors/x/tasks/99999999999999999999")
def test_get_task_status_never_internal(name: str) -> None:
    status = _get_task_status(name)
    assert status.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)


@pytest.mark.parametrize("name", EXPLICIT)
def test_get_task_status_bad_name(name: str) -> None:
    status = _get_task_status(name)
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    details = status_pb2.Status.FromString(dict(status.trailing_metadata)["grpc-status-details-bin"])
    bad_request = error_details_pb2.BadRequest()
    assert any(d.Unpack(bad_request) for d in details.details)
    assert [v.field for v in bad_request.field_violations] == ["name"]
