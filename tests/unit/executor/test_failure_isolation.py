"""Which Spark errors start the search by halves for the records a batch failed on: those a
record's data causes (SQLSTATE class 22, raise_error's P0001), never the session's or the job's."""

from __future__ import annotations

import pytest

from sluiceway_executor.pipelines.failure_isolation import IsolatedFailure, is_data_error


class _SparkError(Exception):
    def __init__(self, message: str, state: str | None) -> None:
        super().__init__(message)
        self._state = state

    def getSqlState(self) -> str | None:  # noqa: N802 - PySpark's name
        return self._state


@pytest.mark.parametrize(
    ("state", "data"),
    [
        ("22018", True),  # CAST_INVALID_INPUT
        ("22012", True),  # DIVIDE_BY_ZERO
        ("22003", True),  # ARITHMETIC_OVERFLOW
        ("P0001", True),  # raise_error
        ("42703", False),  # an unresolved column: the plan's fault, not a record's
        ("XX000", False),
        (None, False),
    ],
)
def test_only_errors_of_a_records_data_count(state: str | None, data: bool) -> None:
    assert is_data_error(_SparkError("boom", state)) is data


def test_other_exceptions_are_no_data_errors() -> None:
    assert not is_data_error(RuntimeError("no state"))


def test_a_failure_keeps_the_first_line_of_the_message() -> None:
    failure = IsolatedFailure.of(
        7, _SparkError("[USER_RAISED_EXCEPTION] unlucky 7\nJVM stacktrace: ...", "P0001")
    )
    assert failure == IsolatedFailure(7, f"{__name__}._SparkError", "[USER_RAISED_EXCEPTION] unlucky 7")
