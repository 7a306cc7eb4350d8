"""What the tests on Spark's standalone cluster share (the cluster itself and its Spark Connect server
are session fixtures of tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from sluiceway_server.embedded import EmbeddedSparkConnect


@pytest.fixture(scope="module")
def cluster_spark(cluster_spark_connect: EmbeddedSparkConnect) -> Iterator[SparkSession]:
    """A session of the test's own on the cluster's Spark Connect server, for its reads of the lake."""
    session = SparkSession.builder.remote(cluster_spark_connect.remote).getOrCreate()
    yield session
    session.stop()
