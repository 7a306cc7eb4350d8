"""The executor's task pipelines called directly (no control plane) against the real broker and the
real Spark Connect server: DataGen → Kafka, Kafka → Parquet, FileStream source and sink, and a sink
whose `topics.regex` picks up a topic created later. Commits are simulated by handing each batch's
outcome back to the pipeline, as the runner does after the control plane accepted it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import SparkSession

from sluiceway.common.offsets import SINK_OFFSETS_CHANGE, OffsetPair
from sluiceway.connect import OffsetRange
from sluiceway.connect import TopicPartition as ConnectTopicPartition
from sluiceway_executor.connectors import lake_commits
from sluiceway_executor.connectors.lake_commits import (
    batch_dir,
    batch_key,
    manifest,
    newest_written,
    publish,
    staging_dir,
)
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_executor.pipelines.pipeline import BatchOutcome, Pipeline, PlansAhead
from sluiceway_executor.pipelines.sink import consumer_group
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedBroker

pytestmark = pytest.mark.integration

DATAGEN_TASK = "sluiceway_executor.connectors.datagen.DataGenBatchTask"
FILE_SOURCE_TASK = "sluiceway_executor.connectors.filestream.FileStreamSourceTask"
FILE_SINK_TASK = "sluiceway_executor.connectors.filestream.FileStreamSinkTask"
SPARK_FILE_SINK_TASK = "sluiceway_executor.connectors.spark_file.SparkFileSinkTask"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


@pytest.fixture(scope="module")
def factory(spark_with_sources: SparkSession) -> SparkPipelineFactory:
    return SparkPipelineFactory(spark_with_sources)


@pytest.fixture
def worker(broker: EmbeddedBroker) -> dict[str, str]:
    return {"bootstrap.servers": broker.bootstrap_servers}


@pytest.fixture
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def spec(
    connector: str,
    task: int,
    config: Mapping[str, str],
    task_class: str,
    *,
    task_count: int = 1,
    source_offsets: tuple[OffsetPair, ...] = (),
) -> TaskSpec:
    task_config = {**config, "task.class": task_class}
    if task_class == DATAGEN_TASK:
        task_config["task.id"] = str(task)
    return TaskSpec(
        name=f"connectors/{connector}/tasks/{task}",
        connector=connector,
        task_index=task,
        generation=1,
        connector_config=dict(config),
        task_config=task_config,
        paused=False,
        task_count=task_count,
        source_offsets=source_offsets,
    )


def run_until_empty(pipeline: Pipeline, max_batches: int = 50) -> list[BatchOutcome]:
    """Batches until one reads nothing; each is "committed" as the runner would."""
    outcomes: list[BatchOutcome] = []
    for batch_id in range(max_batches):
        outcome = pipeline.run_batch(batch_id)
        if outcome.offsets:
            pipeline.committed(outcome)
        if outcome.empty:
            return outcomes
        outcomes.append(outcome)
    raise AssertionError(f"still not empty after {max_batches} batches")


def produce(broker: EmbeddedBroker, topic: str, values: list[bytes], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for index, value in enumerate(values):
        if partition is None:
            producer.produce(topic, value, key=str(index).encode())
        else:
            producer.produce(topic, value, key=str(index).encode(), partition=partition)
    assert producer.flush(30) == 0


def consume_all(broker: EmbeddedBroker, topic: str, partitions: int) -> list[Any]:
    """Every record of the topic, read to the end of each partition with a raw consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": f"check-{topic}",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    done: set[int] = set()
    try:
        while len(done) < partitions:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is None:
                    messages.append(message)
                elif error.code() == KafkaError._PARTITION_EOF:
                    done.add(message.partition() or 0)
                else:
                    raise AssertionError(str(error))
    finally:
        consumer.close()
    return messages


