"""KIP-875 offsets seen from the data: after an alter or a reset and a resume, real connectors on a
real executor start exactly at the new offsets.

A DataGenSource told that its last generated seq is 99 writes seq 100 onwards to Kafka, with no gap,
and after a reset starts again at seq 0. A SparkFileSink whose committed Kafka offset is set to 150
writes records 150..199 to Parquet and nothing before them; a reset deletes its consumer group, and it
then reads the topic from the start again. A SparkFileSink rewound to records it has written already
(to the start of its newest batch, by an alter or a reset, or into that batch) writes them again:
the lake then holds them once more, beside the batches of the earlier runs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
)
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    committed_offsets,
)

pytestmark = pytest.mark.integration

# DataGenSource: max.records bounds the seq itself (a task stops before seq MAX_SEQ), not the
# number of records generated since the committed offset.
MAX_SEQ = 250
GEN_BATCH = 50
ALTERED_SEQ = 99
# SparkFileSink: records in the topic, and the Kafka offset the sink is moved to.
PRODUCED = 200
SINK_START = 150
SINK_BATCH = 100
# SparkFileSink rewound: records in the topic, all in one batch, and an offset inside that batch.
REWOUND = 300
REWOUND_MIDDLE = 120
TIMEOUT = 60.0


@pytest.fixture
def stack(
    control_plane_factory: Callable[..., ControlPlaneProcess], spark_connect: EmbeddedSparkConnect
) -> Iterator[PipelineStack]:
    # A plane of its own: the executor runs only this test's connector.
    started = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "offsets")
    yield started
    started.close()


def create_topic(broker: EmbeddedBroker, topic: str) -> None:
    # One partition: the records of the topic are then in the order they were written.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def topic_seqs(broker: EmbeddedBroker, topic: str) -> list[int]:
    return [int(value["seq"]) for _, value in read_topic(broker.bootstrap_servers, topic)]


def parquet_seqs(spark: SparkSession, path: Path) -> list[int]:
    """The seq of every row in the sink's committed Parquet files."""
    if not any(path.glob("task=*/batch=*")):  # nothing published yet
        return []
    rows = (
        spark.read.parquet(str(path))
        .select(F.from_json(F.col("value").cast("string"), "seq LONG").alias("v"))
        .select("v.seq")
        .collect()
    )
    return [int(row["seq"]) for row in rows]


def test_datagen_source_starts_at_the_altered_offset_and_at_zero_after_a_reset(
    stack: PipelineStack, broker: EmbeddedBroker, unique: str
) -> None:
    client = stack.client
    name, topic = f"gen-{unique}", f"offsets-gen-{unique}"
    create_topic(broker, topic)
    client.create_connector(
        name,
        {
            "connector.class": "DataGenSource",
            "topic": topic,
            "tasks.max": 1,
            "max.records": MAX_SEQ,
            "batch.max.records": GEN_BATCH,
        },
        initial_state="STOPPED",
    )
    partition = {"task": 0}
    client.alter_offsets(name, [{"partition": partition, "offset": {"seq": ALTERED_SEQ}}])
    assert committed_offsets(client, name) == [(partition, {"seq": ALTERED_SEQ})]

    client.resume_connector(name)
    stack.wait_for(
        lambda: committed_offsets(client, name) == [(partition, {"seq": MAX_SEQ - 1})],
        "the task to commit its last seq",
        TIMEOUT,
    )
    # Committed means written: the topic holds exactly seq 100..249, in order.
    first_run = topic_seqs(broker, topic)
    assert first_run == list(range(ALTERED_SEQ + 1, MAX_SEQ))

    client.stop_connector(name)
    client.reset_offsets(name)
    assert committed_offsets(client, name) == []

    client.resume_connector(name)
    stack.wait_for(
        lambda: committed_offsets(client, name) == [(partition, {"seq": MAX_SEQ - 1})],
        "the task to commit its last seq again",
        TIMEOUT,
    )
    assert topic_seqs(broker, topic) == first_run + list(range(MAX_SEQ))


