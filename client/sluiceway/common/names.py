"""Resource names of connectors and tasks (AIP-122): `connectors/{connector}` and
`connectors/{connector}/tasks/{task}`. The one place that formats and parses them; the server,
the executors and the client library all use it.

- A connector id is not empty and contains no '/'.
- A task number is written in ASCII digits 0-9 only: no sign, no whitespace, no other Unicode
  digits (`"²"`, `"٣"`). Leading zeros are accepted. It fits the API's int32 task id:
  0 <= task <= `MAX_TASK_NUMBER`.

Parsing raises `InvalidNameError` (a ValueError) and nothing else for any `str` input; the
`check_*` functions validate ids before they are formatted. Formatting a valid connector id and
task number and parsing the result gives them back.
"""

from __future__ import annotations

from typing import NamedTuple

from sluiceway.common.limits import echo

__all__ = [
    "CONNECTORS_PREFIX",
    "MAX_TASK_NUMBER",
    "TASKS_SEPARATOR",
    "InvalidNameError",
    "InvalidTaskNumberError",
    "TaskName",
    "check_connector_id",
    "check_task_number",
    "format_connector_name",
    "format_task_name",
    "parse_connector_name",
    "parse_task_name",
    "parse_task_number",
]

CONNECTORS_PREFIX = "connectors/"
TASKS_SEPARATOR = "/tasks/"
# `Task.id` and `TaskStatus.id` are int32 in protos/sluiceway/api/v1/connectors.proto.
MAX_TASK_NUMBER = 2**31 - 1
_MAX_DIGITS = len(str(MAX_TASK_NUMBER))
_ASCII_DIGITS = frozenset("0123456789")


class InvalidNameError(ValueError):
    """`name` is not the resource name (or name part) that was expected; `str()` says why."""

    def __init__(self, name: str, description: str) -> None:
        super().__init__(description)
        self.name = name
        self.description = description


class InvalidTaskNumberError(InvalidNameError):
    """A task number, `number`, is not ASCII digits 0-9 only with a value of at most
    `MAX_TASK_NUMBER`; `name` is the task name it came from, if any."""

    def __init__(self, number: str, name: str | None = None) -> None:
        problem = (
            f"the task number must be an integer from 0 to {MAX_TASK_NUMBER} in digits 0-9, "
            f"got {echo(number)}"
        )
        super().__init__(
            number if name is None else name,
            problem if name is None else f"not a task resource name: {echo(name)} ({problem})",
        )
        self.number = number


class TaskName(NamedTuple):
    """A parsed task name. A tuple, so `connector, task = parse_task_name(name)` works."""

    connector: str
    task: int

    def __str__(self) -> str:
        return format_task_name(self.connector, self.task)


def check_connector_id(connector: str) -> str:
    """`connector` if it is a valid connector id (not empty, no '/'), else InvalidNameError."""
    if not connector or "/" in connector:
        raise InvalidNameError(connector, f"not a connector id (non-empty, without '/'): {echo(connector)}")
    return connector


def check_task_number(task: int) -> int:
    """`task` if it is a valid task number (an int, not a bool, 0 <= task <= MAX_TASK_NUMBER),
    else InvalidNameError."""
    # bool is an int subclass; True as a task number is always a mistake.
    if isinstance(task, bool) or not isinstance(task, int) or not 0 <= task <= MAX_TASK_NUMBER:
        raise InvalidNameError(
            repr(task), f"a task number is an integer from 0 to {MAX_TASK_NUMBER}, got {task!r}"
        )
    return task


def format_connector_name(connector: str) -> str:
    """`"my-conn"` -> `"connectors/my-conn"`. Formats what it is given: input from users goes
    through `check_connector_id` first (stored names are shown as they are)."""
    return CONNECTORS_PREFIX + connector


def parse_connector_name(name: str) -> str:
    """`"connectors/my-conn"` -> `"my-conn"`."""
    connector = name[len(CONNECTORS_PREFIX) :]
    if not name.startswith(CONNECTORS_PREFIX) or not connector or "/" in connector:
        raise InvalidNameError(
            name, f"not a connector resource name (connectors/{{connector}}): {echo(name)}"
        )
    return connector


def parse_task_number(number: str, name: str | None = None) -> int:
    """`"3"` -> `3`; InvalidTaskNumberError (naming `name`, the task name, if given) unless
    `number` is ASCII digits 0-9 only with a value of at most MAX_TASK_NUMBER."""
    digits = number.lstrip("0") or "0"
    # Bound the length before int(): no huge conversions, and no int-max-str-digits ValueError.
    if not number or not _ASCII_DIGITS.issuperset(number) or len(digits) > _MAX_DIGITS:
        raise InvalidTaskNumberError(number, name)
    value = int(digits)
    if value > MAX_TASK_NUMBER:
        raise InvalidTaskNumberError(number, name)
    return value


def format_task_name(connector: str, task: int) -> str:
    """`("my-conn", 3)` -> `"connectors/my-conn/tasks/3"`. Formats what it is given, as
    `format_connector_name`; `check_connector_id` and `check_task_number` validate."""
    return f"{CONNECTORS_PREFIX}{connector}{TASKS_SEPARATOR}{task}"


def parse_task_name(name: str) -> TaskName:
    """`"connectors/my-conn/tasks/3"` -> `TaskName("my-conn", 3)`."""
    parts = name.split("/")
    if len(parts) != 4 or parts[0] != "connectors" or parts[2] != "tasks" or not parts[1]:
        raise InvalidNameError(
            name, f"not a task resource name: {echo(name)} (expected connectors/{{connector}}/tasks/{{task}})"
        )
    return TaskName(parts[1], parse_task_number(parts[3], name))
