"""How the embedded Spark Connect server runs (`start_spark_connect`): its JVM really carries
SLUICEWAY_SPARK_JAVA_OPTIONS (the test bed sets the JIT's first tier only, tests/conftest.py), and
its sessions are not isolated from one another, so they share one pool of Python workers instead of
each starting its own (`spark_connect_driver.py` says why)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedSparkConnect, spark_java_options

pytestmark = pytest.mark.integration


def test_the_spark_connect_jvm_runs_with_the_stacks_java_options(spark_connect: EmbeddedSparkConnect) -> None:
    options = spark_java_options().split()
    assert options, "the test bed sets SLUICEWAY_SPARK_JAVA_OPTIONS"
    # spark-submit becomes the JVM (exec), so the launcher's process id is the JVM's.
    argv = Path(f"/proc/{spark_connect.managed.process.pid}/cmdline").read_bytes().split(b"\0")
    words = [word.decode() for word in argv]
    assert words[0].endswith("java"), words[:3]
    # JVM options come before the main class, not after it as program arguments.
    main = words.index("org.apache.spark.deploy.SparkSubmit")
    for option in options:
        assert option in words[:main], (option, words[:main])


def _python_worker_artifacts(session: SparkSession) -> set[str]:
    """The artifact set Spark named for the Python workers that ran this session's UDF: a session
    of its own when isolated, Spark's shared "default" otherwise."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    @F.udf("string")
    def artifacts(_: int) -> str:
        return os.environ.get("SPARK_JOB_ARTIFACT_UUID", "")

    return {row[0] for row in session.range(4).select(artifacts("id")).collect()}


def test_sessions_share_the_python_workers(spark_connect: EmbeddedSparkConnect) -> None:
    seen: list[set[str]] = []
    for _ in range(2):
        session = SparkSession.builder.remote(spark_connect.remote).create()
        try:
            assert session.conf.get("spark.sql.artifact.isolation.enabled") == "false"
            seen.append(_python_worker_artifacts(session))
        finally:
            session.stop()
    assert seen == [{"default"}, {"default"}]
