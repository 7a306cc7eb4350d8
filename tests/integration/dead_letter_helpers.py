"""What the dead-letter tests share: a topic of JSON envelopes with known bad records among them,
and a read_committed reader of a dead-letter topic."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from sluiceway.connect.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, envelope_to_bytes, struct_schema

ROW_SCHEMA = struct_schema([("id", INT64_SCHEMA), ("name", OPTIONAL_STRING_SCHEMA)], name="row")
# The same schema written with its keys in another order: an envelope of it is valid and its payload
# here is not (id is text).
_OTHER_ORDER = (
    b'{"schema":{"type":"struct","fields":[{"field":"id","type":"int64","optional":false},'
    b'{"field":"name","type":"string","optional":true}],"optional":false,"name":"row"},'
    b'"payload":{"id":"x","name":"n"}}'
)


def _envelope(id_: int, name: str) -> bytes:
    value = envelope_to_bytes(ROW_SCHEMA, {"id": id_, "name": name})
    assert value is not None
    return value


def bad_value(offset: int) -> tuple[bytes, str]:
    """The value of the malformed record at ``offset`` and the message it fails with."""
    kind = offset % 4
    if kind == 0:
        return b"not json", "invalid JSON"
    if kind == 1:
        return b'{"a":1}', "not an envelope"
    if kind == 2:
        return _envelope(offset, "abc"), "the value is no int32"
    return _OTHER_ORDER, "the payload does not fit its schema"


@dataclass(frozen=True)
class Produced:
    good: dict[int, int]  # offset -> id
    bad: dict[int, str]  # offset -> the message its failure carries


def produce_orders(bootstrap: str, topic: str, count: int, bad_every: int, bad_at: int) -> Produced:
    """``count`` records at offsets 0.. of one partition: an envelope of ``ROW_SCHEMA`` whose name
    is a number, except every ``bad_every``-th from ``bad_at`` (see ``bad_value``). Keys are the
    offsets' text; every record has the header ``origin=test``."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    good: dict[int, int] = {}
    bad: dict[int, str] = {}
    for offset in range(count):
        if offset % bad_every == bad_at:
            value, message = bad_value(offset // bad_every)
            bad[offset] = message
        else:
            value = _envelope(offset, str(offset))
            good[offset] = offset
        producer.produce(topic, key=str(offset).encode(), value=value, headers=[("origin", b"test")])
        if offset % 1000 == 999:
            producer.poll(0)
    assert producer.flush(30) == 0
    return Produced(good, bad)


@dataclass(frozen=True)
class DeadLetter:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes | None]


def read_dead_letters(bootstrap: str, topic: str, timeout: float = 60) -> list[DeadLetter]:
    """Every committed record of the dead-letter topic (read_committed, to its end)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"dlq-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        partitions = list(consumer.list_topics(topic, timeout=15).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending, out = set(partitions), []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(message.partition())
                    continue
                pairs: list[tuple[str, str | bytes | None]] = list(message.headers() or [])  # type: ignore[arg-type]
                headers = {name: value.encode() if isinstance(value, str) else value for name, value in pairs}
                out.append(DeadLetter(message.key(), message.value(), headers))
        assert not pending, f"no end of {topic} within {timeout}s"
        return out
    finally:
        consumer.close()
