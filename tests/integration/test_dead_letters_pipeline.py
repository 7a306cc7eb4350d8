"""errors.tolerance and the dead-letter queue in a real sink pipeline (SparkFileSink on the session's
Spark Connect, the session's broker, the task's own transactional committer): the records a
converter or transform fails on go to the dead-letter topic with Kafka Connect's context headers,
in the commit's transaction, and the others to the lake; a batch published before its commit was
lost has its dead letters written by the next run; with errors.tolerance=none the batch fails
naming the first bad record. A source skips the records its converter fails on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pyspark.sql import SparkSession

from sluiceway.connect import ConnectException
from sluiceway_executor.offset_commits import CommitStatus, KafkaOffsetCommitter
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_executor.pipelines.pipeline import Pipeline
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import EmbeddedBroker
from tests.integration.api_helpers import read_topic
from tests.integration.dead_letter_helpers import produce_orders, read_dead_letters
from tests.integration.pipeline_helpers import task_spec

pytestmark = pytest.mark.integration

RECORDS = 120
TIMEOUT = 30.0
SINK_TASK = "sluiceway_executor.connectors.spark_file.SparkFileSinkTask"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


@pytest.fixture
def opened() -> Iterator[list[Pipeline | KafkaOffsetCommitter]]:
    """Pipelines and committers a test started; stopped and closed afterwards."""
    items: list[Pipeline | KafkaOffsetCommitter] = []
    yield items
    for item in items:
        if isinstance(item, KafkaOffsetCommitter):
            item.close()
        else:
            item.stop()


def _spec(unique: str, topic: str, lake: Path, **extra: str) -> TaskSpec:
    config = {
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": str(lake),
        "format": "parquet",
        "key.converter": "StringConverter",
        "value.converter": JSON_CONVERTER,
        "value.converter.schemas.enable": "true",
        "transforms": "numbers",
        "transforms.numbers.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.numbers.spec": "name:int32",
        **extra,
    }
    return task_spec(f"lake-{unique}", config, SINK_TASK)


def _tolerant(dlq: str) -> dict[str, str]:
    return {
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }


def _topic(broker: EmbeddedBroker, name: str) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
    return name


def _start(
    opened: list[Pipeline | KafkaOffsetCommitter], spark: SparkSession, spec: TaskSpec, worker: dict[str, str]
) -> Pipeline:
    pipeline = SparkPipelineFactory(spark)(spec, worker)
    opened.append(pipeline)
    pipeline.start()
    return pipeline


def _lake_ids(spark: SparkSession, lake: Path) -> list[int]:
    # The lake writes a typed value's fields as columns of their own.
    return sorted(row["id"] for row in spark.read.parquet(str(lake)).select("id").collect())


def test_failed_records_go_to_the_dead_letter_queue_with_the_commit(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    topic, dlq = _topic(broker, f"dl-{unique}"), f"dl-{unique}-dlq"
    produced = produce_orders(broker.bootstrap_servers, topic, RECORDS, bad_every=10, bad_at=3)
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    spec = _spec(unique, topic, tmp_path / "lake", **_tolerant(dlq))
    pipeline = _start(opened, spark_with_sources, spec, worker)

    outcome = pipeline.run_batch(0)
    assert outcome.records == RECORDS
    assert outcome.skipped == len(produced.bad) == 12
    assert outcome.offsets == [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": RECORDS})]
    # The lake holds the others, transformed; the dead letters are not written yet.
    assert _lake_ids(spark_with_sources, tmp_path / "lake") == sorted(produced.good)
    assert read_dead_letters(broker.bootstrap_servers, dlq) == []

    committer = KafkaOffsetCommitter(spec, worker, source=False)
    opened.append(committer)
    committer.open(TIMEOUT)
    assert committer.commit(outcome.offsets, TIMEOUT, outcome.dead_letters).status is CommitStatus.OK

    letters = read_dead_letters(broker.bootstrap_servers, dlq)
    assert sorted(int(letter.headers["__connect.errors.offset"] or b"") for letter in letters) == sorted(
        produced.bad
    )
    for letter in letters:
        offset = int(letter.headers["__connect.errors.offset"] or b"")
        # The record as it was read (key, value, its own header), then the context headers.
        assert letter.key == str(offset).encode()
        assert letter.headers["origin"] == b"test"
        assert letter.headers["__connect.errors.topic"] == topic.encode()
        assert letter.headers["__connect.errors.partition"] == b"0"
        assert letter.headers["__connect.errors.connector.name"] == f"lake-{unique}".encode()
        assert letter.headers["__connect.errors.task.id"] == b"0"
        assert letter.headers["__connect.errors.exception.class.name"] == b"sluiceway.connect.DataException"
        message = (letter.headers["__connect.errors.exception.message"] or b"").decode()
        assert produced.bad[offset] in message, (offset, message)
        stage = letter.headers["__connect.errors.stage"]
        if "int32" in message:
            assert stage == b"TRANSFORMATION"
            assert letter.headers["__connect.errors.class.name"] == (
                b"sluiceway_executor.transforms.shape_transforms.CastValue"
            )
        else:
            assert stage == b"VALUE_CONVERTER"
            assert (
                letter.headers["__connect.errors.class.name"]
                == b"org.apache.kafka.connect.json.JsonConverter"
            )


def test_a_batch_published_before_its_commit_was_lost_has_its_dead_letters_written_next(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    topic, dlq = _topic(broker, f"dl-{unique}"), f"dl-{unique}-dlq"
    produced = produce_orders(broker.bootstrap_servers, topic, RECORDS, bad_every=20, bad_at=5)
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    spec = _spec(unique, topic, tmp_path / "lake", **_tolerant(dlq))
    first = _start(opened, spark_with_sources, spec, worker)
    lost = first.run_batch(0)
    assert lost.skipped == len(produced.bad) == 6
    first.stop()  # and never committed: the executor died after the lake published the batch

    again = _start(opened, spark_with_sources, spec, worker)
    outcome = again.run_batch(0)
    # Nothing new to write: the lake holds the batch already, so it is not written twice...
    assert outcome.records == 0
    assert _lake_ids(spark_with_sources, tmp_path / "lake") == sorted(produced.good)
    # ...but its failed records go with this commit, and so does its end offset.
    assert outcome.offsets == [({"kafka_topic": topic, "kafka_partition": 0}, {"kafka_offset": RECORDS})]
    assert sorted(record.key or b"" for record in outcome.dead_letters) == sorted(
        str(offset).encode() for offset in produced.bad
    )
    committer = KafkaOffsetCommitter(spec, worker, source=False)
    opened.append(committer)
    committer.open(TIMEOUT)
    assert committer.commit(outcome.offsets, TIMEOUT, outcome.dead_letters).status is CommitStatus.OK
    assert len(read_dead_letters(broker.bootstrap_servers, dlq)) == len(produced.bad)


def test_without_tolerance_the_batch_fails_naming_the_first_bad_record(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    topic = _topic(broker, f"dl-{unique}")
    produce_orders(broker.bootstrap_servers, topic, 60, bad_every=25, bad_at=17)
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    pipeline = _start(opened, spark_with_sources, _spec(unique, topic, tmp_path / "lake"), worker)
    with pytest.raises(ConnectException) as failed:
        pipeline.run_batch(0)
    message = str(failed.value)
    assert message.startswith(f"record {topic}-0@17 failed at stage VALUE_CONVERTER")
    assert "invalid JSON" in message and "errors.tolerance=all" in message
    # Nothing reached the lake.
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").glob("task=*/batch=*"))


def test_records_a_sql_expression_raises_on_are_found_by_halves_and_dead_lettered(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    """A Sql expression that raises fails the whole job (Spark has no per-row try): the batch is
    then checked by halves, and the records that fail alone are dead-lettered beside those a
    converter marked; without tolerance the task names the first of them."""
    topic, dlq = _topic(broker, f"dl-{unique}"), f"dl-{unique}-dlq"
    produced = produce_orders(broker.bootstrap_servers, topic, 40, bad_every=10, bad_at=9)
    unlucky = [offset for offset in produced.good if offset % 20 == 7]
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    chain = {
        "transforms": "numbers,unlucky",
        "transforms.unlucky.type": "Sql",
        "transforms.unlucky.select": (
            "CASE WHEN value.id % 20 = 7 THEN raise_error(concat('unlucky ', value.id)) "
            "ELSE value END AS value"
        ),
    }
    spec = _spec(unique, topic, tmp_path / "lake", **_tolerant(dlq), **chain)
    outcome = _start(opened, spark_with_sources, spec, worker).run_batch(0)
    assert outcome.records == 40
    assert outcome.skipped == len(produced.bad) + len(unlucky) == 4 + 2
    assert _lake_ids(spark_with_sources, tmp_path / "lake") == sorted(set(produced.good) - set(unlucky))
    letters = {int(r.key or b""): r for r in outcome.dead_letters}
    assert sorted(letters) == sorted([*produced.bad, *unlucky])
    for offset in unlucky:
        headers = dict(letters[offset].headers)
        assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
        assert headers["__connect.errors.class.name"] == b"sluiceway_executor.transforms.sql_transform.Sql"
        assert f"unlucky {offset}".encode() in (headers["__connect.errors.exception.message"] or b"")

    strict = _start(
        opened, spark_with_sources, _spec(f"{unique}-strict", topic, tmp_path / "strict", **chain), worker
    )
    with pytest.raises(ConnectException) as failed:
        strict.run_batch(0)
    assert str(failed.value).startswith(f"record {topic}-0@7 failed at stage TRANSFORMATION")
    assert "unlucky 7" in str(failed.value)


def test_a_record_level_sink_gets_transformed_records_and_its_bad_ones_are_dead_lettered(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    """FileStreamSink (a SinkTask, fed record by record inside Spark) behind the same conversion,
    transforms and dead-letter queue as a DataFrame-level sink."""
    topic, dlq, out = _topic(broker, f"dl-{unique}"), f"dl-{unique}-dlq", tmp_path / "out.txt"
    produced = produce_orders(broker.bootstrap_servers, topic, RECORDS, bad_every=10, bad_at=3)
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    spec = _spec(unique, topic, tmp_path / "unused", **_tolerant(dlq))
    config = {**spec.connector_config, "connector.class": "FileStreamSink", "file": str(out)}
    file_task = "sluiceway_executor.connectors.filestream.FileStreamSinkTask"
    pipeline = _start(opened, spark_with_sources, task_spec(f"lake-{unique}", config, file_task), worker)

    outcome = pipeline.run_batch(0)
    assert outcome.records == RECORDS and outcome.skipped == len(produced.bad) == 12
    # Each good record once, in offset order, as the task renders the transformed value (the name
    # cast to a number).
    assert out.read_text().splitlines() == [
        json.dumps({"id": offset, "name": offset}, separators=(",", ":")) for offset in sorted(produced.good)
    ]
    assert sorted(record.key or b"" for record in outcome.dead_letters) == sorted(
        str(offset).encode() for offset in produced.bad
    )


def test_a_source_skips_the_records_a_sql_expression_raises_on(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    topic = f"src-{unique}"
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    spec = _source_spec(unique, topic, "all")
    config = {
        **spec.connector_config,
        # Besides the five texts the converter cannot write, two records the expression raises on.
        "transforms": "spoil,unlucky",
        "transforms.unlucky.type": "Sql",
        "transforms.unlucky.where": (
            "coalesce(get_json_object(value, '$.seq') % 25, 0) != 4 OR raise_error('unlucky') IS NULL"
        ),
    }
    pipeline = _start(
        opened, spark_with_sources, task_spec(spec.connector, config, spec.task_config["task.class"]), worker
    )
    outcome = pipeline.run_batch(0)
    assert outcome.skipped == 7
    assert outcome.offsets == [({"task": 0}, {"seq": 49})]
    written = read_topic(broker.bootstrap_servers, topic)
    kept = [seq for seq in range(50) if seq % 10 != 3 and seq % 25 != 4]
    assert sorted(value["seq"] for _, value in written) == kept


def _source_spec(unique: str, topic: str, tolerance: str) -> TaskSpec:
    config = {
        "connector.class": "DataGenSource",
        "topic": topic,
        "max.records": "50",
        "value.converter": JSON_CONVERTER,
        "value.converter.schemas.enable": "false",
        # Every tenth record's value becomes text that is no JSON, which the converter cannot write.
        "transforms": "spoil",
        "transforms.spoil.type": "Sql",
        "transforms.spoil.select": (
            "CASE WHEN get_json_object(value, '$.seq') % 10 = 3 THEN 'not json' ELSE value END AS value"
        ),
        "errors.tolerance": tolerance,
        "errors.log.enable": "true",
    }
    return task_spec(f"gen-{unique}", config, "sluiceway_executor.connectors.datagen.DataGenBatchTask")


def test_a_source_skips_the_records_its_converter_fails_on(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    unique: str,
    opened: list[Pipeline | KafkaOffsetCommitter],
) -> None:
    topic = f"src-{unique}"
    worker = {"bootstrap.servers": broker.bootstrap_servers, "group.id": f"cluster-{unique}"}
    pipeline = _start(opened, spark_with_sources, _source_spec(unique, topic, "all"), worker)
    outcome = pipeline.run_batch(0)
    # The batch's offsets cover every record generated; the five bad ones were skipped, not written.
    assert outcome.skipped == 5
    assert outcome.offsets == [({"task": 0}, {"seq": 49})]
    written = read_topic(broker.bootstrap_servers, topic)
    assert sorted(value["seq"] for _, value in written) == [seq for seq in range(50) if seq % 10 != 3]

    strict = _start(
        opened, spark_with_sources, _source_spec(f"{unique}-strict", f"{topic}-strict", "none"), worker
    )
    with pytest.raises(Exception, match="invalid JSON"):
        strict.run_batch(0)
