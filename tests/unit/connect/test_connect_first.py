"""connect_first: one metadata request before a new client's first real one, never an error."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from sluiceway.connect.kafka_clients import connect_first


class MetadataClient:
    def __init__(self, error: KafkaError | None = None) -> None:
        self.error = error
        self.timeouts: list[float] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        self.timeouts.append(timeout)
        if self.error is not None:
            raise KafkaException(self.error)
        return object()


def test_fetches_metadata_once_within_the_time_given() -> None:
    client = MetadataClient()
    connect_first(client, 7.5)
    assert client.timeouts == [7.5]


def test_no_time_left_still_asks_briefly() -> None:
    client = MetadataClient()
    connect_first(client, -3.0)
    assert client.timeouts == [0.1]


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._TIMED_OUT])
def test_a_failed_metadata_request_is_left_to_the_next_request(code: int) -> None:
    client = MetadataClient(KafkaError(code))
    connect_first(client, 1.0)
    assert client.timeouts == [1.0]
