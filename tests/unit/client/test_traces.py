"""summarize_trace: the line of a status trace that the status table shows."""

from __future__ import annotations

import traceback

from hypothesis import given
from hypothesis import strategies as st

from sluiceway.traces import summarize_trace


class OffsetCommitError(Exception):
    pass


def _trace_of(error: BaseException) -> str:
    try:
        raise error
    except BaseException as raised:
        return "".join(traceback.format_exception(raised))


def test_python_traceback_gives_type_and_message() -> None:
    trace = _trace_of(ValueError("batch 7: value is not JSON"))
    assert trace.startswith("Traceback (most recent call last):")
    assert summarize_trace(trace) == "ValueError: batch 7: value is not JSON"


def test_chained_exceptions_give_the_last_one() -> None:
    try:
        try:
            raise KeyError("seq")
        except KeyError as cause:
            raise OffsetCommitError("commit refused") from cause
    except OffsetCommitError as error:
        trace = "".join(traceback.format_exception(error))
    assert "KeyError" in trace
    assert summarize_trace(trace) == "OffsetCommitError: commit refused"


def test_multi_line_message_gives_its_first_line() -> None:
    trace = _trace_of(RuntimeError("the job failed\n  stage 3 of 4\nsee the executor log"))
    assert summarize_trace(trace) == "RuntimeError: the job failed"


def test_module_path_of_the_type_is_dropped() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "runner.py", line 1, in _run\n'
        "pyspark.errors.exceptions.connect.SparkConnectGrpcException: (UNAVAILABLE) failed to connect\n"
    )
    assert summarize_trace(trace) == "SparkConnectGrpcException: (UNAVAILABLE) failed to connect"


def test_empty_first_message_line_takes_the_next() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "runner.py", line 1, in _run\n'
        "pyspark.errors.exceptions.connect.PythonException: \n"
        "  An exception was thrown from the Python worker.\n"
    )
    assert summarize_trace(trace) == "PythonException: An exception was thrown from the Python worker."


def test_text_without_traceback_gives_its_first_line() -> None:
    assert summarize_trace("\n  Connector gen: start() did not return within 30.0s\nmore\n") == (
        "Connector gen: start() did not return within 30.0s"
    )
    assert summarize_trace("") == ""
    assert summarize_trace("Traceback (most recent call last):\n") == "Traceback (most recent call last):"


@given(st.text())
def test_any_text_gives_one_line(text: str) -> None:
    summary = summarize_trace(text)
    assert summary == summary.strip()
    assert len(summary.splitlines()) <= 1