def test_datagen_batches_write_gap_free_sequences_per_task(
    factory: SparkPipelineFactory,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
) -> None:
    topic = f"gen-{unique}"
    create_topic(admin, topic, 3)
    config = {
        "name": f"gen-{unique}",
        "connector.class": "DataGenSource",
        "topic": topic,
        "max.records": "25000",
        "batch.max.records": "10000",
        # Batches of exactly 10,000 records: a first batch on a cold Spark server that takes longer
        # than the default 5 s would make the next one smaller.
        "batch.duration.ms": "600000",
        "tasks.max": "2",
    }
    for task in range(2):
        pipeline = factory(spec(f"gen-{unique}", task, config, DATAGEN_TASK, task_count=2), worker)
        pipeline.start()
        outcomes = run_until_empty(pipeline)
        pipeline.stop()
        assert [o.offsets for o in outcomes] == [
            [({"task": task}, {"seq": 9999})],
            [({"task": task}, {"seq": 19999})],
            [({"task": task}, {"seq": 24999})],
        ]
        assert all(o.topics == {topic} for o in outcomes)

    seqs: dict[int, list[int]] = {0: [], 1: []}
    for message in consume_all(broker, topic, 3):
        value = json.loads(message.value())
        assert message.key().decode() == f"{value['task']}-{value['seq']}"
        seqs[value["task"]].append(value["seq"])
    assert {task: sorted(values) for task, values in seqs.items()} == {
        0: list(range(25_000)),
        1: list(range(25_000)),
    }


def test_datagen_resumes_after_the_committed_offset(
    factory: SparkPipelineFactory,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
) -> None:
    topic = f"gen-{unique}"
    create_topic(admin, topic, 1)
    config = {"connector.class": "DataGenSource", "topic": topic, "max.records": "1500"}
    pipeline = factory(
        spec(f"gen-{unique}", 0, config, DATAGEN_TASK, source_offsets=(({"task": 0}, {"seq": 999}),)), worker
    )
    pipeline.start()
    outcomes = run_until_empty(pipeline)
    assert [o.offsets for o in outcomes] == [[({"task": 0}, {"seq": 1499})]]
    assert sorted(json.loads(m.value())["seq"] for m in consume_all(broker, topic, 1)) == list(
        range(1000, 1500)
    )


