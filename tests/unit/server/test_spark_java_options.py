"""SLUICEWAY_SPARK_JAVA_OPTIONS: extra options for every JVM of the embedded stack, added after what a
Spark setting already holds, and nothing at all when the variable is unset or blank. Whether a JVM
really starts with them is seen in the test bed itself, whose Spark Connect runs with the JIT's
first tier only (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway_server.embedded import SPARK_JAVA_OPTIONS_ENV, spark_java_options, with_java_options
from sluiceway_server.spark_cluster import EmbeddedSparkCluster

DRIVER = "spark.driver.extraJavaOptions"


def test_unset_or_blank_adds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPARK_JAVA_OPTIONS_ENV, raising=False)
    assert spark_java_options() == ""
    assert with_java_options({"spark.ui.enabled": "false"}, DRIVER) == {"spark.ui.enabled": "false"}
    monkeypatch.setenv(SPARK_JAVA_OPTIONS_ENV, "  \t ")
    assert with_java_options({}, DRIVER) == {}


def test_the_options_are_normalised_and_follow_the_settings_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SPARK_JAVA_OPTIONS_ENV, " -XX:TieredStopAtLevel=1   -Xss4m ")
    assert spark_java_options() == "-XX:TieredStopAtLevel=1 -Xss4m"
    assert with_java_options({}, DRIVER) == {DRIVER: "-XX:TieredStopAtLevel=1 -Xss4m"}
    given = {DRIVER: "-Dfile.encoding=UTF-8", "other": "kept"}
    assert with_java_options(given, DRIVER) == {
        DRIVER: "-Dfile.encoding=UTF-8 -XX:TieredStopAtLevel=1 -Xss4m",
        "other": "kept",
    }
    assert given[DRIVER] == "-Dfile.encoding=UTF-8", "the caller's mapping is left as it was"


def test_the_standalone_daemons_get_them_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cluster = EmbeddedSparkCluster(
        master_port=7077, master_ui_port=8080, work_dir=tmp_path, log_dir=tmp_path, worker_cores=1
    )
    monkeypatch.delenv("SPARK_DAEMON_JAVA_OPTS", raising=False)
    monkeypatch.setenv(SPARK_JAVA_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
    assert cluster._env()["SPARK_DAEMON_JAVA_OPTS"] == "-XX:TieredStopAtLevel=1"
    monkeypatch.delenv(SPARK_JAVA_OPTIONS_ENV)
    assert "SPARK_DAEMON_JAVA_OPTS" not in cluster._env()


def test_the_daemons_keep_the_options_their_environment_gives(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cluster = EmbeddedSparkCluster(
        master_port=7077, master_ui_port=8080, work_dir=tmp_path, log_dir=tmp_path, worker_cores=1
    )
    monkeypatch.setenv("SPARK_DAEMON_JAVA_OPTS", "-Dspark.deploy.zookeeper.url=zk:2181")
    monkeypatch.delenv(SPARK_JAVA_OPTIONS_ENV, raising=False)
    assert cluster._env()["SPARK_DAEMON_JAVA_OPTS"] == "-Dspark.deploy.zookeeper.url=zk:2181"
    monkeypatch.setenv(SPARK_JAVA_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
    assert (
        cluster._env()["SPARK_DAEMON_JAVA_OPTS"]
        == "-Dspark.deploy.zookeeper.url=zk:2181 -XX:TieredStopAtLevel=1"
    )
