"""summarize_trace: the line of a status trace that the status table shows."""

from __future__ import annotations

import traceback

from hypothesis import given
from hypothesis import strategies as st

from sluiceway.common.traces import summarize_trace


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


# What an executor reported for a JdbcSource whose driver is not on Spark's classpath (Spark Connect
# 4.x), with most frames cut: pyspark's UnknownException carries the JVM class as "(reason)" and
# appends the JVM stack, whose frames must never become the summary.
JDBC_MISSING_DRIVER = (
    "Traceback (most recent call last):\n"
    '  File "/work/main/executor/sluiceway_executor/runner.py", line 183, in _run\n'
    "    self._loop(pipeline)\n"
    '  File "/work/main/executor/sluiceway_executor/connectors/jdbc.py", line 416, in read_batch\n'
    "    rows = self._read(spark, bounds_query(self._table, self._column, after, self._max_rows)).collect()\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/work/main/.venv/lib/python3.11/site-packages/pyspark/sql/connect/client/core.py", line 2443,'
    " in _handle_rpc_error\n"
    "    raise convert_exception(\n"
    "pyspark.errors.exceptions.connect.UnknownException: (java.lang.ClassNotFoundException)"
    " org.postgresql.Driver\n"
    "\n"
    "JVM stacktrace:\n"
    "java.lang.ClassNotFoundException\n"
    "\tat java.lang.ClassLoader.findClass(ClassLoader.java:723)\n"
    "\tat org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry$.register(DriverRegistry.scala:47)\n"
    "\tat org.apache.spark.sql.connect.execution.ExecuteThreadRunner$ExecutionThread.run"
    "(ExecuteThreadRunner.scala:341)\n"
)


def test_spark_connect_error_gives_the_jvm_exception() -> None:
    assert summarize_trace(JDBC_MISSING_DRIVER) == "ClassNotFoundException: org.postgresql.Driver"


def test_spark_connect_error_with_java_formatted_stack() -> None:
    # With spark.sql.connect.enrichError.enabled=false the stack comes as Java prints it.
    trace = JDBC_MISSING_DRIVER.replace(
        "java.lang.ClassNotFoundException\n\tat java.lang.",
        "java.lang.ClassNotFoundException: org.postgresql.Driver\n\tat java.base/java.lang.",
    )
    assert summarize_trace(trace) == "ClassNotFoundException: org.postgresql.Driver"


def test_spark_connect_error_without_message_gives_the_jvm_class() -> None:
    trace = JDBC_MISSING_DRIVER.replace(" org.postgresql.Driver\n", "\n", 1)
    assert summarize_trace(trace) == "ClassNotFoundException"


def test_empty_message_never_takes_a_jvm_frame() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "runner.py", line 1, in _run\n'
        "pyspark.errors.exceptions.connect.SparkException: \n"
        "\n"
        "JVM stacktrace:\n"
        "\tat org.apache.spark.sql.connect.execution.ExecuteThreadRunner.execute"
        "(ExecuteThreadRunner.scala:1)\n"
    )
    assert summarize_trace(trace) == "SparkException"


def test_python_worker_traceback_in_the_message_gives_its_exception() -> None:
    # A UDF that raised, through Spark Connect 4.x: the worker's traceback follows a
    # `[PYTHON_EXCEPTION] ...: Traceback (most recent call last):` line.
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/work/main/.venv/lib/python3.11/site-packages/pyspark/sql/connect/client/core.py",'
        " line 2443, in _handle_rpc_error\n"
        "    raise convert_exception(\n"
        '  File "/jobs/udfs.py", line 8, in udf_fail\n'
        '    raise ValueError("boom in udf")\n'
        "      ^^^^^^^^^^^^^^^^^\n"
        "pyspark.errors.exceptions.connect.PythonException: \n"
        "  An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker:"
        " Traceback (most recent call last):\n"
        '  File "/jobs/udfs.py", line 8, in udf_fail\n'
        '    raise ValueError("boom in udf")\n'
        "ValueError: boom in udf\n"
        " SQLSTATE: 38000\n"
    )
    assert summarize_trace(trace) == "ValueError: boom in udf"


def test_aborted_job_gives_the_failed_tasks_exception() -> None:
    trace = (
        "Traceback (most recent call last):\n"
        '  File "runner.py", line 1, in _run\n'
        "pyspark.errors.exceptions.connect.SparkException: Job aborted due to stage failure: Task 0 in stage"
        " 13.0 failed 1 times, most recent failure: Lost task 0.0 in stage 13.0 (TID 18) (localhost executor"
        " driver): org.apache.spark.SparkException: Python worker exited unexpectedly (crashed). Consider"
        " setting 'spark.sql.execution.pyspark.udf.faulthandler.enabled' or'spark.python.worker.faulthandler"
        ".enabled' configuration to 'true' for the better Python traceback.\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse"
        "(PythonRunner.scala:1136)\n"
        "\tat scala.collection.mutable.Growable.addAll(Growable...\n"
    )
    assert summarize_trace(trace).startswith("SparkException: Python worker exited unexpectedly (crashed).")


def test_jvm_text_without_traceback_skips_frames() -> None:
    text = "\tat java.lang.ClassLoader.findClass(ClassLoader.java:723)\n... 12 more\nCaused by: boom\n"
    assert summarize_trace(text) == "Caused by: boom"


@given(st.text())
def test_any_text_gives_one_line(text: str) -> None:
    summary = summarize_trace(text)
    assert summary == summary.strip()
    assert len(summary.splitlines()) <= 1
