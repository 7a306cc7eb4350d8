"""Read planning without a broker: partition listing from metadata, the deterministic task split,
range planning and clamping, and how the Kafka data source cuts ranges into Spark splits and parses
its options."""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema

from sluiceway_executor.datasources.kafka_common import ARROW_SCHEMA, SCHEMA, ReaderOptions, WriterOptions
from sluiceway_executor.datasources.kafka_reader import KafkaSplit, split_ranges
from sluiceway_executor.datasources.kafka_writer import _check_input_schema
from sluiceway_executor.kafka_ranges import PartitionRange, list_partitions, plan_ranges, task_partitions


@dataclass
class _Topic:
    partitions: dict[int, Any]
    error: Any = None


@dataclass
class _Metadata:
    topics: dict[str, _Topic] = field(default_factory=dict)


class _Cluster:
    """What AdminClient.list_topics() answers: topics with their partitions."""

    def __init__(self, topics: dict[str, int], broken: tuple[str, ...] = ()) -> None:
        self.metadata = _Metadata(
            {
                name: _Topic(dict.fromkeys(range(n)), "ERR" if name in broken else None)
                for name, n in topics.items()
            }
        )
        self.asked: list[str | None] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Metadata:
        self.asked.append(topic)
        return self.metadata


def _pairs(partitions: list[Any]) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in partitions]


CLUSTER = {"orders": 3, "orders-eu": 2, "payments": 1, "__consumer_offsets": 2, "xorders": 1}


