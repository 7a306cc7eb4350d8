"""DataGenSource: record format, gap-free sequences, resume from committed offsets, limits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sluiceway
from sluiceway.connect import (
    ConfigException,
    ConnectException,
    MemoryOffsetStorageReader,
    SimpleSourceTaskContext,
    SourceRecord,
)
from sluiceway_executor.connectors.datagen import (
    DataGenBatchTask,
    DataGenSourceConnector,
    DataGenSourceTask,
    datagen_record,
    resume_seq,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def started_task(
    props: dict[str, str],
    reader: MemoryOffsetStorageReader | None = None,
    clock: FakeClock | None = None,
    poll_batch: int = 100,
) -> DataGenSourceTask:
    task = DataGenSourceTask(
        clock=clock or FakeClock(), wall_clock=lambda: 1_700_000_000.5, poll_batch=poll_batch
    )
    task.initialize(SimpleSourceTaskContext(props, reader or MemoryOffsetStorageReader()))
    task.start(props)
    return task


def task_props(task: int = 0, **extra: str) -> dict[str, str]:
    return {"topic": "gen", "task.id": str(task), **extra}


def poll_all(task: DataGenSourceTask, polls: int) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    for _ in range(polls):
        records.extend(task.poll() or [])
    return records


@given(
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**45),
    st.integers(min_value=1, max_value=5_000),
)
def test_record_format(task: int, seq: int, ts_ms: int, size: int) -> None:
    key, value = datagen_record(task, seq, ts_ms, size)
    assert key == f"{task}-{seq}"
    parsed = json.loads(value)
    assert set(parsed) == {"task", "seq", "ts", "payload"}
    assert (parsed["task"], parsed["seq"], parsed["ts"]) == (task, seq, ts_ms)
    assert parsed["payload"].isalnum() or parsed["payload"] == ""
    minimum = len(datagen_record(task, seq, ts_ms, 1)[1])
    assert len(value.encode()) == max(size, minimum)


def test_connector_task_configs_and_version() -> None:
    connector = DataGenSourceConnector()
    assert connector.version() == sluiceway.__version__
    connector.start({"topic": "gen", "records.per.sec": "10"})
    configs = connector.task_configs(3)
    assert [c["task.id"] for c in configs] == ["0", "1", "2"]
    assert all(c["topic"] == "gen" and c["records.per.sec"] == "10" for c in configs)
    assert connector.task_class() is DataGenBatchTask


def test_connector_start_rejects_bad_config() -> None:
    with pytest.raises(ConfigException):
        DataGenSourceConnector().start({"topic": "gen", "max.records": "-2"})


def test_task_produces_gap_free_sequence_from_zero() -> None:
    task = started_task(task_props(2, **{"record.size.bytes": "80"}), poll_batch=7)
    records = poll_all(task, 5)
    assert [r.source_offset["seq"] for r in records] == list(range(35))
    first = records[0]
    assert first.source_partition == {"task": 2}
    assert first.topic == "gen"
    assert first.key == "2-0"
    assert first.timestamp_ms == 1_700_000_000_500
    assert json.loads(first.value)["seq"] == 0
    assert len(first.value) == 80
    assert task.next_seq == 35


def test_task_resumes_after_committed_offset() -> None:
    reader = MemoryOffsetStorageReader([({"task": 1}, {"seq": 41}), ({"task": 0}, {"seq": 5})])
    task = started_task(task_props(1), reader, poll_batch=10)
    seqs = [r.source_offset["seq"] for r in poll_all(task, 2)]
    assert seqs == list(range(42, 62))
    assert poll_all(task, 1)[0].key == "1-62"


def test_restart_continues_without_gap_or_duplicate() -> None:
    reader = MemoryOffsetStorageReader()
    first = started_task(task_props(0), reader, poll_batch=25)
    batch = first.poll() or []
    # The framework commits the last offset of what reached Kafka, then the task is moved.
    reader.put(batch[-1].source_partition, batch[-1].source_offset)
    first.stop()
    second = started_task(task_props(0), reader, poll_batch=25)
    seqs = [r.source_offset["seq"] for r in batch] + [r.source_offset["seq"] for r in poll_all(second, 2)]
    assert seqs == list(range(75))


def test_max_records_then_idles() -> None:
    reader = MemoryOffsetStorageReader([({"task": 0}, {"seq": 2})])
    task = started_task(task_props(0, **{"max.records": "10"}), reader, poll_batch=4)
    seqs = [r.source_offset["seq"] for r in poll_all(task, 2)]
    assert seqs == list(range(3, 10))
    task.stop()  # so the idle wait returns at once
    assert task.poll() is None


def test_max_records_zero_produces_nothing() -> None:
    task = started_task(task_props(0, **{"max.records": "0"}))
    task.stop()
    assert task.poll() is None


def test_rate_limit_paces_records() -> None:
    clock = FakeClock()
    task = started_task(task_props(0, **{"records.per.sec": "10"}), clock=clock, poll_batch=1000)
    assert len(task.poll() or []) == 1  # one token up front
    clock.now += 0.55
    assert len(task.poll() or []) == 5
    clock.now += 10.0  # a long pause refills at most one second of records
    assert len(task.poll() or []) == 10
    clock.now += 0.35
    records = task.poll() or []
    assert len(records) == 3
    assert records[-1].source_offset["seq"] == 18


def test_stopped_task_returns_none() -> None:
    task = started_task(task_props(0))
    task.stop()
    assert task.poll() is None


def test_bad_committed_offset_fails_the_task() -> None:
    with pytest.raises(ConnectException, match="seq"):
        started_task(task_props(0), MemoryOffsetStorageReader([({"task": 0}, {"seq": "x"})]))
    assert resume_seq(None) == 0
    assert resume_seq({"seq": 9}) == 10


def test_alter_offsets() -> None:
    connector = DataGenSourceConnector()
    assert connector.alter_offsets({}, [({"task": 0}, {"seq": 10}), ({"task": 1}, None)]) is True
    with pytest.raises(ConnectException, match="Source partitions"):
        connector.alter_offsets({}, [({"filename": "x"}, {"seq": 1})])
    with pytest.raises(ConnectException, match="Offsets of this connector"):
        connector.alter_offsets({}, [({"task": 0}, {"seq": -5})])
    with pytest.raises(ConnectException, match="Offsets of this connector"):
        connector.alter_offsets({}, [({"task": 0}, {"seq": True})])
