"""WorkerPolicy: reading it from worker keys, and the rules validation applies with it (internal
topics, local paths confined to connector.allowed.paths, the client config override policy)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sluiceway.connect import PathKind, PluginRegistry, validate_connector_config
from sluiceway.connect.validation import ConfigInfos
from sluiceway.connect.worker_policy import OverridePolicy, WorkerPolicy, WorkerPolicyError, path_errors
from sluiceway_executor.connectors.filestream import source_config_def
from sluiceway_server.config import DEFAULTS, WorkerConfig, WorkerConfigError


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover()


def _errors(infos: ConfigInfos) -> dict[str, list[str]]:
    return infos.errors()


# ---------------------------------------------------------------------- reading the policy


def test_missing_keys_read_as_the_server_defaults() -> None:
    assert WorkerPolicy.from_worker_config({}) == WorkerPolicy.from_worker_config(DEFAULTS)
    assert WorkerPolicy.from_worker_config({}) == WorkerPolicy()
    policy = WorkerPolicy()
    assert policy.storage_topics == {
        "connect-configs",
        "connect-offsets",
        "connect-status",
        "connect-cluster",
    }
    assert policy.override_policy is OverridePolicy.ALL
    assert policy.plugin_path == () and policy.allowed_paths == () and policy.topic_creation


def test_policy_keys_are_read() -> None:
    policy = WorkerPolicy.from_worker_config(
        {
            "config.storage.topic": "cfg",
            "plugin.path": "/opt/a, /opt/b/../c,,/opt/a",
            "connector.allowed.paths": "/data/in/",
            "connector.client.config.override.policy": "allowlist",
            "connector.client.config.override.allowlist": "linger.ms, acks",
            "topic.creation.enable": "false",
        }
    )
    assert "cfg" in policy.storage_topics and "connect-configs" not in policy.storage_topics
    assert policy.plugin_path == ("/opt/a", "/opt/c")
    assert policy.allowed_paths == ("/data/in",)
    assert policy.override_policy is OverridePolicy.ALLOWLIST
    assert policy.override_allowlist == {"linger.ms", "acks"}
    assert not policy.topic_creation


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("connector.client.config.override.policy", "Principal", "expected All, None or Allowlist"),
        ("plugin.path", "relative/dir", "expected absolute directories"),
        ("connector.allowed.paths", "/ok,tmp", "expected absolute directories"),
        ("topic.creation.enable", "yes", "expected true or false"),
        ("heartbeat.records.topic", "connect-configs", "is an internal topic"),
        ("heartbeat.records.topic", "__consumer_offsets", "is an internal topic"),
    ],
)
def test_bad_values_name_their_key(key: str, value: str, message: str) -> None:
    with pytest.raises(WorkerPolicyError, match=message) as raised:
        WorkerPolicy.from_worker_config({key: value})
    assert raised.value.key == key
    # The server's worker config refuses them the same way, naming the key.
    with pytest.raises(WorkerConfigError, match=message) as refused:
        WorkerConfig.load(overrides={key: value}, env={})
    assert refused.value.key == key


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_heartbeat_topic_is_refused_not_replaced_by_the_default(empty: str) -> None:
    with pytest.raises(WorkerPolicyError, match="must not be empty") as raised:
        WorkerPolicy.from_worker_config({"heartbeat.records.topic": empty})
    assert raised.value.key == "heartbeat.records.topic"


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({}, None),
        ({"listeners": "127.0.0.1:8083"}, None),
        ({"listeners": "localhost:8083, grpc://[::1]:9000"}, None),
        ({"auth.tokens.file": " "}, None),
        ({"auth.tokens.file": "/etc/sluiceway/tokens"}, "authentication is on (auth.tokens.file)"),
        ({"listeners": "0.0.0.0:8083"}, "the API listens on 0.0.0.0:8083"),
        ({"listeners": ":8083"}, "the API listens on :8083"),
        ({"listeners": "grpc://10.1.2.3:8083"}, "the API listens on 10.1.2.3:8083"),
        ({"listeners": "127.0.0.1:8083,[::]:8084"}, "the API listens on [::]:8084"),
    ],
)
def test_exposure_is_authentication_or_a_listener_off_loopback(
    settings: dict[str, str], reason: str | None
) -> None:
    exposed = WorkerPolicy.from_worker_config(settings).exposed
    if reason is None:
        assert exposed is None
    else:
        assert exposed is not None and reason in exposed


def test_internal_topics() -> None:
    policy = WorkerPolicy.from_worker_config({"offset.storage.topic": "offs"})
    for topic in (
        "connect-configs",
        "offs",
        " connect-status ",
        "connect-cluster",
        "__consumer_offsets",
        "__x",
    ):
        assert policy.is_internal_topic(topic), topic
    for topic in ("connect-offsets", "orders", "_single", "connect-heartbeats"):
        assert not policy.is_internal_topic(topic), topic


# ---------------------------------------------------------------------- client overrides


def test_override_policies() -> None:
    all_ = WorkerPolicy()
    none = WorkerPolicy(override_policy=OverridePolicy.NONE)
    listed = WorkerPolicy(
        override_policy=OverridePolicy.ALLOWLIST, override_allowlist=frozenset({"linger.ms"})
    )
    for key in ("producer.override.linger.ms", "consumer.override.max.poll.records", "admin.override.x"):
        assert all_.override_problem(key) is None
        assert "connector.client.config.override.policy=None" in (none.override_problem(key) or "")
    assert listed.override_problem("producer.override.linger.ms") is None
    refused = listed.override_problem("consumer.override.sasl.jaas.config") or ""
    assert "sasl.jaas.config is not in connector.client.config.override.allowlist" in refused
    assert "connector.client.config.override.policy=Allowlist" in refused
    # Keys that override no client are not the policy's business.
    assert none.override_problem("producer.linger.ms") is None
    assert none.override_problem("topic") is None


def test_validation_applies_the_override_policy(registry: PluginRegistry) -> None:
    config = {
        "name": "gen",
        "connector.class": "DataGenSource",
        "topic": "t",
        "producer.override.linger.ms": "5",
        "admin.override.request.timeout.ms": "100",
    }
    assert validate_connector_config(registry, config).error_count == 0
    none = validate_connector_config(
        registry, config, policy=WorkerPolicy(override_policy=OverridePolicy.NONE)
    )
    assert set(_errors(none)) == {"producer.override.linger.ms", "admin.override.request.timeout.ms"}
    listed = WorkerPolicy(
        override_policy=OverridePolicy.ALLOWLIST, override_allowlist=frozenset({"linger.ms"})
    )
    assert list(_errors(validate_connector_config(registry, config, policy=listed))) == [
        "admin.override.request.timeout.ms"
    ]


# ---------------------------------------------------------------------- internal topics


def _sink(**extra: str) -> dict[str, str]:
    return {"name": "out", "connector.class": "FileStreamSink", "file": "/tmp/out.txt", **extra}


def test_sink_topics_may_not_be_internal(registry: PluginRegistry) -> None:
    policy = WorkerPolicy.from_worker_config({"config.storage.topic": "cfg"})
    for topics in ("cfg", "orders, cfg", "__consumer_offsets", "connect-status"):
        errors = _errors(validate_connector_config(registry, _sink(topics=topics), policy=policy))
        assert list(errors) == ["topics"], topics
        assert "is an internal topic" in errors["topics"][0]
    # connect-configs is not this worker's config topic, and not a Kafka one.
    assert (
        validate_connector_config(registry, _sink(topics="orders,connect-configs"), policy=policy).error_count
        == 0
    )


@pytest.mark.parametrize(
    "regex", ["connect-.*", ".*", "cfg|orders", "__.*", "__consumer_offsets", ".*status"]
)
def test_sink_regex_may_not_match_an_internal_topic(registry: PluginRegistry, regex: str) -> None:
    policy = WorkerPolicy.from_worker_config({"config.storage.topic": "cfg"})
    errors = _errors(validate_connector_config(registry, _sink(**{"topics.regex": regex}), policy=policy))
    assert list(errors) == ["topics.regex"]
    assert "matches internal topics" in errors["topics.regex"][0]


def test_sink_regex_that_matches_no_internal_topic_passes(registry: PluginRegistry) -> None:
    for regex in ("orders-.*", "connect-configs-.+", "cfg2"):
        assert validate_connector_config(registry, _sink(**{"topics.regex": regex})).error_count == 0
    # A bad pattern is reported once, by the key's own check.
    errors = _errors(validate_connector_config(registry, _sink(**{"topics.regex": "(oops"})))
    assert len(errors["topics.regex"]) == 1


def test_offsets_and_heartbeat_topics_may_not_be_internal(registry: PluginRegistry) -> None:
    gen = {"name": "gen", "connector.class": "DataGenSource", "topic": "t"}
    for key in ("offsets.storage.topic", "heartbeat.records.topic"):
        for topic in ("connect-configs", "connect-offsets", "__transaction_state"):
            errors = _errors(validate_connector_config(registry, {**gen, key: topic}))
            assert list(errors) == [key], (key, topic)
            assert f"{topic} is an internal topic" in errors[key][0]
        assert validate_connector_config(registry, {**gen, key: "mine"}).error_count == 0


def test_rules_apply_when_the_plugin_is_unknown(registry: PluginRegistry) -> None:
    errors = _errors(
        validate_connector_config(
            registry, {"name": "x", "connector.class": "Nope", "offsets.storage.topic": "connect-configs"}
        )
    )
    assert set(errors) == {"connector.class", "offsets.storage.topic"}


# ---------------------------------------------------------------------- local paths


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    directory = tmp_path / "allowed"
    directory.mkdir()
    return directory


def test_no_allowed_paths_allows_anything() -> None:
    policy = WorkerPolicy()
    for value in ("/etc/passwd", "relative", "s3a://bucket/x"):
        assert policy.path_problem(value, PathKind.URI) is None


def test_an_exposed_worker_without_allowed_paths_allows_no_path(allowed: Path) -> None:
    policy = WorkerPolicy.from_worker_config({"auth.tokens.file": "/etc/tokens"})
    assert policy.confines_paths and not WorkerPolicy().confines_paths
    for value, kind in (
        ("/etc/passwd", PathKind.FILE),
        (str(allowed), PathKind.FILE),
        ("s3a://b/x", PathKind.URI),
    ):
        problem = policy.path_problem(value, kind) or ""
        assert "authentication is on (auth.tokens.file)" in problem, value
        assert "set connector.allowed.paths in the worker config" in problem, value
    # Named directories work as on any worker.
    named = WorkerPolicy.from_worker_config(
        {"listeners": "0.0.0.0:8083", "connector.allowed.paths": str(allowed)}
    )
    assert named.path_problem(str(allowed / "in.txt")) is None
    assert "outside the directories" in (named.path_problem("/etc/passwd") or "")


def test_validation_refuses_file_connectors_on_an_exposed_worker(registry: PluginRegistry) -> None:
    policy = WorkerPolicy.from_worker_config({"listeners": "0.0.0.0:8083"})
    configs = {
        "file": {"name": "in", "connector.class": "FileStreamSource", "topic": "t", "file": "/tmp/in"},
        "path": {"name": "lake", "connector.class": "SparkFileSink", "topics": "t", "path": "/tmp/lake"},
    }
    for key, config in configs.items():
        errors = _errors(validate_connector_config(registry, config, policy=policy))
        assert list(errors) == [key]
        assert "connector.allowed.paths" in errors[key][0] and "0.0.0.0:8083" in errors[key][0]
        # The same config passes on a loopback worker without authentication.
        assert validate_connector_config(registry, config).error_count == 0
    # Connectors without path keys are not affected.
    datagen = {"name": "gen", "connector.class": "DataGenSource", "topic": "t"}
    assert validate_connector_config(registry, datagen, policy=policy).error_count == 0


def test_file_paths_are_confined(allowed: Path, tmp_path: Path) -> None:
    policy = WorkerPolicy(allowed_paths=(str(allowed),))
    for inside in (allowed, allowed / "a.txt", allowed / "sub" / "b.txt", allowed / "x" / ".." / "y"):
        assert policy.path_problem(str(inside)) is None, inside
    assert "outside the directories connector.allowed.paths allows" in (
        policy.path_problem("/etc/passwd") or ""
    )
    for outside in (
        f"{allowed}/../escape.txt",
        f"{allowed}/sub/../../escape.txt",
        f"{allowed}-sibling/file.txt",
        str(tmp_path),
    ):
        assert policy.path_problem(outside) is not None, outside
    assert "not an absolute path" in (policy.path_problem("data/file.txt") or "")
    # A file: URI is no path to the connector's own open(): it reads as a relative path.
    assert policy.path_problem(f"file://{allowed}/a.txt", PathKind.FILE) is not None
    assert policy.path_problem(f"{allowed}/a\x00b") is not None


def test_symbolic_links_may_not_lead_out(allowed: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    os.symlink(outside, allowed / "link")
    policy = WorkerPolicy(allowed_paths=(str(allowed),))
    assert policy.path_problem(str(allowed / "link" / "file.txt")) is not None
    # An allowed directory given through a link: paths are checked as written and as resolved, so
    # they must be written under the directory as configured.
    os.symlink(allowed, tmp_path / "alias")
    assert WorkerPolicy(allowed_paths=(str(tmp_path / "alias"),)).path_problem(str(allowed / "f")) is not None
    assert (
        WorkerPolicy(allowed_paths=(str(tmp_path / "alias"),)).path_problem(str(tmp_path / "alias" / "f"))
        is None
    )


def test_uri_paths(allowed: Path) -> None:
    policy = WorkerPolicy(allowed_paths=(str(allowed),))
    assert policy.path_problem(f"file://{allowed}/lake", PathKind.URI) is None
    assert policy.path_problem(f"file:{allowed}/lake", PathKind.URI) is None
    assert policy.path_problem(f"file://localhost{allowed}/lake", PathKind.URI) is None
    assert policy.path_problem(f"{allowed}/lake", PathKind.URI) is None
    for refused in (
        "s3a://bucket/lake",
        "hdfs://namenode/lake",
        f"file://otherhost{allowed}/lake",
        f"file://{allowed}/%2e%2e/escape",
        "file:///etc",
        "file:relative/lake",
    ):
        assert policy.path_problem(refused, PathKind.URI) is not None, refused
    assert "not a local path" in (policy.path_problem("s3a://bucket/lake", PathKind.URI) or "")


def test_path_errors_cover_declared_keys_only(allowed: Path) -> None:
    policy = WorkerPolicy(allowed_paths=(str(allowed),))
    definition = source_config_def()
    assert definition.keys()["file"].path_kind is PathKind.FILE
    assert path_errors(definition, [{"file": str(allowed / "in.txt"), "topic": "/etc/passwd"}], policy) == {}
    refused = path_errors(definition, [{"file": " "}, {"file": "/etc/passwd"}], policy)
    assert list(refused) == ["file"]


def test_validation_confines_file_connectors(registry: PluginRegistry, allowed: Path) -> None:
    policy = WorkerPolicy.from_worker_config({"connector.allowed.paths": str(allowed)})
    source = {"name": "in", "connector.class": "FileStreamSource", "topic": "t"}
    errors = _errors(validate_connector_config(registry, {**source, "file": "/etc/passwd"}, policy=policy))
    assert list(errors) == ["file"]
    assert "/etc/passwd is outside the directories connector.allowed.paths allows" in errors["file"][0]
    assert (
        validate_connector_config(
            registry, {**source, "file": f"{allowed}/in.txt"}, policy=policy
        ).error_count
        == 0
    )
    sink = {"name": "out", "connector.class": "FileStreamSink", "topics": "t"}
    assert list(
        _errors(validate_connector_config(registry, {**sink, "file": f"{allowed}/../x"}, policy=policy))
    ) == ["file"]
    lake = {"name": "lake", "connector.class": "SparkFileSink", "topics": "t"}
    assert (
        validate_connector_config(
            registry, {**lake, "path": f"file://{allowed}/lake"}, policy=policy
        ).error_count
        == 0
    )
    errors = _errors(
        validate_connector_config(registry, {**lake, "path": "s3a://bucket/lake"}, policy=policy)
    )
    assert list(errors) == ["path"]
    # Without allowed paths nothing is confined.
    assert validate_connector_config(registry, {**source, "file": "/etc/passwd"}).error_count == 0
