"""Reading the traces that statuses carry: the one line a person wants to see first."""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["summarize_trace"]

_TRACEBACK_HEADER = "Traceback (most recent call last):"
# `package.module.ErrorType: message` -> `ErrorType: message`
_QUALIFIED_TYPE = re.compile(r"^(?:[A-Za-z_][\w]*\.)+(?=[A-Za-z_]\w*(?::|$))")
# A JVM stack frame (`\tat org.Foo.bar(Foo.java:1)`, maybe cut short) or Java's `... 12 more`; Spark
# Connect heads its copy of the JVM stack with `JVM stacktrace:`. None of these says what failed.
_JVM_FRAME = re.compile(r"^at [\w$./<>-]+\(|^\.\.\. \d+ more$")
_JVM_STACKTRACE = "JVM stacktrace:"
# Spark Connect's UnknownException carries the JVM exception's class as a `(reason)` before the
# message: `UnknownException: (java.lang.ClassNotFoundException) org.postgresql.Driver`.
_JVM_REASON = re.compile(r"^\w+: \((?:[a-z_][\w$]*\.)+([A-Z][\w$]*)\)(?: (.*))?$")
# A job that failed in a Spark task names that task's exception after this preamble.
_STAGE_FAILURE = re.compile(
    r"^\w+: Job aborted due to stage failure: .*?most recent failure: "
    r"Lost task \S+ in stage \S+ \(TID \d+\) \([^)]*\): (.+)$"
)


def summarize_trace(trace: str) -> str:
    """The exception's type and message from a Python traceback, else the text's first line that is
    not a JVM stack frame.

    A traceback names the exception after its last frame; with chained exceptions, and with Spark's
    errors that embed the Python worker's traceback in their message, the last traceback in the text
    is the one closest to the cause. A type's module path is dropped; an exception whose first message
    line is empty takes its next line instead. Spark's wrappers give way to the exception they carry:
    the JVM exception of a Spark Connect error, the failed task's exception of an aborted job; JVM
    stack frames are never the summary.
    """
    lines = trace.splitlines()
    for start in _tracebacks(lines):
        summary = _exception_line(iter(lines[start + 1 :]))
        if summary:
            return summary
    meaningful = [line.strip() for line in lines if line.strip()]
    return next(
        (line for line in meaningful if not _is_jvm_detail(line)), meaningful[0] if meaningful else ""
    )


def _tracebacks(lines: list[str]) -> Iterator[int]:
    """Where tracebacks start, last first. Spark puts a Python worker's traceback on the line of
    its own message (`...PythonException: Traceback (most recent call last):`)."""
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].rstrip().endswith(_TRACEBACK_HEADER):
            yield index


def _exception_line(rest: Iterator[str]) -> str:
    for line in rest:
        # Frames and their source lines are indented; the exception line is the first that is not.
        if line.strip() and not line[0].isspace():
            summary = line.strip()
            if summary.endswith(":"):
                following = next((more.strip() for more in rest if more.strip()), "")
                if following and not _is_jvm_detail(following):
                    summary = f"{summary} {following}"
                else:
                    summary = summary.rstrip(":")
            return _unwrap(_QUALIFIED_TYPE.sub("", summary))
    return ""


def _unwrap(summary: str) -> str:
    stage = _STAGE_FAILURE.match(summary)
    if stage:
        summary = _QUALIFIED_TYPE.sub("", stage.group(1).strip())
    reason = _JVM_REASON.match(summary)
    if reason:
        name, message = reason.groups()
        summary = f"{name}: {message}" if message else name
    return summary


def _is_jvm_detail(line: str) -> bool:
    return line == _JVM_STACKTRACE or _JVM_FRAME.match(line) is not None
