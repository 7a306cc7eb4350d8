"""add_recent_error: the recent-error history of connector and task statuses."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from sluiceway_server.storage.status_store import MAX_RECENT_ERRORS, ErrorEntry, add_recent_error

TRACE = """Traceback (most recent call last):
  File "/app/task.py", line 3, in poll
    raise ValueError("bad record")
ValueError: bad record
"""


def test_message_is_the_trace_summary() -> None:
    (entry,) = add_recent_error((), TRACE, "w1", message="Connector c: start() failed", time_ms=5)
    assert entry == ErrorEntry(5, "ValueError: bad record", TRACE, "w1")


def test_plain_text_trace_gives_its_first_line() -> None:
    (entry,) = add_recent_error((), "\n  first line\nsecond line\n", "w1", time_ms=5)
    assert entry.message == "first line"


def test_explicit_message_when_the_trace_has_none() -> None:
    for trace in (None, "", "  \n"):
        (entry,) = add_recent_error((), trace, "w1", message="task failed", time_ms=5)
        assert entry.message == "task failed"
        assert entry.trace == (trace or "")
    (entry,) = add_recent_error((), None, "w1", time_ms=5)
    assert entry.message == ""


def test_time_defaults_to_now() -> None:
    before = int(time.time() * 1000)
    (entry,) = add_recent_error((), TRACE, "w1")
    assert before <= entry.time_ms <= int(time.time() * 1000)


def test_newest_first_and_bounded() -> None:
    history: tuple[ErrorEntry, ...] = ()
    for n in range(MAX_RECENT_ERRORS + 5):
        history = add_recent_error(history, f"failure {n}", "w1", time_ms=n)
        assert len(history) == min(n + 1, MAX_RECENT_ERRORS)
        assert history[0].message == f"failure {n}"
    assert [e.time_ms for e in history] == list(range(MAX_RECENT_ERRORS + 4, 4, -1))


@given(st.lists(st.text(), max_size=30), st.one_of(st.none(), st.text()), st.one_of(st.none(), st.text()))
def test_history_properties(previous: list[str], trace: str | None, message: str | None) -> None:
    history = tuple(ErrorEntry(n, m, m, "w0") for n, m in enumerate(previous))
    updated = add_recent_error(history, trace, "w1", message=message, time_ms=-1)
    assert len(updated) == min(len(history) + 1, MAX_RECENT_ERRORS)
    assert updated[1:] == history[: MAX_RECENT_ERRORS - 1]
    assert updated[0].trace == (trace or "")
    assert updated[0].worker_id == "w1"
    if not (trace or "").strip():
        assert updated[0].message == (message or "")
