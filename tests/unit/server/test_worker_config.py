from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.common.properties import parse_properties
from sluiceway_server.config import DEFAULTS, WorkerConfig, WorkerConfigError


def test_defaults_are_kafka_connects() -> None:
    config = WorkerConfig.load(env={})
    assert config.get("config.storage.topic") == "connect-configs"
    assert config.get("offset.storage.topic") == "connect-offsets"
    assert config.get_int("offset.storage.partitions") == 25
    assert config.get("status.storage.topic") == "connect-status"
    assert config.get_int("status.storage.partitions") == 5
    assert config.listen_address() == "127.0.0.1:8083"
    assert config.get_bool("topic.tracking.enable") and config.get_bool("topic.tracking.allow.reset")
    assert config.get_int("heartbeat.interval.ms") == 0


def test_precedence_file_then_env_then_overrides(tmp_path: Path) -> None:
    file = tmp_path / "worker.properties"
    file.write_text("# comment\nbootstrap.servers=file:9092\ngroup.id = from-file\nproducer.linger.ms: 5\n")
    env = {
        "SLUICEWAY_GROUP_ID": "from-env",
        "SLUICEWAY_SERVER": "ignored:1",
        "SLUICEWAY_CONSUMER_FETCH_MAX_BYTES": "7",
    }
    config = WorkerConfig.load(file, {"bootstrap.servers": "flag:9092"}, env=env)
    assert config.get("bootstrap.servers") == "flag:9092"
    assert config.get("group.id") == "from-env"
    assert config.prefixed("producer.") == {"linger.ms": "5"}
    assert config.prefixed("consumer.") == {"fetch.max.bytes": "7"}
    assert "server" not in config.props


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("config.storage.replication.factor", "0"),
        ("offset.storage.partitions", "0"),
        ("status.storage.partitions", "x"),
        ("listeners", "nohostport"),
        ("topic.tracking.enable", "yes"),
        ("tracing.otlp.endpoint", "collector:4317"),
        ("tracing.otlp.endpoint", "grpc://collector:4317"),
        ("tracing.otlp.endpoint", "http://collector:port"),
        ("bootstrap.servers", " "),
        ("heartbeat.interval.ms", "-1"),
        ("task.restart.enable", "sometimes"),
        ("task.restart.backoff.initial.ms", "0"),
        ("task.restart.backoff.max.ms", "1m"),
        ("task.restart.max.attempts", "-2"),
        # Empty worker values that connectors fall back to (their own empty means the worker's).
        ("heartbeat.records.topic", ""),
        ("heartbeat.records.topic", "  "),
        ("heartbeat.interval.ms", ""),
        ("task.restart.enable", ""),
        ("task.restart.backoff.initial.ms", ""),
        ("task.restart.backoff.max.ms", " "),
        ("task.restart.max.attempts", ""),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(WorkerConfigError) as info:
        WorkerConfig.load(overrides={key: value}, env={})
    assert info.value.key == key


def test_an_empty_heartbeat_topic_says_what_to_do(tmp_path: Path) -> None:
    file = tmp_path / "worker.properties"
    file.write_text("heartbeat.records.topic=\n")
    with pytest.raises(WorkerConfigError, match=r"^heartbeat.records.topic: must not be empty") as info:
        WorkerConfig.load(file, env={})
    assert "connect-heartbeats" in str(info.value)
    with pytest.raises(WorkerConfigError, match=r"heartbeat\.records\.topic"):
        WorkerConfig.load(env={"SLUICEWAY_HEARTBEAT_RECORDS_TOPIC": ""})


def test_listener_forms() -> None:
    assert (
        WorkerConfig.load(overrides={"listeners": "grpc://127.0.0.1:9000"}, env={}).listen_address()
        == "127.0.0.1:9000"
    )
    config = WorkerConfig.load(
        overrides={"listeners": "0.0.0.0:8083", "advertised.listeners": "cp-0:8083"}, env={}
    )
    assert config.advertised_address() == "cp-0:8083"
    assert set(DEFAULTS) >= {"bootstrap.servers", "group.id", "spark.remote", "topic.creation.enable"}


def test_properties_continuations_and_separators() -> None:
    parsed = parse_properties("a=1\nb : two\n! bang comment\nlong = x\\\n   y\nempty\n")
    assert parsed == {"a": "1", "b": "two", "long": "xy", "empty": ""}


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z.]{0,15}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9_./-]{0,20}", fullmatch=True),
    )
)
def test_properties_round_trip(values: dict[str, str]) -> None:
    text = "\n".join(f"{k}={v}" for k, v in values.items())
    assert parse_properties(text) == values
