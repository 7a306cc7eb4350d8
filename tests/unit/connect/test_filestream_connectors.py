"""FileStreamSource / FileStreamSink against temporary files."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway.connect import (
    ConnectException,
    MemoryOffsetStorageReader,
    SimpleSourceTaskContext,
    SinkRecord,
    SourceRecord,
    TopicPartition,
)
from sluiceway_executor.connectors.filestream import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)


def source_task(
    path: Path, reader: MemoryOffsetStorageReader | None = None, batch: int = 2000
) -> FileStreamSourceTask:
    props = {"file": str(path), "topic": "lines", "batch.size": str(batch)}
    task = FileStreamSourceTask(idle_wait_s=0)
    task.initialize(SimpleSourceTaskContext(props, reader or MemoryOffsetStorageReader()))
    task.start(props)
    return task


def values(records: list[SourceRecord] | None) -> list[str]:
    return [r.value for r in records or []]


def test_reads_lines_with_byte_positions(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("one\ntwo\r\nthree\rfour\nhé\n".encode())
    task = source_task(path)
    records = task.poll()
    assert values(records) == ["one", "two", "three", "four", "hé"]
    assert records is not None
    assert [r.source_offset["position"] for r in records] == [4, 9, 15, 20, 24]
    assert records[0].source_partition == {"filename": str(path)}
    assert records[0].topic == "lines"
    assert records[0].key is None
    assert task.poll() is None
    task.stop()


def test_partial_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"done\npart")
    task = source_task(path)
    assert values(task.poll()) == ["done"]
    assert task.poll() is None
    with path.open("ab") as f:
        f.write(b"ial\r")
    assert task.poll() is None  # a trailing \r may be the start of \r\n
    with path.open("ab") as f:
        f.write(b"\nnext\n")
    records = task.poll()
    assert values(records) == ["partial", "next"]
    assert records is not None
    assert records[-1].source_offset["position"] == path.stat().st_size
    task.stop()


def test_batch_size_limits_each_poll(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    task = source_task(path, batch=4)
    polled = [values(task.poll()) for _ in range(4)]
    assert [len(p) for p in polled] == [4, 4, 2, 0]
    assert [line for p in polled for line in p] == [f"line {i}" for i in range(10)]
    task.stop()


def test_resumes_from_committed_position(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("a\nbb\nccc\n")
    first = source_task(path)
    records = first.poll()
    assert records is not None
    first.stop()
    reader = MemoryOffsetStorageReader([(records[1].source_partition, records[1].source_offset)])
    assert records[1].source_offset == {"position": 5}
    second = source_task(path, reader)
    assert values(second.poll()) == ["ccc"]
    second.stop()


def test_waits_for_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    task = source_task(path)
    assert task.poll() is None
    path.write_text("x\n")
    assert values(task.poll()) == ["x"]
    task.stop()


def test_bad_committed_position_fails(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("x\n")
    task = source_task(path, MemoryOffsetStorageReader([({"filename": str(path)}, {"position": "7"})]))
    with pytest.raises(ConnectException, match="incorrect type"):
        task.poll()


def test_source_connector_has_one_task_and_checks_offsets() -> None:
    connector = FileStreamSourceConnector()
    props = {"file": "/tmp/in.txt", "topic": "t"}
    connector.start(props)
    assert connector.task_configs(5) == [props]
    assert connector.alter_offsets(props, [({"filename": "/tmp/in.txt"}, {"position": 3}), ({"x": 1}, None)])
    with pytest.raises(ConnectException, match="non-negative"):
        connector.alter_offsets(props, [({"filename": "/tmp/in.txt"}, {"position": -1})])
    with pytest.raises(ConnectException, match="Long value"):
        connector.alter_offsets(props, [({"filename": "/tmp/in.txt"}, {"position": "3"})])
    with pytest.raises(ConnectException, match="contain the key 'filename'"):
        connector.alter_offsets(props, [({"file": "/tmp/in.txt"}, {"position": 3})])
    with pytest.raises(ConnectException, match="'position'"):
        connector.alter_offsets(props, [({"filename": "/tmp/in.txt"}, {"pos": 3})])


def test_sink_appends_one_line_per_value(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("existing\n")
    task = FileStreamSinkTask()
    task.start({"file": str(path), "topics": "t"})
    records = [
        SinkRecord("t", 0, 0, None, "plain"),
        SinkRecord("t", 0, 1, None, b"bytes \xc3\xa9"),
        SinkRecord("t", 1, 0, None, None),
        SinkRecord("t", 1, 1, None, {"a": 1}),
        SinkRecord("t", 1, 2, None, 42),
    ]
    task.put(records[:2])
    task.put(records[2:])
    task.flush({TopicPartition("t", 0): 2, TopicPartition("t", 1): 3})
    assert path.read_text(encoding="utf-8") == 'existing\nplain\nbytes é\nnull\n{"a":1}\n42\n'
    task.stop()


def test_sink_pre_commit_flushes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    task.put([SinkRecord("t", 0, 0, None, "x")])
    offsets = {TopicPartition("t", 0): 1}
    assert task.pre_commit(offsets) == offsets
    assert path.read_text() == "x\n"
    task.stop()


def test_sink_connector_task_configs() -> None:
    connector = FileStreamSinkConnector()
    props = {"file": "/tmp/out.txt", "topics": "a"}
    connector.start(props)
    assert connector.task_configs(3) == [props, props, props]
    assert connector.alter_offsets(props, {TopicPartition("a", 0): None}) is True
