"""Pipeline logic that needs neither Kafka nor Spark: the DataGen batch sizing, the record-level
task adapters as Spark's Python workers run them (called here directly), and offset bookkeeping."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row

from sluiceway.connect import BatchContext, ConnectException, MemoryOffsetStorageReader, OffsetRange
from sluiceway.connect.batch_config import BATCH_MAX_RECORDS_CONFIG, DEFAULT_BATCH_MAX_RECORDS
from sluiceway.connect.framework_config import common_config_def
from sluiceway_executor.connectors.datagen import (
    DataGenBatchTask,
    DataGenSourceConnector,
    config_def,
)
from sluiceway_executor.datasources.source_task import SourceTaskOptions, converter_settings, poll_source_task
from sluiceway_executor.kafka_ranges import PartitionRange
from sluiceway_executor.pipelines.loading import load_task_class
from sluiceway_executor.pipelines.record_tasks import SinkTaskWriter
from sluiceway_executor.pipelines.sink import consumer_group, resume_offset, sink_offsets
from sluiceway_executor.pipelines.source import last_offsets
from sluiceway_executor.pipelines.spec import TaskSpec, batch_limits

STRING = "org.apache.kafka.connect.storage.StringConverter"


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def datagen(props: dict[str, str] | None = None, clock: Clock | None = None) -> DataGenBatchTask:
    task = DataGenBatchTask(clock=clock or Clock())
    task.start({"topic": "gen", "task.id": "1", **(props or {})})
    return task


def test_datagen_batches_are_capped_by_the_batch_limit_and_max_records() -> None:
    task = datagen({"max.records": "250"})
    assert [task.next_count(seq, 100) for seq in (0, 100, 200, 250, 300)] == [100, 100, 50, 0, 0]
    assert datagen().next_count(10**9) == DEFAULT_BATCH_MAX_RECORDS  # no limit given, no end


def test_datagen_batches_follow_the_rate_allowance() -> None:
    clock = Clock()
    task = datagen({"records.per.sec": "1000"}, clock)
    assert task.next_count(0, 600) == 1  # one record at once, as the record-level task
    assert task.next_count(1, 600) == 0
    clock.now += 0.25
    assert task.next_count(1, 600) == 250
    clock.now += 10  # a long pause allows one batch, not ten seconds' worth
    assert task.next_count(251, 600) == 600


def test_datagen_batch_task_ends_with_no_data_once_max_records_are_committed() -> None:
    task = datagen({"max.records": "5"})
    reader = MemoryOffsetStorageReader([({"task": 1}, {"seq": 4})])
    context = BatchContext("c", 1, 0, max_records=100)
    batch = task.read_batch(None, reader, context)  # type: ignore[arg-type]  # no Spark job when done
    assert batch.data is None and batch.offsets == []


def test_datagen_runs_the_batch_task_and_every_connector_documents_the_batch_bounds() -> None:
    assert DataGenSourceConnector().task_class() is DataGenBatchTask
    own = config_def().keys()
    assert BATCH_MAX_RECORDS_CONFIG not in own  # one home: the common keys
    keys = common_config_def().keys()
    for name in ("batch.max.records", "batch.max.bytes", "batch.duration.ms"):
        assert name in keys and "batch" in keys[name].documentation
    assert keys[BATCH_MAX_RECORDS_CONFIG].default == 1_000_000


def test_batch_bound_settings() -> None:
    limits = batch_limits({})
    assert (limits.max_records, limits.max_bytes, limits.duration_ms) == (1_000_000, 256 << 20, 5000)
    limits = batch_limits({"batch.max.records": " 500 ", "batch.duration.ms": "", "batch.max.bytes": "64"})
    assert (limits.max_records, limits.max_bytes, limits.duration_ms) == (500, 64, 5000)
    with pytest.raises(ConnectException, match=r"batch\.max\.records"):
        batch_limits({"batch.max.records": "0"})
    with pytest.raises(ConnectException, match=r"batch\.duration\.ms"):
        batch_limits({"batch.duration.ms": "soon"})


def spec(config: dict[str, str], task_config: dict[str, str] | None = None) -> TaskSpec:
    return TaskSpec(
        name="connectors/c/tasks/0",
        connector="c",
        task_index=0,
        generation=1,
        connector_config=config,
        task_config=task_config or {},
        paused=False,
        task_count=1,
    )


def test_task_classes_resolve_from_the_task_config_or_the_plugin() -> None:
    _, cls = load_task_class(
        spec(
            {"connector.class": "FileStreamSink"},
            {"task.class": "sluiceway_executor.connectors.filestream.FileStreamSinkTask"},
        )
    )
    assert cls.__name__ == "FileStreamSinkTask"
    plugin_type, cls = load_task_class(spec({"connector.class": "DataGenSource"}))
    assert (plugin_type.value, cls) == ("source", DataGenBatchTask)
    with pytest.raises(ConnectException, match="cannot load the task class"):
        load_task_class(spec({"connector.class": "DataGenSource"}, {"task.class": "nowhere.Nothing"}))


def test_sink_bookkeeping() -> None:
    assert consumer_group(spec({})) == "connect-c"
    assert consumer_group(spec({"consumer.override.group.id": "mine"})) == "mine"
    assert sink_offsets([PartitionRange("t", 2, 5, 9)]) == [
        ({"kafka_topic": "t", "kafka_partition": 2}, {"kafka_offset": 9})
    ]


def test_last_offsets_take_each_partitions_last_record_across_topics() -> None:
    rows = [
        Row(source_partition='{"f":"a"}', topic="t1", last_offset='{"p":10}', last_seq=4, records=3),
        Row(source_partition='{"f":"a"}', topic="t2", last_offset='{"p":12}', last_seq=6, records=2),
        Row(source_partition='{"f":"b"}', topic="t1", last_offset='{"p":3}', last_seq=5, records=1),
    ]
    offsets, topics, count = last_offsets(rows)
    assert offsets == [({"f": "b"}, {"p": 3}), ({"f": "a"}, {"p": 12})]
    assert topics == {"t1", "t2"} and count == 6
    assert last_offsets([]) == ([], frozenset(), 0)
    # A record without a topic goes to the connector's topic.
    untitled = [Row(source_partition='{"f":"a"}', topic=None, last_offset='{"p":1}', last_seq=0, records=1)]
    assert last_offsets(untitled, "fallback")[1] == {"fallback"}
    assert last_offsets(untitled)[1] == frozenset()


def test_only_converter_settings_travel_to_spark() -> None:
    config = {
        "value.converter": STRING,
        "value.converter.encoding": "latin-1",
        "key.converter": STRING,
        "connection.password": "secret",
    }
    assert converter_settings(config) == {
        "value.converter": STRING,
        "value.converter.encoding": "latin-1",
        "key.converter": STRING,
    }


def source_options(path: Path, **overrides: Any) -> SourceTaskOptions:
    values: dict[str, Any] = {
        "task_class": "sluiceway_executor.connectors.filestream.FileStreamSourceTask",
        "task_config": {"file": str(path), "topic": "lines", "batch.size": "3"},
        "offsets": [],
        "max_records": 100,
        "poll_window_ms": 300,
        "connector_converters": {"value.converter": STRING},
        "worker_converters": {},
    }
    values.update(overrides)
    return SourceTaskOptions(**values)


def test_record_source_polls_from_the_offsets_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("a\nbb\nccc\ndddd\ne\n")
    options = SourceTaskOptions.parse(
        source_options(path, offsets=[({"filename": str(path)}, {"position": 2})]).to_options()
    )
    rows = list(poll_source_task(options))
    assert [row[5] for row in rows] == [b"bb", b"ccc", b"dddd", b"e"]
    assert [row[0] for row in rows] == ["lines"] * 4
    assert [json.loads(row[7]) for row in rows] == [
        {"position": 5},
        {"position": 9},
        {"position": 14},
        {"position": 16},
    ]
    assert {json.loads(row[6])["filename"] for row in rows} == {str(path)}
    assert [row[8] for row in rows] == [0, 1, 2, 3]


def test_record_source_stops_at_the_batch_limit(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"{n}\n" for n in range(20)))
    rows = list(poll_source_task(source_options(path, max_records=5)))
    assert [row[5] for row in rows] == [b"0", b"1", b"2", b"3", b"4"]
    assert json.loads(rows[-1][7]) == {"position": 10}


def test_record_source_with_json_converter_and_no_file_yet(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    assert list(poll_source_task(source_options(path, connector_converters={}))) == []
    path.write_text("x\n")
    (row,) = poll_source_task(source_options(path, connector_converters={}))
    # The worker default for values is JSON without the envelope: a string becomes a JSON string.
    assert row[5] == b'"x"'


def kafka_batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    header = pa.struct([("key", pa.string()), ("value", pa.binary())])
    return pa.RecordBatch.from_pylist(
        rows,
        schema=pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
                ("key", pa.binary()),
                ("value", pa.binary()),
                ("headers", pa.list_(header)),
            ]
        ),
    )


def test_record_sink_runs_the_task_over_every_batch(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    writer = SinkTaskWriter(
        task_class="sluiceway_executor.connectors.filestream.FileStreamSinkTask",
        task_config={"file": str(target)},
        connector_converters={"value.converter": STRING},
        worker_converters={},
    )
    when = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batches = [
        kafka_batch(
            [
                {"topic": "t", "partition": p, "offset": o, "timestamp": when, "key": None, "value": v}
                for p, o, v in chunk
            ]
        )
        for chunk in ([(0, 0, b"one"), (0, 1, b"two")], [(1, 7, b"three")], [])
    ]
    (result,) = writer(iter(batches))
    assert result.to_pylist() == [{"records": 3}]
    assert target.read_text() == "one\ntwo\nthree\n"


def test_record_sink_refuses_a_source_task() -> None:
    writer = SinkTaskWriter(
        task_class="sluiceway_executor.connectors.filestream.FileStreamSourceTask",
        task_config={},
        connector_converters={},
        worker_converters={},
    )
    with pytest.raises(ConnectException, match="is not a SinkTask"):
        list(writer(iter([])))


def test_a_partition_resumes_past_a_batch_written_but_not_committed() -> None:
    written = OffsetRange("t", 0, 100, 150)
    # The batch [100, 150) was published while the group stayed at 100: skip it.
    assert resume_offset(100, written, 0) == 150
    # Its commit happened: the group is already past it.
    assert resume_offset(150, written, 0) == 150
    # The group was moved on purpose (reset or alter): the group wins, before or after the batch.
    assert resume_offset(40, written, 0) == 40
    assert resume_offset(120, written, 0) == 120
    assert resume_offset(400, written, 0) == 400
    # Nothing committed: skip only a first batch that started at the earliest offset.
    assert resume_offset(None, OffsetRange("t", 0, 0, 50), 0) == 50
    assert resume_offset(None, written, 0) is None
    # Nothing written, or an empty range: the committed offset.
    assert resume_offset(7, None, 0) == 7
    assert resume_offset(100, OffsetRange("t", 0, 100, 100), 0) == 100
