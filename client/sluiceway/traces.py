"""Reading the traces that statuses carry: the one line a person wants to see first."""

from __future__ import annotations

import re

__all__ = ["summarize_trace"]

_TRACEBACK_HEADER = "Traceback (most recent call last):"
# `package.module.ErrorType: message` -> `ErrorType: message`
_QUALIFIED_TYPE = re.compile(r"^(?:[A-Za-z_][\w]*\.)+(?=[A-Za-z_]\w*(?::|$))")


def summarize_trace(trace: str) -> str:
    """The exception's type and message from a Python traceback, or the first line of any other text.

    A traceback names the exception after its last frame; with chained exceptions, and with Spark's
    errors that embed the Python worker's traceback in their message, the last traceback in the text
    is the one closest to the cause. A type's module path is dropped; an exception whose first message
    line is empty takes its next line instead.
    """
    lines = trace.splitlines()
    start = _last_traceback(lines)
    if start is None:
        return next((line.strip() for line in lines if line.strip()), "")
    rest = iter(lines[start + 1 :])
    for line in rest:
        # Frames and their source lines are indented; the exception line is the first that is not.
        if line.strip() and not line[0].isspace():
            summary = _QUALIFIED_TYPE.sub("", line.strip())
            if summary.endswith(":"):
                following = next((more.strip() for more in rest if more.strip()), "")
                summary = f"{summary} {following}".rstrip()
            return summary
    return lines[start].strip()


def _last_traceback(lines: list[str]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].strip() == _TRACEBACK_HEADER:
            return index
    return None
