"""The session's Spark Connect JVM really runs with SLUICEWAY_SPARK_JAVA_OPTIONS (the test bed sets
the JIT's first tier only, tests/conftest.py): spark-submit hands `spark.driver.extraJavaOptions` to
the JVM it becomes, which keeps the launcher's process id."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway_server.embedded import EmbeddedSparkConnect, spark_java_options

pytestmark = pytest.mark.integration


def test_the_spark_connect_jvm_runs_with_the_stacks_java_options(spark_connect: EmbeddedSparkConnect) -> None:
    options = spark_java_options().split()
    assert options, "the test bed sets SLUICEWAY_SPARK_JAVA_OPTIONS"
    argv = Path(f"/proc/{spark_connect.managed.process.pid}/cmdline").read_bytes().split(b"\0")
    words = [word.decode() for word in argv]
    assert words[0].endswith("java"), words[:3]
    # JVM options come before the main class, not after it as program arguments.
    main = words.index("org.apache.spark.deploy.SparkSubmit")
    for option in options:
        assert option in words[:main], (option, words[:main])