def test_kafka_to_parquet_writes_exact_records_and_commits_the_ends(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"in-{unique}"
    create_topic(admin, topic, 3)
    values = [json.dumps({"n": n, "text": f"record {n}"}).encode() for n in range(3000)]
    produce(broker, topic, values)
    out = tmp_path / "parquet"
    config = {
        "name": f"pq-{unique}",
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": str(out),
        "format": "parquet",
        "batch.max.records": "1200",
    }
    ends: dict[tuple[str, int], int] = {}
    total_batches = 0
    for task in range(2):
        pipeline = factory(spec(f"pq-{unique}", task, config, SPARK_FILE_SINK_TASK, task_count=2), worker)
        pipeline.start()
        outcomes = run_until_empty(pipeline)
        pipeline.stop()
        total_batches += len(outcomes)
        for outcome in outcomes:
            assert outcome.topics == {topic}
            for partition, offset in outcome.offsets:
                assert offset is not None
                ends[(partition["kafka_topic"], partition["kafka_partition"])] = offset["kafka_offset"]
    # Task 0 has partitions 0 and 2, task 1 has partition 1; 1200 records a batch split over them.
    assert total_batches >= 3

    rows = spark_with_sources.read.parquet(str(out)).collect()
    assert sorted(json.loads(row["value"])["n"] for row in rows) == list(range(3000))
    per_partition: dict[int, int] = {}
    for row in rows:
        per_partition[row["partition"]] = per_partition.get(row["partition"], 0) + 1
        assert row["topic"] == topic
    assert ends == {(topic, p): count for p, count in per_partition.items()}
    # The record columns, plus the task=N/batch=ID directories read back as partition columns.
    assert set(rows[0].asDict()) == {
        "topic",
        "partition",
        "offset",
        "timestamp",
        "key",
        "value",
        "headers",
        "task",
        "batch",
    }


def test_a_sink_task_takes_its_backlog_in_one_batch_unless_its_byte_bound_cuts_it(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"sized-{unique}"
    create_topic(admin, topic, 2)
    # Two partitions of unequal length: one batch takes both whole, leaving no remainder.
    produce(broker, topic, [b"x" * 40 for _ in range(700)], partition=0)
    produce(broker, topic, [b"y" * 40 for _ in range(1100)], partition=1)
    config = {
        "connector.class": "SparkFileSink",
        "topics": topic,
        "format": "parquet",
        "value.converter": STRING_CONVERTER,
    }

    whole = factory(
        spec(f"w-{unique}", 0, {**config, "path": str(tmp_path / "whole")}, SPARK_FILE_SINK_TASK), worker
    )
    whole.start()
    outcomes = run_until_empty(whole)
    whole.stop()
    assert [o.records for o in outcomes] == [1800]

    # About 44 bytes a record (key and value): 4,400 bytes hold 100 records. The first batch is
    # planned with the sample its end-offset fetch brought, so every batch keeps to the bound.
    cut = factory(
        spec(
            f"c-{unique}",
            0,
            {**config, "path": str(tmp_path / "cut"), "batch.max.bytes": "4400"},
            SPARK_FILE_SINK_TASK,
        ),
        worker,
    )
    cut.start()
    outcomes = run_until_empty(cut)
    cut.stop()
    sizes = [o.records or 0 for o in outcomes]
    assert sum(sizes) == 1800 and len(sizes) >= 10 and max(sizes) <= 110, sizes
    values = [row["value"] for row in spark_with_sources.read.parquet(str(tmp_path / "cut")).collect()]
    assert len(values) == 1800 and sorted(set(values)) == ["x" * 40, "y" * 40]


def test_file_stream_source_resumes_from_its_position(
    factory: SparkPipelineFactory,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"lines-{unique}"
    create_topic(admin, topic, 1)
    source = tmp_path / "input.txt"
    lines = [f"line {n}" for n in range(10)]
    source.write_text("".join(line + "\n" for line in lines))
    skip = len("".join(line + "\n" for line in lines[:3]).encode())
    config = {
        "connector.class": "FileStreamSource",
        "file": str(source),
        "topic": topic,
        "batch.size": "4",
        "value.converter": STRING_CONVERTER,
    }
    partition = {"filename": str(source)}
    pipeline = factory(
        spec(f"fs-{unique}", 0, config, FILE_SOURCE_TASK, source_offsets=((partition, {"position": skip}),)),
        worker,
    )
    pipeline.start()
    outcomes = run_until_empty(pipeline)
    assert outcomes[-1].offsets == [(partition, {"position": source.stat().st_size})]
    assert sum(o.records or 0 for o in outcomes) == 7
    assert all(o.topics == {topic} for o in outcomes)
    assert [m.value().decode() for m in consume_all(broker, topic, 1)] == lines[3:]

    # Lines appended later are read from the position committed last, and only they.
    with source.open("a") as more:
        more.write("line 10\nline 11\n")
    outcomes = run_until_empty(pipeline)
    pipeline.stop()
    assert outcomes[-1].offsets == [(partition, {"position": source.stat().st_size})]
    assert [m.value().decode() for m in consume_all(broker, topic, 1)] == [*lines[3:], "line 10", "line 11"]


def test_file_stream_source_records_go_through_transforms_and_bad_ones_are_skipped(
    factory: SparkPipelineFactory,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    """A record-level source's records, converted inside Spark, are read back, transformed and
    converted again: Cast makes each line a number, a router renames the topic, and the lines Cast
    cannot read are skipped (errors.tolerance=all) while the offsets cover them."""
    topic = f"numbers-{unique}"
    create_topic(admin, f"{topic}-cast", 1)
    source = tmp_path / "numbers.txt"
    lines = [str(n) if n % 5 else f"n{n}" for n in range(1, 21)]
    source.write_text("".join(line + "\n" for line in lines))
    config = {
        "connector.class": "FileStreamSource",
        "file": str(source),
        "topic": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "transforms": "number,route",
        "transforms.number.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.number.spec": "int32",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-cast",
        "errors.tolerance": "all",
    }
    pipeline = factory(spec(f"fs-{unique}", 0, config, FILE_SOURCE_TASK), worker)
    pipeline.start()
    outcomes = run_until_empty(pipeline)
    pipeline.stop()
    assert sum(o.skipped for o in outcomes) == 4
    assert outcomes[-1].offsets == [({"filename": str(source)}, {"position": source.stat().st_size})]
    assert all(o.topics == {f"{topic}-cast"} for o in outcomes)
    written = [m.value().decode() for m in consume_all(broker, f"{topic}-cast", 1)]
    assert written == [line for line in lines if not line.startswith("n")]


def test_file_stream_sink_writes_one_line_per_record(
    factory: SparkPipelineFactory,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"out-{unique}"
    create_topic(admin, topic, 1)
    lines = [f"value {n}" for n in range(500)]
    produce(broker, topic, [line.encode() for line in lines], partition=0)
    target = tmp_path / "sink.txt"
    config = {
        "connector.class": "FileStreamSink",
        "file": str(target),
        "topics": topic,
        "value.converter": STRING_CONVERTER,
        "batch.max.records": "200",
    }
    pipeline = factory(spec(f"fsink-{unique}", 0, config, FILE_SINK_TASK), worker)
    pipeline.start()
    outcomes = run_until_empty(pipeline)
    pipeline.stop()
    assert [o.records for o in outcomes] == [200, 200, 100]
    assert outcomes[-1].offsets == [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": 500})]
    assert target.read_text().splitlines() == lines


def test_sink_with_topics_regex_picks_up_a_topic_created_later(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    first, later = f"rx-{unique}-a", f"rx-{unique}-b"
    create_topic(admin, first, 2)
    produce(broker, first, [f"a{n}".encode() for n in range(100)])
    out = tmp_path / "json"
    config = {
        "connector.class": "SparkFileSink",
        "topics.regex": f"rx-{unique}-.*",
        "path": str(out),
        "format": "json",
        "value.converter": STRING_CONVERTER,
    }
    pipeline = factory(spec(f"rx-{unique}", 0, config, SPARK_FILE_SINK_TASK), worker)
    pipeline.start()
    outcomes = run_until_empty(pipeline)
    assert [o.topics for o in outcomes] == [{first}]

    create_topic(admin, later, 1)
    produce(broker, later, [f"b{n}".encode() for n in range(50)])
    outcomes = run_until_empty(pipeline)
    pipeline.stop()
    assert [o.topics for o in outcomes] == [{later}]
    assert outcomes[0].offsets == [({"kafka_topic": later, "kafka_partition": 0}, {"kafka_offset": 50})]
    values = sorted(row["value"] for row in spark_with_sources.read.json(str(out)).collect())
    assert values == sorted([f"a{n}" for n in range(100)] + [f"b{n}" for n in range(50)])


@pytest.mark.parametrize("fmt", ["json", "csv", "orc"])
def test_spark_file_sink_formats_with_partition_by(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
    fmt: str,
) -> None:
    topic = f"fmt-{fmt}-{unique}"
    create_topic(admin, topic, 2)
    values = [json.dumps({"n": n}).encode() for n in range(500)]
    produce(broker, topic, values)
    out = tmp_path / fmt
    config = {
        "name": f"fmt-{unique}",
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": str(out),
        "format": fmt,
        "partition.by": "partition",
    }
    pipeline = factory(spec(f"fmt-{unique}", 0, config, SPARK_FILE_SINK_TASK), worker)
    pipeline.start()
    run_until_empty(pipeline)
    pipeline.stop()
    # Partitioned by the Kafka partition: one directory per partition value under each batch.
    assert {p.name for p in out.rglob("partition=*") if p.is_dir()} == {"partition=0", "partition=1"}
    reader = spark_with_sources.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true")
    rows = reader.load(str(out)).select("value").collect()
    assert sorted(json.loads(row["value"])["n"] for row in rows) == list(range(500))


def lake_of_300(
    admin: AdminClient, broker: EmbeddedBroker, topic: str, partitions: int, out: Path
) -> dict[str, str]:
    """A new topic of 300 JSON records {"n": 0..299}, and the config of a SparkFileSink connector
    named after it that writes it to ``out`` in batches of exactly 100."""
    create_topic(admin, topic, partitions)
    produce(broker, topic, [json.dumps({"n": n}).encode() for n in range(300)])
    return {
        "name": topic,
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": str(out),
        "format": "parquet",
        "batch.max.records": "100",
        # Batches of exactly 100, however slow a cold Spark server makes the first one.
        "batch.duration.ms": "600000",
    }


def test_spark_file_sink_never_writes_again_a_batch_published_but_not_committed(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"eo-{unique}"
    out = tmp_path / "lake"
    config = lake_of_300(admin, broker, topic, 1, out)
    task_spec = spec(topic, 0, config, SPARK_FILE_SINK_TASK)
    group = consumer_group(task_spec)

    first = factory(task_spec, worker)
    first.start()
    done = first.run_batch(0)
    # Committed as the runner's committer would: the group's offset moves to the batch's end.
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 100)])]
    )[group].result(timeout=30)
    first.committed(done)
    # The next batch is published, and then the executor dies before its commit.
    first.run_batch(1)
    first.stop()
    published = sorted(out.glob("task=0/batch=*"))
    assert len(published) == 2
    held = json.loads((published[-1] / "_sluiceway_offsets.json").read_text())
    assert held["ranges"] == [{"topic": topic, "partition": 0, "start": 100, "end": 200}]
    # An interrupted batch's files in staging: no reader of the lake sees them.
    leftover = out / "_staging" / "task=0" / "0000000000001-deadbeef"
    spark_with_sources.range(5).selectExpr("cast(id as string) as value").write.parquet(str(leftover))
    assert spark_with_sources.read.parquet(str(out)).count() == 200

    second = factory(task_spec, worker)
    second.start()
    assert not leftover.exists()
    outcomes = run_until_empty(second)
    second.stop()
    # The new run starts after the published batch, not at the group's offset (100).
    assert [offset for outcome in outcomes for _, offset in outcome.offsets] == [{"kafka_offset": 300}]
    rows = spark_with_sources.read.parquet(str(out)).select("value").collect()
    assert sorted(json.loads(row["value"])["n"] for row in rows) == list(range(300))


def test_spark_file_sink_writes_again_what_a_change_of_its_offsets_rewound(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"rewound-{unique}"
    out = tmp_path / "lake"
    config = lake_of_300(admin, broker, topic, 1, out)

    def under(change: str) -> TaskSpec:
        # The assignment of a sink task whose connector's offsets were last changed by `change`.
        carried = ((dict(SINK_OFFSETS_CHANGE), {"id": change, "time_ms": 1}),)
        return spec(topic, 0, config, SPARK_FILE_SINK_TASK, source_offsets=carried)

    group = consumer_group(under("x"))

    def commit(offset: int) -> None:
        admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, offset)])]
        )[group].result(timeout=30)

    def lake() -> Counter[int]:
        rows = spark_with_sources.read.parquet(str(out)).select("value").collect()
        return Counter(json.loads(row["value"])["n"] for row in rows)

    # Under change "x": batch 0 is committed, batch 1 published and then the executor dies.
    first = factory(under("x"), worker)
    first.start()
    done = first.run_batch(0)
    commit(100)
    first.committed(done)
    first.run_batch(1)
    first.stop()
    # Started again under the same change: batch 1 is still taken for one never committed.
    second = factory(under("x"), worker)
    second.start()
    outcomes = run_until_empty(second)
    second.stop()
    assert [offset for outcome in outcomes for _, offset in outcome.offsets] == [{"kafka_offset": 300}]
    commit(300)
    assert lake() == Counter(range(300))

    # A change rewinds the group to 200, the start of the newest batch: written again.
    commit(200)
    third = factory(under("y"), worker)
    third.start()
    outcomes = run_until_empty(third)
    third.stop()
    assert [offset for outcome in outcomes for _, offset in outcome.offsets] == [{"kafka_offset": 300}]
    assert lake() == Counter([*range(300), *range(200, 300)])


