"""The one format and parser of `{prefix}{connector}-{task}`, the key of a task's record in the
config topic (`task-`) and the status topic (`status-task-`)."""

from __future__ import annotations

import pytest

from sluiceway_server.storage import serde
from sluiceway_server.storage.config_store import TASK_PREFIX, task_key
from sluiceway_server.storage.status_store import TASK_STATUS_PREFIX, task_status_key


@pytest.mark.parametrize("prefix", [TASK_PREFIX, TASK_STATUS_PREFIX])
@pytest.mark.parametrize("connector", ["c", "my-conn-2", "task-7", "-", "7"])
def test_a_key_parses_back_to_its_connector_and_task(prefix: str, connector: str) -> None:
    key = serde.task_record_key(prefix, connector, 12)
    assert key == f"{prefix}{connector}-12".encode()
    assert serde.parse_task_record_key(key.decode(), prefix) == (connector, 12)


def test_the_stores_write_their_own_prefix() -> None:
    assert task_key("c", 0) == b"task-c-0"
    assert task_status_key("c", 0) == b"status-task-c-0"


@pytest.mark.parametrize("rest", ["c", "c-", "-0", "c-x", "c-+1", "c-1 ", "c-\u00b2", "c-\u0663", ""])
def test_a_key_without_a_connector_and_ascii_digits_is_refused(rest: str) -> None:
    assert serde.parse_task_record_key(TASK_PREFIX + rest, TASK_PREFIX) is None


def test_leading_zeros_are_read_as_the_number() -> None:
    assert serde.parse_task_record_key("status-task-c-007", TASK_STATUS_PREFIX) == ("c", 7)
