"""Fault test of the dead-letter queue (issue 33): 10,000 records, 100 of them malformed, flow
through a SparkFileSink with errors.tolerance=all while its executor is killed with SIGKILL
mid-run. Counted with readers of our own afterwards: the lake holds each of the 9,900 good records
once (lost = good - distinct rows, written twice = rows - distinct), and the dead-letter topic,
read committed, holds each of the 100 bad records once, with the error in its headers."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pyspark.sql import SparkSession

from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import EmbeddedBroker
from tests.fault.fault_helpers import ExecutorStarter, executor_tasks, wait_for
from tests.integration.dead_letter_helpers import produce_orders, read_dead_letters
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, published_rows, typed_lake_counts

pytestmark = pytest.mark.fault

RECORDS = 10_000
BAD_EVERY = 100
BATCH = 1_000


def test_dead_letters_and_the_lake_exactly_once_across_an_executor_kill(
    control_plane_factory: Callable[..., Any],
    start_executor: ExecutorStarter,
    broker: EmbeddedBroker,
    spark: SparkSession,
    unique: str,
    tmp_path: Path,
) -> None:
    plane = control_plane_factory(**FAST_EXECUTOR_SESSION)
    topic, dlq, lake = f"dlf-{unique}", f"dlf-{unique}-dlq", tmp_path / "lake"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produced = produce_orders(broker.bootstrap_servers, topic, RECORDS, bad_every=BAD_EVERY, bad_at=37)
    assert len(produced.bad) == RECORDS // BAD_EVERY

    first = start_executor(f"a-{unique}", [plane.address])
    wait_for(lambda: len(executor_tasks(plane.address)) == 1, 60, "the executor to attach", first.tail)
    client = SluicewayClient(plane.address, timeout=60)
    client.create_connector(
        f"lake-{unique}",
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(lake),
            "format": "parquet",
            "batch.max.records": str(BATCH),
            "key.converter": "StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
            "transforms": "numbers",
            "transforms.numbers.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.numbers.spec": "name:int32",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    # Killed once part of the records are in the lake, the rest still to come.
    wait_for(lambda: published_rows(lake) >= 2_000, 240, "records in the lake", first.tail)
    first.kill()
    at_kill = published_rows(lake)
    second = start_executor(f"b-{unique}", [plane.address])
    wait_for(
        lambda: (
            list(executor_tasks(plane.address)) == [f"b-{unique}"]
            and len(executor_tasks(plane.address)[f"b-{unique}"]) == 1
        ),
        60,
        "the task to move to the second executor",
        second.tail,
    )
    good = len(produced.good)
    wait_for(lambda: published_rows(lake) >= good, 300, "every good record in the lake", second.tail)
    wait_for(lambda: typed_lake_counts(spark, lake)[1] >= good, 60, "every distinct good record", second.tail)
    time.sleep(3)  # a batch written twice, or dead letters sent twice, would land now

    rows, distinct = typed_lake_counts(spark, lake)
    letters = read_dead_letters(broker.bootstrap_servers, dlq)
    offsets = [int(letter.headers["__connect.errors.offset"] or b"") for letter in letters]
    print(
        f"generated {RECORDS} ({good} good, {len(produced.bad)} bad); lake rows {rows}, distinct {distinct} "
        f"({at_kill} rows when the executor was killed); dead letters {len(letters)}, "
        f"distinct {len(set(offsets))}"
    )
    assert distinct == good, f"{good - distinct} good record(s) lost"
    assert rows == distinct, f"{rows - distinct} good record(s) written twice"
    assert at_kill < good, "the executor was killed after the run had ended"
    assert sorted(set(offsets)) == sorted(produced.bad), "dead letters lost or not the bad records"
    assert len(offsets) == len(produced.bad), (
        f"{len(offsets) - len(produced.bad)} dead letter(s) written twice"
    )
    for letter in letters:
        offset = int(letter.headers["__connect.errors.offset"] or b"")
        assert letter.key == str(offset).encode()
        assert produced.bad[offset] in (letter.headers["__connect.errors.exception.message"] or b"").decode()
