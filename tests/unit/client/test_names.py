"""sluiceway.common.names: the one parser and formatter of connector and task resource names."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sluiceway.common.names import (
    MAX_TASK_NUMBER,
    InvalidNameError,
    InvalidTaskNumberError,
    TaskName,
    check_connector_id,
    check_task_number,
    format_connector_name,
    format_task_name,
    parse_connector_name,
    parse_task_name,
    parse_task_number,
)

connector_ids = st.text(min_size=1).filter(lambda s: "/" not in s)
task_numbers = st.integers(0, MAX_TASK_NUMBER)
# Text that looks like names often enough to reach every branch of the parser.
name_like = st.one_of(
    st.text(),
    st.builds(lambda c, n: f"connectors/{c}/tasks/{n}", st.text(), st.text()),
    st.builds(lambda c, n: f"connectors/{c}/tasks/{n}", st.text(), st.integers()),
    st.builds("/".join, st.lists(st.sampled_from(["connectors", "tasks", "x", "", "1"]))),
)


@given(connector_ids, task_numbers)
def test_task_name_round_trip(connector: str, task: int) -> None:
    name = format_task_name(check_connector_id(connector), check_task_number(task))
    parsed = parse_task_name(name)
    assert parsed == TaskName(connector, task)
    assert (parsed.connector, parsed.task) == (connector, task)
    assert str(parsed) == name


@given(connector_ids)
def test_connector_name_round_trip(connector: str) -> None:
    assert parse_connector_name(format_connector_name(check_connector_id(connector))) == connector


@given(name_like)
@example("connectors/x/tasks/²")
@example("connectors/x/tasks/-1")
@example("connectors/x/tasks/+1")
@example("connectors/x/tasks/ 1")
@example("connectors/x/tasks/1 ")
@example("connectors/x/tasks/٣")
@example("connectors/x/tasks/99999999999999999999")
@example("connectors/x/tasks/" + "9" * 5000)
@example("connectors/x/tasks/2147483648")
@example("connectors//tasks/1")
@example("connectors/x/tasks/")
def test_parsers_raise_only_invalid_name_error(text: str) -> None:
    # Any exception but InvalidNameError (a ValueError) propagates and fails the test.
    with contextlib.suppress(InvalidNameError):
        task = parse_task_name(text)
        assert 0 <= task.task <= MAX_TASK_NUMBER
        assert task.connector
        assert "/" not in task.connector
        assert format_task_name(*task) == f"connectors/{task.connector}/tasks/{task.task}"
    with contextlib.suppress(InvalidNameError):
        assert parse_connector_name(text)
    with contextlib.suppress(InvalidNameError):
        assert 0 <= parse_task_number(text) <= MAX_TASK_NUMBER
    assert issubclass(InvalidNameError, ValueError)


@pytest.mark.parametrize(
    ("number", "value"),
    [("0", 0), ("7", 7), ("007", 7), (str(MAX_TASK_NUMBER), MAX_TASK_NUMBER)],
)
def test_task_numbers(number: str, value: int) -> None:
    assert parse_task_number(number) == value
    assert parse_task_name(f"connectors/c/tasks/{number}") == ("c", value)


@pytest.mark.parametrize(
    "number", ["", "²", "٣", "-1", "+1", " 1", "1 ", "1_0", "0x1", "1.0", str(MAX_TASK_NUMBER + 1), "9" * 30]
)
def test_bad_task_numbers(number: str) -> None:
    with pytest.raises(InvalidTaskNumberError) as info:
        parse_task_name(f"connectors/c/tasks/{number}")
    assert info.value.number == number
    assert info.value.name == f"connectors/c/tasks/{number}"
    with pytest.raises(InvalidTaskNumberError):
        parse_task_number(number)


@pytest.mark.parametrize(
    "name",
    [
        "",
        "connectors/c",
        "connectors/c/tasks",
        "connectors//tasks/0",
        "c/tasks/0",
        "connector/c/tasks/0",
        "connectors/c/task/0",
        "connectors/c/tasks/0/",
        "connectors/a/b/tasks/0",
        "/connectors/c/tasks/0",
    ],
)
def test_bad_task_names(name: str) -> None:
    with pytest.raises(InvalidNameError, match="not a task resource name") as info:
        parse_task_name(name)
    assert not isinstance(info.value, InvalidTaskNumberError)


@pytest.mark.parametrize("name", ["", "connectors/", "c", "connectors/a/b", "connectors/c/tasks/0"])
def test_bad_connector_names(name: str) -> None:
    with pytest.raises(InvalidNameError):
        parse_connector_name(name)


@pytest.mark.parametrize("task", [-1, MAX_TASK_NUMBER + 1, True, "1", 1.0])
def test_check_task_number(task: object) -> None:
    with pytest.raises(InvalidNameError):
        check_task_number(task)  # type: ignore[arg-type]


@pytest.mark.parametrize("connector", ["", "a/b", "/"])
def test_check_connector_id(connector: str) -> None:
    with pytest.raises(InvalidNameError):
        check_connector_id(connector)


def test_task_name_is_a_tuple() -> None:
    connector, task = parse_task_name("connectors/my-conn/tasks/3")
    assert (connector, task) == ("my-conn", 3)
    assert format_task_name("my-conn", 3) == "connectors/my-conn/tasks/3"
    assert format_connector_name("my-conn") == "connectors/my-conn"