def test_a_sink_batch_planned_ahead_starts_where_the_batch_before_ended(
    factory: SparkPipelineFactory,
    spark_with_sources: SparkSession,
    worker: dict[str, str],
    admin: AdminClient,
    broker: EmbeddedBroker,
    unique: str,
    tmp_path: Path,
) -> None:
    topic = f"ahead-{unique}"
    out = tmp_path / "lake"
    config = lake_of_300(admin, broker, topic, 2, out)
    pipeline = factory(spec(topic, 0, config, SPARK_FILE_SINK_TASK), worker)
    assert isinstance(pipeline, PlansAhead)
    pipeline.start()
    outcomes = [pipeline.run_batch(0)]
    # Each next batch is planned from the ends of the one before, whose commit (never made to
    # Kafka here) the runner would be waiting for meanwhile.
    for batch_id in range(1, 4):
        pipeline.plan_ahead(outcomes[-1])
        pipeline.committed(outcomes[-1])
        outcomes.append(pipeline.run_batch(batch_id))
        assert "plan_ahead" in outcomes[-1].steps and "plan" not in outcomes[-1].steps
    pipeline.stop()
    assert [o.records for o in outcomes] == [100, 100, 100, 0]
    rows = spark_with_sources.read.parquet(str(out)).select("value").collect()
    assert sorted(json.loads(row["value"])["n"] for row in rows) == list(range(300))


