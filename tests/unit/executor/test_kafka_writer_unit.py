"""How the `sluiceway-kafka` writer hands one Arrow batch to its producer, without a broker: a
recording stand-in for confluent-kafka's Producer takes the calls (the writer's delivery, flush and
pooling are exercised against the real broker by the integration tests)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from sluiceway_executor.datasources.kafka_common import KafkaDataSourceError, WriterOptions
from sluiceway_executor.datasources.kafka_writer import KafkaWriter, _Failures


class _RecordingProducer:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))

    def poll(self, timeout: float) -> int:
        return 0


def _write(batch: pa.RecordBatch, topic: str | None = None) -> tuple[_RecordingProducer, Counter[str]]:
    options = {"bootstrap.servers": "h:1", **({"topic": topic} if topic else {})}
    writer = KafkaWriter(WriterOptions.parse(options))
    producer, counts = _RecordingProducer(), Counter[str]()
    writer._produce_batch(producer, batch, counts, _Failures())  # type: ignore[arg-type]
    return producer, counts


def test_one_topic_and_no_keys_are_passed_once_not_per_record() -> None:
    batch = pa.record_batch(
        {
            "topic": pa.array(["orders", "orders", "orders"]),
            "key": pa.array([None, None, None], pa.binary()),
            "value": pa.array([b"a", b"b", None]),
        }
    )
    producer, counts = _write(batch)
    # The short call: topic, value, key, nothing per record besides the value.
    assert producer.calls == [
        (("orders", b"a", None), {}),
        (("orders", b"b", None), {}),
        (("orders", None, None), {}),
    ]
    assert counts == {"orders": 3}


def test_a_null_topic_takes_the_writers_topic_and_several_topics_go_record_by_record() -> None:
    batch = pa.record_batch(
        {
            "topic": pa.array(["a", None, "b"]),
            "key": pa.array([b"k1", None, b"k3"]),
            "value": pa.array([b"1", b"2", b"3"]),
        }
    )
    producer, counts = _write(batch, topic="fallback")
    assert [(args[0], args[1], args[2]) for args, _ in producer.calls] == [
        ("a", b"1", b"k1"),
        ("fallback", b"2", None),
        ("b", b"3", b"k3"),
    ]
    assert all(kwargs["partition"] == -1 for _, kwargs in producer.calls)
    assert counts == {"a": 1, "fallback": 1, "b": 1}


def test_keys_are_kept_when_any_record_has_one() -> None:
    batch = pa.record_batch({"key": pa.array([None, b"k"]), "value": pa.array([b"1", b"2"])})
    producer, counts = _write(batch, topic="t")
    assert producer.calls == [(("t", b"1", None), {}), (("t", b"2", b"k"), {})]
    assert counts == {"t": 2}


def test_a_null_topic_without_the_writers_topic_fails_the_batch_unwritten() -> None:
    batch = pa.record_batch({"topic": pa.array(["a", None]), "value": pa.array([b"1", b"2"])})
    with pytest.raises(KafkaDataSourceError, match="a row has a null topic and no option 'topic' is set"):
        _write(batch)
