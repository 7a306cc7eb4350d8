"""The executor's warm-up jobs on the real Spark Connect server and broker: both run, and neither
writes a record or creates a topic."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from sluiceway_executor.spark_warm_up import UNWRITTEN_TOPIC, warm_up
from sluiceway_server.embedded import EmbeddedBroker

pytestmark = pytest.mark.integration


def test_the_warm_up_runs_both_jobs_and_touches_no_topic(
    spark_with_sources: SparkSession, broker: EmbeddedBroker
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    warm_up(spark_with_sources, {"bootstrap.servers": broker.bootstrap_servers})
    # Twice: a session warmed again (a second welcome) runs the same jobs.
    warm_up(spark_with_sources, {"bootstrap.servers": broker.bootstrap_servers, "producer.linger.ms": "1"})
    assert UNWRITTEN_TOPIC not in admin.list_topics(timeout=10).topics


def test_a_warm_up_without_a_broker_address_fails_before_any_job(spark_with_sources: SparkSession) -> None:
    from sluiceway.connect import ConnectException

    with pytest.raises(ConnectException, match=r"no bootstrap\.servers"):
        warm_up(spark_with_sources, {})