def test_a_batch_is_published_by_a_spark_worker_when_the_executor_cannot_see_it(
    spark_with_sources: SparkSession, tmp_path: Path
) -> None:
    root = f"file://{tmp_path / 'lake'}"
    key = batch_key(1_700_000_000_000)
    staging = staging_dir(root, 0, key)
    spark_with_sources.range(3).write.parquet(staging)
    held = OffsetRange("t", 0, 10, 13)
    publish(spark_with_sources, staging, batch_dir(root, 0, key), manifest(0, key, [held]), here=False)
    published = tmp_path / "lake" / "task=0" / f"batch={key}"
    assert (published / "_sluiceway_offsets.json").is_file()
    assert not (tmp_path / "lake" / "_staging" / "task=0" / key).exists()
    assert newest_written(spark_with_sources, root, 0, here=False) == {ConnectTopicPartition("t", 0): held}
    # Written before a change of the offsets that the task now starts with: not counted.
    assert newest_written(spark_with_sources, root, 0, "later", here=False) == {}
    assert spark_with_sources.read.parquet(root).count() == 3


def test_a_task_start_reads_the_lake_itself_only_when_spark_finds_its_probe(
    spark_with_sources: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    root = str(lake)
    key = batch_key(1_700_000_000_000)
    staging = staging_dir(root, 1, key)
    spark_with_sources.range(3).write.parquet(staging)
    held = OffsetRange("t", 0, 10, 13)
    publish(spark_with_sources, staging, batch_dir(root, 1, key), manifest(1, key, [held]))

    # Spark's driver finds the probe file: the executor reads the lake itself, and the probe goes
    # with the rest of the task's staging directory.
    assert lake_commits._seen_by_spark(spark_with_sources, root, 2) == (root, [f"{root}/_staging/task=2"])
    assert [p.name[:7] for p in (lake / "_staging" / "task=2").iterdir()] == ["_probe-"]
    (lake / "_staging" / "task=2" / "0000000000001-deadbeef").mkdir()
    assert newest_written(spark_with_sources, root, 2) == {ConnectTopicPartition("t", 0): held}
    assert not (lake / "_staging" / "task=2").exists()
    # A lake not written yet: the directories made for the probe do not stay (Spark makes them,
    # as its own user, when it writes the first batch).
    fresh = tmp_path / "fresh" / "lake"
    assert newest_written(spark_with_sources, str(fresh), 0) == {}
    assert not (tmp_path / "fresh").exists()

    # An executor that sees another directory under that path: Spark finds no probe, so the
    # executor leaves nothing there and a Spark worker reads the lake.
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setattr(lake_commits, "_local_path", lambda location: str(elsewhere))
    assert lake_commits._seen_by_spark(spark_with_sources, root, 2) is None
    assert not elsewhere.exists()
    assert newest_written(spark_with_sources, root, 2) == {ConnectTopicPartition("t", 0): held}
