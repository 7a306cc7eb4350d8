"""Session-wide test bed: one real broker (Tansu) and one real Spark Connect server per
test session; every test gets its own topic and group names."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, start_broker, start_spark_connect

LOG_DIR = Path(os.environ.get("SLUICEWAY_TEST_LOG_DIR", "/tmp/sluiceway-test-logs"))


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A Kafka-compatible broker on a free loopback port for the whole session."""
    started = start_broker(LOG_DIR)
    yield started
    started.stop()


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[EmbeddedSparkConnect]:
    """A Spark Connect server (local[2]) for the whole session; its Python workers run
    this interpreter, so they import the project."""
    started = start_spark_connect(LOG_DIR)
    yield started
    started.stop()


@pytest.fixture
def unique() -> str:
    """A short unique suffix for this test's topics, groups and connector names."""
    return uuid.uuid4().hex[:10]
