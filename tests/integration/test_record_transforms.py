"""Record-level transforms (a RecordTransformation plugin from plugin.path, run per record inside
Spark with mapInArrow) on the session's Spark Connect: in a chain with Kafka's transforms, under a
predicate, with records dropped, and through a real sink pipeline on the session's broker, where a
record the plugin raises on fails the batch naming it (errors.tolerance=none) or goes to the
dead-letter queue with the plugin's exception in its headers (all), and a RetriableException is
tried again under errors.retry.timeout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from sluiceway.connect import ConnectException
from sluiceway.connect.data import INT64_SCHEMA, STRING_SCHEMA, struct_schema
from sluiceway.connect.data.spark import from_spark_field
from sluiceway_executor.converters.connect_spark_json import column_field
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_executor.pipelines.pipeline import Pipeline
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_executor.transforms.chain import TransformChain
from sluiceway_server.embedded import EmbeddedBroker
from tests.conftest import TEST_PLUGINS
from tests.integration.dead_letter_helpers import produce_orders, read_dead_letters
from tests.integration.pipeline_helpers import task_spec
from tests.plugins.record_transforms import fingerprint

pytestmark = pytest.mark.integration

PLUGIN = "record_transforms.Fingerprint"
PERSON = struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA}, name="person")
HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
SINK_TASK = "sluiceway_executor.connectors.spark_file.SparkFileSinkTask"
TIMEOUT = 30.0


def _batch(spark: SparkSession, typed: bool) -> DataFrame:
    value_field = column_field("value", PERSON) if typed else StructField("value", StringType())
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("key", StringType()),
            value_field,
            StructField("headers", ArrayType(HEADER)),
        ]
    )

    def value(i: int, name: str) -> Any:
        return Row(id=i, name=name) if typed else json.dumps({"id": i, "name": name})

    rows = [
        ("people", 0, 0, "k0", value(0, "ada"), [Row(key="trace", value=b"t0")]),
        ("people", 0, 1, "k1", value(1, "bob"), []),
        ("people", 0, 2, "k2", value(2, "eve"), [Row(key="trace", value=b"t2")]),
        ("people", 0, 3, "k3", None, None),
    ]
    return spark.createDataFrame(rows, schema)


def _chain(**keys: str) -> TransformChain:
    props = {
        "transforms": "upper,fp",
        "transforms.upper.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.upper.static.field": "origin",
        "transforms.upper.static.value": "test",
        "transforms.fp.type": PLUGIN,
        **{f"transforms.fp.{k.replace('_', '.')}": v for k, v in keys.items()},
    }
    return TransformChain.from_config(props, built_in_plugins([str(TEST_PLUGINS)]))


def test_a_record_level_plugin_runs_after_kafkas_transforms_on_typed_values(spark: SparkSession) -> None:
    out = _chain(drop="bob").apply(_batch(spark, typed=True), is_sink=True)
    rows = sorted(out.collect(), key=lambda r: r["offset"])
    # bob dropped; the others fingerprinted after InsertField; the tombstone passed through.
    assert [r["offset"] for r in rows] == [0, 2, 3]
    assert [(r["value"].name, r["value"].origin, r["value"].fingerprint) for r in rows[:2]] == [
        ("ada", "test", fingerprint("ada")),
        ("eve", "test", fingerprint("eve")),
    ]
    assert rows[2]["value"] is None
    assert [(h.key, bytes(h.value)) for h in rows[0]["headers"]] == [
        ("trace", b"t0"),
        ("fingerprinted", b"yes"),
    ]
    # The declared schema travels with the column.
    assert [f.name for f in from_spark_field(out.schema["value"]).fields] == [
        "id",
        "name",
        "origin",
        "fingerprint",
    ]


def test_a_record_level_plugin_under_a_predicate_on_schemaless_values(spark: SparkSession) -> None:
    props = {
        "predicates": "traced",
        "predicates.traced.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.traced.name": "trace",
        "transforms": "fp",
        "transforms.fp.type": PLUGIN,
        "transforms.fp.predicate": "traced",
    }
    chain = TransformChain.from_config(props, built_in_plugins([str(TEST_PLUGINS)]))
    rows = sorted(chain.apply(_batch(spark, typed=False), is_sink=True).collect(), key=lambda r: r["offset"])
    values = [None if r["value"] is None else json.loads(r["value"]) for r in rows]
    assert [v and v.get("fingerprint") for v in values] == [
        fingerprint("ada"),
        None,
        fingerprint("eve"),
        None,
    ]
    # A schema change under a predicate cannot be held in one column: refused before any job.
    with pytest.raises(ConnectException, match="changes the record value's schema"):
        chain.apply(_batch(spark, typed=True), is_sink=True)


@pytest.fixture
def opened() -> Iterator[list[Pipeline]]:
    pipelines: list[Pipeline] = []
    yield pipelines
    for pipeline in pipelines:
        pipeline.stop()


def _run(
    spark: SparkSession, broker: EmbeddedBroker, unique: str, lake: Path, opened: list[Pipeline], **extra: str
) -> Any:
    """One batch of a lake sink over the 40 records of ``dl-{unique}`` with the plugin in its chain."""
    config = {
        "connector.class": "SparkFileSink",
        "topics": f"dl-{unique}",
        "path": str(lake),
        "format": "parquet",
        "key.converter": "StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "fp",
        "transforms.fp.type": PLUGIN,
        **extra,
    }
    worker = {
        "bootstrap.servers": broker.bootstrap_servers,
        "group.id": f"cluster-{unique}",
        "plugin.path": str(TEST_PLUGINS),
    }
    pipeline = SparkPipelineFactory(spark)(task_spec(f"lake-{unique}", config, SINK_TASK), worker)
    opened.append(pipeline)
    pipeline.start()
    return pipeline.run_batch(0)


def _records(broker: EmbeddedBroker, unique: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(f"dl-{unique}", 1, 1)])[f"dl-{unique}"].result(TIMEOUT)
    # Names are the offsets' text (dead_letter_helpers); every 1000th would be bad, so none is here.
    produce_orders(broker.bootstrap_servers, f"dl-{unique}", 40, bad_every=1000, bad_at=999)


def test_without_tolerance_a_record_the_plugin_rejects_fails_the_batch_naming_it(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline],
) -> None:
    _records(broker, unique)
    with pytest.raises(ConnectException) as caught:
        _run(
            spark_with_sources, broker, unique, tmp_path / "lake", opened, **{"transforms.fp.reject": "17,30"}
        )
    message = str(caught.value)
    assert (
        f"dl-{unique}-0@17" in message
        and "TRANSFORMATION" in message
        and "the name 17 is rejected" in message
    )


def test_with_tolerance_rejected_records_are_dead_lettered_and_retriable_ones_retried(
    spark_with_sources: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    unique: str,
    opened: list[Pipeline],
) -> None:
    _records(broker, unique)
    dlq, tries = f"dl-{unique}-dlq", tmp_path / "tries"
    tries.mkdir()
    outcome = _run(
        spark_with_sources,
        broker,
        unique,
        tmp_path / "lake",
        opened,
        **{
            "transforms.fp.reject": "17,30",
            "transforms.fp.drop": "5",
            # 3 fails twice and then works, inside the retry timeout.
            "transforms.fp.flaky": "3",
            "transforms.fp.flaky.tries": "2",
            "transforms.fp.flaky.dir": str(tries),
            "errors.retry.timeout": "2000",
            "errors.retry.delay.max.ms": "50",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    assert (tries / "3.tries").read_text() == "3"
    rows = spark_with_sources.read.parquet(str(tmp_path / "lake")).select("id", "fingerprint").collect()
    assert sorted(r["id"] for r in rows) == [i for i in range(40) if i not in (5, 17, 30)]
    assert all(r["fingerprint"] == fingerprint(str(r["id"])) for r in rows)
    assert sorted(int(r.key or b"") for r in outcome.dead_letters) == [17, 30]
    from sluiceway_executor.offset_commits import CommitStatus, KafkaOffsetCommitter

    spec = task_spec(f"lake-{unique}", {"errors.deadletterqueue.topic.name": dlq}, SINK_TASK)
    committer = KafkaOffsetCommitter(spec, {"bootstrap.servers": broker.bootstrap_servers}, source=False)
    try:
        committer.open(TIMEOUT)
        assert committer.commit(outcome.offsets, TIMEOUT, outcome.dead_letters).status is CommitStatus.OK
    finally:
        committer.close()
    letters = read_dead_letters(broker.bootstrap_servers, dlq)
    assert len(letters) == 2
    for letter in letters:
        assert letter.headers["__connect.errors.stage"] == b"TRANSFORMATION"
        assert letter.headers["__connect.errors.class.name"] == b"record_transforms.Fingerprint"
        assert letter.headers["__connect.errors.exception.class.name"] == b"sluiceway.connect.DataException"
        assert b"is rejected" in (letter.headers["__connect.errors.exception.message"] or b"")
