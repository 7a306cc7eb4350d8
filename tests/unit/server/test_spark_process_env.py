"""The environment of the Spark JVMs we start: ours, with the caller's additions, and without the
variables that would start coverage.py in every Python worker Spark forks."""

from __future__ import annotations

import pytest

from sluiceway_server.embedded import spark_process_env


def test_coverage_start_up_variables_are_left_out_and_the_rest_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COVERAGE_PROCESS_CONFIG", ":data:{}")
    monkeypatch.setenv("COVERAGE_PROCESS_START", "pyproject.toml")
    monkeypatch.setenv("COVERAGE_FILE", "/tmp/elsewhere/.coverage")
    monkeypatch.setenv("SLUICEWAY_SOMETHING", "kept")
    env = spark_process_env(SPARK_LOCAL_IP="127.0.0.1")
    assert "COVERAGE_PROCESS_CONFIG" not in env
    assert "COVERAGE_PROCESS_START" not in env
    # Harmless without a starter, and what a process that does measure itself would want.
    assert env["COVERAGE_FILE"] == "/tmp/elsewhere/.coverage"
    assert env["SLUICEWAY_SOMETHING"] == "kept"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_an_override_replaces_the_inherited_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_LOG_DIR", "/var/log/elsewhere")
    assert spark_process_env(SPARK_LOG_DIR="/tmp/logs")["SPARK_LOG_DIR"] == "/tmp/logs"


def test_pysparks_marks_of_a_connect_client_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Set in a process once it has opened a Spark Connect session; the embedded server's driver
    # program would then refuse to be a classic Spark driver.
    markers = {"SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE"}
    for name in markers:
        monkeypatch.setenv(name, "1")
    assert not markers & set(spark_process_env())
