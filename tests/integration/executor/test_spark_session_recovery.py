"""A Spark Connect server of the test's own, killed with SIGKILL and started again on the same port:
the session built on the first server fails in a way we recognise, and SparkSessions replaces it
with a working one that has our data sources registered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sluiceway_executor.failures import FailureKind, classify
from sluiceway_executor.spark_sessions import SparkSessions
from sluiceway_server.embedded import EmbeddedSparkConnect, start_spark_connect
from tests.conftest import LOG_DIR


@pytest.fixture
def own_spark_connect() -> Iterator[list[EmbeddedSparkConnect]]:
    """The servers the test starts (the last one is running), stopped at the end."""
    servers = [start_spark_connect(LOG_DIR / "spark-recovery")]
    yield servers
    for server in servers:
        server.stop()


def test_a_killed_and_restarted_server_gets_a_new_session(
    own_spark_connect: list[EmbeddedSparkConnect],
) -> None:
    first = own_spark_connect[0]
    keeper = SparkSessions(first.remote, threading.Event())
    lost = keeper.start()
    assert lost is not None
    try:
        assert lost.range(3).count() == 3
        first.managed.kill()
        own_spark_connect.append(start_spark_connect(LOG_DIR / "spark-recovery", port=first.port))
        try:
            lost.range(3).count()
        except Exception as exc:  # whatever the client raises for a session the new server never had
            error: BaseException = exc
        else:
            pytest.fail("a session of the killed server still answered")
        print(f"the old session fails with: {type(error).__name__}: {str(error)[:300]}")
        assert classify(error, lambda: keeper.healthy(lost, timeout=20)) is FailureKind.SPARK_SESSION

        started = time.monotonic()
        renewed = keeper.renew(lost)
        assert renewed is not None and renewed is not lost and keeper.generation == 2
        assert keeper.healthy(renewed)
        # The data sources an executor's pipelines use are there on the new session.
        rows = (
            renewed.read.format("sluiceway-kafka")
            .option("bootstrap.servers", "127.0.0.1:9")
            .option("ranges", "[]")
            .load()
            .count()
        )
        assert rows == 0
        print(f"new session ready {time.monotonic() - started:.1f}s after the failure was seen")
    finally:
        keeper.close()
