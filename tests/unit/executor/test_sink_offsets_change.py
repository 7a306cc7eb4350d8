"""How a sink that keeps its offsets with its data (SparkFileSink) tells a batch it wrote but never
committed from one that a KIP-875 alter or reset rewound: the control plane records each change of a
sink's offsets (``SINK_OFFSETS_CHANGE``), the task's assignment carries the latest one, each batch's
offsets file names the change it was written under, and at start only batches written under the
task's current change count (``held_ranges``) for the skip of ``resume_offset``. Neither Kafka nor
Spark is needed: the lake here is a local directory read with pyarrow, as a Spark worker reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyarrow import fs

from sluiceway.common.offsets import (
    SINK_OFFSETS_CHANGE,
    OffsetPair,
    new_sink_offsets_change,
    sink_offsets_change,
)
from sluiceway.connect import OffsetRange, TopicPartition
from sluiceway_executor.connectors.lake_commits import MANIFEST, _newest_ranges, held_ranges, manifest
from sluiceway_executor.pipelines.sink import resume_offset
from sluiceway_executor.pipelines.spec import TaskSpec

TP = TopicPartition("t", 0)


def row(batch: str, start: int, end: int, change: str = "", partition: int = 0) -> dict[str, Any]:
    return {
        "batch": batch,
        "change": change,
        "topic": "t",
        "partition": partition,
        "start": start,
        "end": end,
    }


def change_pair(change_id: str) -> OffsetPair:
    return (dict(SINK_OFFSETS_CHANGE), {"id": change_id, "time_ms": 1})


def resumes_at(
    committed: int | None, rows: list[dict[str, Any]], change: str, earliest: int = 0
) -> int | None:
    """Where partition t-0 resumes: the pipeline's decision from what the lake holds."""
    return resume_offset(committed, held_ranges(rows, change).get(TP), earliest)


def test_a_batch_written_under_the_current_change_is_still_skipped_when_never_committed() -> None:
    # Published [100, 300) and died before its commit: the group still says 100.
    lake = [row("0001-a", 0, 100, "x"), row("0002-b", 100, 300, "x")]
    assert resumes_at(100, lake, "x") == 300
    # Nothing ever changed through the control plane: batches and task both have "".
    assert resumes_at(100, [row("0002-b", 100, 300)], "") == 300
    # A first batch, never committed, from the earliest offset: skipped too.
    assert resumes_at(None, [row("0001-a", 0, 300, "x")], "x") == 300


def test_after_an_alter_the_records_from_the_new_offset_are_written_again() -> None:
    # The whole topic went in one batch, which was committed; then the offsets were altered to 0.
    lake = [row("0001-a", 0, 6000, "")]
    assert resumes_at(0, lake, "after-alter") == 0
    # Altered to the start of the newest batch of several: that batch is written again too.
    lake = [row("0001-a", 0, 100, "x"), row("0002-b", 100, 200, "x")]
    assert resumes_at(100, lake, "y") == 100
    # Into the middle of a batch: from that offset, whichever change the batch was written under.
    assert resumes_at(150, lake, "y") == 150
    assert resumes_at(150, lake, "x") == 150


def test_after_a_reset_the_partition_starts_again_at_its_earliest_offset() -> None:
    # The group was deleted: no committed offset, and the newest batch starts at the earliest.
    lake = [row("0001-a", 0, 300, "x")]
    assert resumes_at(None, lake, "reset") is None
    assert resumes_at(None, [row("0001-a", 5, 300, "x")], "reset", earliest=5) is None


def test_a_second_change_to_the_same_offset_is_a_change_again() -> None:
    # Rewound to 0, written again [0, 300) under "y" and committed; rewound to 0 once more.
    lake = [row("0001-a", 0, 300, "x"), row("0002-b", 0, 300, "y")]
    assert held_ranges(lake, "y") == {TP: OffsetRange("t", 0, 0, 300)}
    assert resumes_at(0, lake, "z") == 0


def test_held_ranges_take_the_newest_batch_of_the_current_change_per_partition() -> None:
    rows = [
        row("0003-c", 200, 300, "old", partition=0),  # a task directory whose newest is older
        row("0002-b", 100, 200, "new", partition=0),
        row("0001-a", 0, 50, "new", partition=1),
        row("0004-d", 50, 90, "new", partition=1),
    ]
    assert held_ranges(rows, "new") == {
        TopicPartition("t", 0): OffsetRange("t", 0, 100, 200),
        TopicPartition("t", 1): OffsetRange("t", 1, 50, 90),
    }
    assert held_ranges(rows, "old") == {TopicPartition("t", 0): OffsetRange("t", 0, 200, 300)}
    assert held_ranges(rows, "") == {}


def test_the_offsets_file_names_the_change_and_an_older_file_counts_as_none(tmp_path: Path) -> None:
    for task, key, change in ((0, "0000000000002-bbbbbbbb", "x"), (1, "0000000000001-aaaaaaaa", None)):
        batch = tmp_path / f"task={task}" / f"batch={key}"
        batch.mkdir(parents=True)
        content = manifest(task, key, [OffsetRange("t", task, 10, 20)], change or "")
        if change is None:
            # Written before batches named the change.
            content = json.dumps({k: v for k, v in json.loads(content).items() if k != "offsets_change"})
        (batch / MANIFEST).write_text(content)
    rows = _newest_ranges(fs.LocalFileSystem(), str(tmp_path), 0)
    assert sorted((r["partition"], r["change"]) for r in rows) == [(0, "x"), (1, "")]
    assert held_ranges(rows, "x") == {TopicPartition("t", 0): OffsetRange("t", 0, 10, 20)}
    assert held_ranges(rows, "") == {TopicPartition("t", 1): OffsetRange("t", 1, 10, 20)}


def test_a_sink_task_spec_carries_the_change_its_assignment_named() -> None:
    def spec(offsets: tuple[OffsetPair, ...]) -> TaskSpec:
        return TaskSpec(
            "connectors/s/tasks/0", "s", 0, 1, {}, {}, paused=False, task_count=1, source_offsets=offsets
        )

    assert spec(()).offsets_change == ""
    # The runner merges a predecessor's sink commits into the same list: the change stays found.
    commits = ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 9})
    assert spec((commits, change_pair("abc"))).offsets_change == "abc"
    assert sink_offsets_change([(dict(SINK_OFFSETS_CHANGE), None)]) == ""


def test_every_recorded_change_has_an_id_of_its_own() -> None:
    first, second = new_sink_offsets_change(), new_sink_offsets_change()
    assert first["id"] and first["id"] != second["id"]
    assert isinstance(first["time_ms"], int)