def test_named_topics_sorted_missing_ones_ignored() -> None:
    cluster = _Cluster(CLUSTER)
    found = list_partitions(cluster, ["payments", "orders", "missing"], None, 1.0)
    assert _pairs(found) == [("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0)]
    # One request for every topic: naming a topic could auto-create it.
    assert cluster.asked == [None]


def test_regex_is_a_full_match_and_skips_internal_topics() -> None:
    cluster = _Cluster(CLUSTER)
    assert _pairs(list_partitions(cluster, None, "orders.*", 1.0)) == [
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
        ("orders-eu", 0),
        ("orders-eu", 1),
    ]
    assert _pairs(list_partitions(cluster, None, "order", 1.0)) == []
    assert _pairs(list_partitions(cluster, None, ".*offsets", 1.0)) == []
    # An internal topic named explicitly is read, as Kafka allows.
    assert _pairs(list_partitions(cluster, ["__consumer_offsets"], None, 1.0)) == [
        ("__consumer_offsets", 0),
        ("__consumer_offsets", 1),
    ]


def test_topics_in_error_are_skipped_and_exclusive_options() -> None:
    cluster = _Cluster(CLUSTER, broken=("orders",))
    assert _pairs(list_partitions(cluster, ["orders", "payments"], None, 1.0)) == [("payments", 0)]
    assert list_partitions(cluster, [], None, 1.0) == []
    with pytest.raises(ValueError, match="mutually exclusive"):
        list_partitions(cluster, ["orders"], "orders.*", 1.0)


def test_task_split_round_robin() -> None:
    items = [f"p{i}" for i in range(7)]
    assert task_partitions(items, 0, 3) == ["p0", "p3", "p6"]
    assert task_partitions(items, 1, 3) == ["p1", "p4"]
    assert task_partitions(items, 2, 3) == ["p2", "p5"]
    assert task_partitions(items, 0, 1) == items
    with pytest.raises(ValueError, match="task_index"):
        task_partitions(items, 3, 3)
    with pytest.raises(ValueError, match="task_count"):
        task_partitions(items, 0, 0)


@given(st.lists(st.integers(), unique=True, max_size=40), st.integers(min_value=1, max_value=8))
def test_task_split_is_a_deterministic_partition_of_the_list(items: list[int], count: int) -> None:
    shares = [task_partitions(items, i, count) for i in range(count)]
    assert sorted(x for share in shares for x in share) == sorted(items)
    assert shares == [task_partitions(list(items), i, count) for i in range(count)]
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_plan_starts_at_committed_or_earliest() -> None:
    ends = {("a", 0): 100, ("a", 1): 50, ("b", 0): 10}
    earliest = {("a", 0): 0, ("a", 1): 5, ("b", 0): 0}
    committed: dict[tuple[str, int], int | None] = {("a", 0): 40, ("a", 1): None}
    assert plan_ranges(committed, earliest, ends, None) == [
        PartitionRange("a", 0, 40, 100),
        PartitionRange("a", 1, 5, 50),
        PartitionRange("b", 0, 0, 10),
    ]


def test_plan_clamps_and_caps_and_skips_empty() -> None:
    ends = {("t", 0): 100, ("t", 1): 100, ("t", 2): 100, ("t", 3): 0}
    earliest = {("t", 0): 30, ("t", 1): 0, ("t", 2): 0, ("t", 3): 0}
    committed: dict[tuple[str, int], int | None] = {
        ("t", 0): 10,  # below earliest: records deleted → from the earliest
        ("t", 1): 500,  # beyond the end (topic recreated) → nothing to read
        ("t", 2): 100,  # up to date
        ("t", 3): None,  # empty partition
    }
    assert plan_ranges(committed, earliest, ends, 25) == [PartitionRange("t", 0, 30, 55)]
    assert plan_ranges(committed, earliest, ends, None) == [PartitionRange("t", 0, 30, 100)]
    with pytest.raises(ValueError, match="max_records_per_partition"):
        plan_ranges(committed, earliest, ends, 0)


@given(
    st.integers(0, 1000),
    st.integers(0, 1000),
    st.one_of(st.none(), st.integers(0, 2000)),
    st.one_of(st.none(), st.integers(1, 500)),
)
def test_plan_range_stays_inside_the_log(low: int, span: int, committed: int | None, cap: int | None) -> None:
    key = ("t", 0)
    end = low + span
    planned = plan_ranges({key: committed}, {key: low}, {key: end}, cap)
    for r in planned:
        assert low <= r.start < r.end <= end
        assert cap is None or r.count <= cap
        assert r.start == (low if committed is None else min(max(committed, low), end))
    assert bool(planned) == (min(max(low if committed is None else committed, low), end) < end)


def test_range_count_and_json() -> None:
    r = PartitionRange("t", 2, 10, 25)
    assert r.count == 15
    assert r.key == ("t", 2)
    assert r.to_json() == {"topic": "t", "partition": 2, "start": 10, "end": 25}


# -- the data source's side of the plan -------------------------------------------------------


def test_arrow_schema_is_what_spark_expects() -> None:
    assert to_arrow_schema(SCHEMA, timezone="UTC").equals(ARROW_SCHEMA)


def test_ranges_split_into_chunks() -> None:
    ranges = [PartitionRange("t", 0, 0, 10), PartitionRange("t", 1, 5, 6), PartitionRange("u", 0, 3, 3)]
    assert split_ranges(ranges, 4) == [
        KafkaSplit((PartitionRange("t", 0, 0, 4),)),
        KafkaSplit((PartitionRange("t", 0, 4, 8),)),
        KafkaSplit((PartitionRange("t", 0, 8, 10),)),
        KafkaSplit((PartitionRange("t", 1, 5, 6),)),
    ]


def test_small_ranges_of_many_partitions_share_one_split() -> None:
    ranges = [PartitionRange("t", p, 100, 2_600) for p in range(4)]
    assert split_ranges(ranges, 500_000, 100_000) == [KafkaSplit(tuple(ranges))]


def test_ranges_are_shared_evenly_among_as_many_splits_as_they_fill() -> None:
    ranges = [PartitionRange("t", p, 0, 37_500) for p in range(4)]
    splits = split_ranges(ranges, 500_000, 100_000)
    # 150,000 offsets fill two splits of 100,000: two ranges each, not three and one.
    assert [sum(r.count for r in s.ranges) for s in splits] == [75_000, 75_000]


def test_big_ranges_keep_a_split_each() -> None:
    ranges = [PartitionRange("t", p, 0, 250_000) for p in range(2)]
    assert split_ranges(ranges, 500_000, 100_000) == [KafkaSplit((r,)) for r in ranges]


def test_two_chunks_of_one_partition_never_share_a_split() -> None:
    # Both chunks of partition 0 would fit in one split of 100,000, but one consumer cannot read two
    # ranges of one partition side by side.
    splits = split_ranges([PartitionRange("t", 0, 0, 30), PartitionRange("u", 1, 0, 5)], 20, 100_000)
    assert [s.ranges for s in splits] == [
        (PartitionRange("t", 0, 0, 20),),
        (PartitionRange("t", 0, 20, 30), PartitionRange("u", 1, 0, 5)),
    ]


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1_000), st.integers(0, 1_000)), max_size=8),
    st.integers(10, 300),
    st.integers(1, 2_000),
)
def test_splits_cover_every_range_exactly_once(
    spans: list[tuple[int, int, int]], max_rows: int, min_rows: int
) -> None:
    # Ranges of distinct partitions, as a plan gives them.
    ranges = [PartitionRange("t", p, start, start + span) for p, (_, start, span) in enumerate(spans)]
    splits = split_ranges(ranges, max_rows, min_rows)
    for planned in ranges:
        pieces = sorted((r for s in splits for r in s.ranges if r.key == planned.key), key=lambda r: r.start)
        assert sum(r.count for r in pieces) == planned.count
        assert all(a.end == b.start for a, b in itertools.pairwise(pieces))
        assert all(0 < r.count <= max_rows for r in pieces)
    for split in splits:
        assert split.ranges
        assert len({r.key for r in split.ranges}) == len(split.ranges)
    total = sum(r.count for r in ranges)
    chunks = sum(-(-r.count // max_rows) for r in ranges)
    if total:
        # As many splits as the offsets fill at min_rows, unless chunks of one partition force more.
        most_chunks = max(-(-r.count // max_rows) for r in ranges)
        assert len(splits) == max(min(chunks, -(-total // min_rows)), most_chunks)


def _reader_options(**overrides: str) -> dict[str, str]:
    ranges = json.dumps([{"topic": "t", "partition": 0, "start": 0, "end": 5}])
    return {"bootstrap.servers": "h:1", "ranges": ranges, **overrides}


def test_reader_options_and_forced_consumer_settings() -> None:
    parsed = ReaderOptions.parse(
        _reader_options(**{"consumer.config": '{"isolation.level": "read_uncommitted", "check.crcs": true}'})
    )
    assert parsed.ranges == [PartitionRange("t", 0, 0, 5)]
    assert parsed.read_timeout_ms == 60_000
    assert parsed.max_rows_per_split == 500_000
    settings = parsed.consumer_settings()
    assert settings["isolation.level"] == "read_committed"
    assert settings["auto.offset.reset"] == "error"
    assert settings["enable.partition.eof"] == "true"
    assert settings["check.crcs"] == "true"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"bootstrap.servers": ""}, "'bootstrap.servers' is required"),
        ({"ranges": "{}"}, "'ranges' must be a JSON list"),
        ({"ranges": "[{"}, "'ranges' must be a JSON list"),
        ({"ranges": '[{"topic": "t", "partition": 0, "start": 5}]'}, "exactly topic, partition, start"),
        ({"ranges": '[{"topic": "t", "partition": 0, "start": 5, "end": 4}]'}, "start <= end"),
        ({"ranges": '[{"topic": "t", "partition": "0", "start": 0, "end": 4}]'}, "integers"),
        ({"read.timeout.ms": "soon"}, "'read.timeout.ms' must be an integer"),
        ({"max.rows.per.split": "0"}, "'max.rows.per.split' must be >= 1"),
        ({"consumer.config": "[]"}, "'consumer.config' must be a JSON object"),
        ({"consumer.config": '{"a": {"b": 1}}'}, "must be a scalar"),
    ],
)
def test_bad_reader_options(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReaderOptions.parse(_reader_options(**overrides))


def test_writer_options_force_idempotence() -> None:
    parsed = WriterOptions.parse(
        {"bootstrap.servers": "h:1", "topic": " out ", "producer.config": '{"acks": "1", "linger.ms": 50}'}
    )
    settings = parsed.producer_settings()
    assert parsed.topic == "out"
    assert settings["acks"] == "all"
    assert settings["enable.idempotence"] == "true"
    assert settings["linger.ms"] == "50"
    assert settings["compression.type"] == "lz4"
    assert WriterOptions.parse({"bootstrap.servers": "h:1"}).topic is None


def test_writer_input_schema_checks() -> None:
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    def schema(**columns: Any) -> StructType:
        return StructType([StructField(name, data_type) for name, data_type in columns.items()])

    _check_input_schema(SCHEMA, None)  # what the reader returns can be written back
    _check_input_schema(schema(value=StringType()), "out")
    with pytest.raises(ValueError, match="needs a 'value' column"):
        _check_input_schema(schema(key=StringType()), "out")
    with pytest.raises(ValueError, match="option 'topic'"):
        _check_input_schema(schema(value=StringType()), None)
    with pytest.raises(ValueError, match="'value' must be binary or string, got int"):
        _check_input_schema(schema(value=IntegerType()), "out")
    with pytest.raises(ValueError, match="'partition' must be an integer"):
        _check_input_schema(schema(value=StringType(), partition=StringType()), "out")
    with pytest.raises(ValueError, match="'headers' must be"):
        _check_input_schema(schema(value=StringType(), headers=StringType()), "out")