def test_spark_file_sink_starts_at_the_altered_offset_and_at_the_start_after_a_reset(
    stack: PipelineStack, broker: EmbeddedBroker, spark: SparkSession, unique: str, tmp_path: Path
) -> None:
    client = stack.client
    name, topic = f"sink-{unique}", f"offsets-sink-{unique}"
    out = tmp_path / "parquet"
    create_topic(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for seq in range(PRODUCED):
        producer.produce(topic, json.dumps({"task": 0, "seq": seq}).encode(), key=f"0-{seq}".encode())
    assert producer.flush(30) == 0

    client.create_connector(
        name,
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(out),
            "format": "parquet",
            "tasks.max": 1,
            "batch.max.records": SINK_BATCH,
        },
        initial_state="STOPPED",
    )
    partition = {"kafka_topic": topic, "kafka_partition": 0}
    client.alter_offsets(name, [{"partition": partition, "offset": {"kafka_offset": SINK_START}}])
    assert committed_offsets(client, name) == [(partition, {"kafka_offset": SINK_START})]

    client.resume_connector(name)
    # The sink commits the next offset to read once a batch's files are written.
    stack.wait_for(
        lambda: committed_offsets(client, name) == [(partition, {"kafka_offset": PRODUCED})],
        "the sink to commit the end of the topic",
        TIMEOUT,
    )
    assert sorted(parquet_seqs(spark, out)) == list(range(SINK_START, PRODUCED))

    client.stop_connector(name)
    client.reset_offsets(name)
    assert committed_offsets(client, name) == []

    # Without a committed offset the sink starts at the earliest record.
    client.resume_connector(name)
    stack.wait_for(
        lambda: committed_offsets(client, name) == [(partition, {"kafka_offset": PRODUCED})],
        "the sink to commit the end of the topic again",
        TIMEOUT,
    )
    assert Counter(parquet_seqs(spark, out)) == Counter([*range(PRODUCED), *range(SINK_START, PRODUCED)])


def test_spark_file_sink_writes_the_records_again_after_each_alter_or_reset(
    stack: PipelineStack, broker: EmbeddedBroker, spark: SparkSession, unique: str, tmp_path: Path
) -> None:
    """Each run writes the whole topic in one batch, so every rewind below lands on the start of
    the newest batch in the lake (or, for the reset, the partition's earliest offset): where a
    batch written but never committed would start too. The sink must write the records again."""
    client = stack.client
    name, topic = f"rewind-{unique}", f"offsets-rewind-{unique}"
    out = tmp_path / "parquet"
    create_topic(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for seq in range(REWOUND):
        producer.produce(topic, json.dumps({"task": 0, "seq": seq}).encode(), key=f"0-{seq}".encode())
    assert producer.flush(30) == 0
    partition = {"kafka_topic": topic, "kafka_partition": 0}
    at_end = [(partition, {"kafka_offset": REWOUND})]

    client.create_connector(
        name,
        {
            "connector.class": "SparkFileSink",
            "topics": topic,
            "path": str(out),
            "format": "parquet",
            "tasks.max": 1,
            "batch.max.records": REWOUND,
            # One batch of all the records, however slow a cold Spark server makes it.
            "batch.duration.ms": 600_000,
        },
    )
    expected: Counter[int] = Counter(range(REWOUND))

    def run_to_the_end(what: str) -> None:
        client.resume_connector(name)
        stack.wait_for(lambda: committed_offsets(client, name) == at_end, what, TIMEOUT)
        # A batch's files are published before its offsets are committed.
        assert Counter(parquet_seqs(spark, out)) == expected
        client.stop_connector(name)

    stack.wait_for(lambda: committed_offsets(client, name) == at_end, "the first run", TIMEOUT)
    assert Counter(parquet_seqs(spark, out)) == expected
    client.stop_connector(name)

    # Altered to 0, the start of the one batch in the lake: every record is written again.
    client.alter_offsets(name, [{"partition": partition, "offset": {"kafka_offset": 0}}])
    expected.update(range(REWOUND))
    run_to_the_end("the run after the alter to 0")

    # Reset: no committed offset, and the newest batch starts at the earliest offset.
    client.reset_offsets(name)
    assert committed_offsets(client, name) == []
    expected.update(range(REWOUND))
    run_to_the_end("the run after the reset")

    # Into the middle of the newest batch: from that offset on only.
    client.alter_offsets(name, [{"partition": partition, "offset": {"kafka_offset": REWOUND_MIDDLE}}])
    expected.update(range(REWOUND_MIDDLE, REWOUND))
    run_to_the_end(f"the run after the alter to {REWOUND_MIDDLE}")
