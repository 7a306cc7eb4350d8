"""client_bootstrap_servers answers what kafka_client_config's bootstrap.servers is, for any mix of
the worker's common, role and override keys, and fails the same way when there is none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.connect import ConnectException
from sluiceway.connect.kafka_clients import client_bootstrap_servers, kafka_client_config, own_offsets_topic

ROLES = ("producer", "consumer", "admin")
servers = st.sampled_from(["", "a:9092", "b:9092", "a:9092,b:9092"])


def maybe(key: str) -> st.SearchStrategy[dict[str, str]]:
    return st.one_of(st.just({}), servers.map(lambda value: {key: value}))


@st.composite
def configs(draw: st.DrawFn) -> tuple[str, dict[str, str], dict[str, str]]:
    role = draw(st.sampled_from(ROLES))
    worker = draw(maybe("bootstrap.servers")) | {
        "security.protocol": "PLAINTEXT",
        "consumer.max.poll.records": "5",
    }
    for other in ROLES:
        worker |= draw(maybe(f"{other}.bootstrap.servers"))
        worker |= draw(maybe(f"{other}.override.bootstrap.servers"))  # ignored in a worker config
    connector = {"connector.class": "DataGenSource"}
    for other in ROLES:
        connector |= draw(maybe(f"{other}.override.bootstrap.servers"))
        connector |= draw(maybe(f"{other}.bootstrap.servers"))  # not an override: ignored
    return role, worker, connector


@given(configs())
def test_the_same_answer_as_the_whole_client_config(case: tuple[str, dict[str, str], dict[str, str]]) -> None:
    role, worker, connector = case
    try:
        expected = kafka_client_config(worker, role, connector)["bootstrap.servers"]
    except ConnectException as exc:
        with pytest.raises(ConnectException, match=str(exc)):
            client_bootstrap_servers(worker, role, connector)
        return
    assert client_bootstrap_servers(worker, role, connector) == expected


def test_a_producer_on_another_cluster_gets_the_worker_topic_name_there() -> None:
    worker = {"bootstrap.servers": "a:9092", "offset.storage.topic": "offsets"}
    assert own_offsets_topic(worker, {}) is None
    assert own_offsets_topic(worker, {"producer.override.bootstrap.servers": "b:9092"}) == "offsets"
    assert own_offsets_topic(worker | {"producer.bootstrap.servers": "b:9092"}, {}) == "offsets"
    assert own_offsets_topic(worker, {"offsets.storage.topic": "mine"}) == "mine"


def test_an_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown Kafka client role 'broker'"):
        client_bootstrap_servers({"bootstrap.servers": "a:9092"}, "broker")
