"""validate_connector_config, which applies the rules of Kafka's AbstractHerder.validateConnectorConfig,
and password_keys."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sluiceway.connect import (
    ConfigDef,
    ConfigType,
    ConfigValue,
    Password,
    PluginRegistry,
    SourceConnector,
    Task,
    password_keys,
    validate_connector_config,
)
from sluiceway.connect.framework_config import (
    common_config_def,
    source_config_def,
)
from sluiceway.connect.sink_framework_config import sink_config_def
from sluiceway.connect.validation import (
    NOT_SUPPORTED_YET,
    SINK_TOPICS_BOTH_MESSAGE,
    SINK_TOPICS_MISSING_MESSAGE,
    ConfigInfos,
)
from sluiceway.connect.worker_policy import WorkerPolicy
from sluiceway_executor.connectors.datagen import DataGenSourceTask


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover()


def datagen(**extra: str) -> dict[str, str]:
    return {"name": "gen", "connector.class": "DataGenSource", "topic": "t", **extra}


def file_sink(**extra: str) -> dict[str, str]:
    return {"name": "out", "connector.class": "FileStreamSink", "file": "/tmp/out.txt", **extra}


def value_of(infos: ConfigInfos, name: str) -> ConfigValue:
    return next(info.value for info in infos.configs if info.value.name == name)


def test_valid_source_config_has_no_errors(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, datagen(**{"tasks.max": "3"}))
    assert infos.error_count == 0
    assert infos.errors() == {}
    assert infos.plugin_class_name == "sluiceway_executor.connectors.datagen.DataGenSourceConnector"
    names = [info.value.name for info in infos.configs]
    # Framework keys first (common, then source), then the plugin's own.
    assert names[:3] == ["name", "connector.class", "tasks.max"]
    assert names.index("topic.creation.groups") < names.index("topic")
    assert value_of(infos, "tasks.max").value == 3
    assert value_of(infos, "max.records").value == -1
    assert infos.groups[:2] == ["Common", "Transforms"]
    assert "DataGen" in infos.groups
    assert all(info.definition is not None for info in infos.configs)


def test_missing_connector_class(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, {"name": "x"})
    (message,) = infos.errors()["connector.class"]
    assert message.startswith("required, and not set: The connector plugin to run")
    assert message.endswith(
        "Installed: DataGenSource, FileStreamSink, FileStreamSource, JdbcSink, JdbcSource, SparkFileSink"
    )
    assert infos.error_count == 1
    assert infos.plugin_class_name == ""
    assert {info.value.name for info in infos.configs} == set(common_config_def().keys())


def test_empty_connector_class(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, {"name": "x", "connector.class": ""})
    assert list(infos.errors()) == ["connector.class"]


def test_unknown_connector_class_validates_only_common_keys(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, {"name": "x", "connector.class": "Nope", "tasks.max": "0"})
    errors = infos.errors()
    assert set(errors) == {"connector.class", "tasks.max"}
    assert errors["connector.class"][0].startswith("'Nope' is not an installed connector plugin. Installed: ")
    assert infos.plugin_class_name == "Nope"
    assert {info.value.name for info in infos.configs} == set(common_config_def().keys())
    assert infos.error_count == 2


@pytest.mark.parametrize(
    ("tasks_max", "message"),
    [
        ("0", "the lowest accepted value is 1 (got 0)"),
        ("abc", "not a decimal integer (got abc)"),
        (
            "4294967296",
            "does not fit in INT, which holds -2147483648 to 2147483647 (got 4294967296)",
        ),
    ],
)
def test_bad_tasks_max(registry: PluginRegistry, tasks_max: str, message: str) -> None:
    infos = validate_connector_config(registry, datagen(**{"tasks.max": tasks_max}))
    assert infos.errors() == {"tasks.max": [message]}
    assert infos.error_count == 1


def test_bad_connector_name(registry: PluginRegistry) -> None:
    for bad in ("", "   ", "a/b", "a\tb"):
        assert "name" in validate_connector_config(registry, datagen(name=bad)).errors(), repr(bad)
    assert (
        "name"
        in validate_connector_config(registry, {"connector.class": "DataGenSource", "topic": "t"}).errors()
    )


def test_plugin_field_errors(registry: PluginRegistry) -> None:
    infos = validate_connector_config(
        registry, datagen(**{"records.per.sec": "-1", "record.size.bytes": "0"})
    )
    assert infos.errors() == {
        "records.per.sec": ["the lowest accepted value is 0 (got -1.0)"],
        "record.size.bytes": ["the lowest accepted value is 1 (got 0)"],
    }
    assert infos.error_count == 2
    missing_topic = validate_connector_config(registry, {"name": "g", "connector.class": "DataGenSource"})
    assert list(missing_topic.errors()) == ["topic"]


def test_spark_file_sink_format(registry: PluginRegistry) -> None:
    base = {"name": "lake", "connector.class": "SparkFileSink", "path": "/tmp/lake", "topics": "a"}
    infos = validate_connector_config(registry, {**base, "format": "xml"})
    assert list(infos.errors()) == ["format"]
    assert "parquet, json, csv, orc" in infos.errors()["format"][0]
    assert validate_connector_config(registry, {**base, "format": "JSON"}).error_count == 0
    assert list(validate_connector_config(registry, {**base, "partition.by": "a,,b"}).errors()) == [
        "partition.by"
    ]


@pytest.mark.parametrize(
    ("path", "ok"),
    [("/tmp/lake", True), ("file:///tmp/lake", True), ("hdfs://nn:8020/lake", True), ("lake", False)],
)
def test_spark_file_sink_path_is_absolute_or_a_uri(registry: PluginRegistry, path: str, ok: bool) -> None:
    infos = validate_connector_config(
        registry, {"name": "lake", "connector.class": "SparkFileSink", "path": path, "topics": "a"}
    )
    assert (infos.error_count == 0) is ok
    if not ok:
        assert "must be an absolute path or a URI" in infos.errors()["path"][0]


def test_sink_needs_topics_or_regex(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, file_sink())
    # One problem, one error: on topics only (Kafka repeats it on topics.regex).
    assert infos.errors() == {"topics": [SINK_TOPICS_MISSING_MESSAGE]}
    assert infos.error_count == 1
    assert validate_connector_config(registry, file_sink(topics=" ")).error_count == 1


def test_sink_topics_and_regex_are_exclusive(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, file_sink(topics="a", **{"topics.regex": "a.*"}))
    assert infos.errors() == {"topics": [SINK_TOPICS_BOTH_MESSAGE]}


def test_sink_with_only_one_of_them_is_valid(registry: PluginRegistry) -> None:
    assert validate_connector_config(registry, file_sink(topics="a,b")).error_count == 0
    assert validate_connector_config(registry, file_sink(**{"topics.regex": "orders-.*"})).error_count == 0


def test_sink_regex_must_compile(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, file_sink(**{"topics.regex": "(oops"}))
    assert list(infos.errors()) == ["topics.regex"]
    assert "not a valid Python regular expression" in infos.errors()["topics.regex"][0]


def test_errors_tolerance_all_on_a_dataframe_sink_with_a_dead_letter_topic_is_valid(
    registry: PluginRegistry,
) -> None:
    config = {
        "name": "lake",
        "connector.class": "SparkFileSink",
        "path": "/tmp/lake",
        "topics": "orders",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.log.include.messages": "true",
        "errors.deadletterqueue.topic.name": "orders-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }
    assert validate_connector_config(registry, config).errors() == {}


@pytest.mark.parametrize(
    ("reads", "where"),
    [({"topics": "orders, orders-dlq"}, "topics"), ({"topics.regex": "orders.*"}, "topics.regex")],
)
def test_a_sink_may_not_read_its_own_dead_letter_topic(
    registry: PluginRegistry, reads: dict[str, str], where: str
) -> None:
    config = file_sink(**reads, **{"errors.deadletterqueue.topic.name": "orders-dlq"})
    errors = validate_connector_config(registry, config).errors()
    assert list(errors) == ["errors.deadletterqueue.topic.name"]
    assert (
        f"the dead-letter topic orders-dlq is one this connector reads ({where})"
        in errors["errors.deadletterqueue.topic.name"][0]
    )


def test_errors_tolerance_all_is_taken_by_every_kind_of_task(registry: PluginRegistry) -> None:
    # DataGenSource's tasks give a batch as a DataFrame; FileStreamSink's and FileStreamSource's
    # take and give records one by one, their batches converted (and checked) in Spark all the same.
    tolerant = {"errors.tolerance": "all"}
    assert validate_connector_config(registry, datagen(**tolerant)).error_count == 0
    assert validate_connector_config(registry, file_sink(topics="a", **tolerant)).error_count == 0
    source = {"name": "in", "connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t"}
    assert validate_connector_config(registry, {**source, **tolerant}).error_count == 0
    assert validate_connector_config(registry, datagen(**{"errors.tolerance": "none"})).error_count == 0


# Each key whose feature Sluiceway lacks, a value that differs from its default, and the default (or
# an equivalent spelling of it) given explicitly.
NOT_SUPPORTED_CASES = [
    ("header.converter", "org.apache.kafka.connect.storage.StringConverter", None, "unset"),
    ("config.action.reload", "none", "restart", "at restart"),
    ("transaction.boundary", "interval", "Poll", "at poll"),
    ("transaction.boundary.interval.ms", "1000", None, "unset"),
]


def _config_for(key: str, value: str | None) -> dict[str, str]:
    extra = {} if value is None else {key: value}
    if key.startswith("errors.deadletterqueue."):
        return file_sink(topics="a", **extra)
    return datagen(**extra)


def test_not_supported_cases_cover_the_table() -> None:
    assert {case[0] for case in NOT_SUPPORTED_CASES} == set(NOT_SUPPORTED_YET)


@pytest.mark.parametrize(("key", "other", "default", "keep"), NOT_SUPPORTED_CASES)
def test_a_not_supported_key_refuses_all_but_its_default(
    registry: PluginRegistry, key: str, other: str, default: str | None, keep: str
) -> None:
    refused = validate_connector_config(registry, _config_for(key, other))
    assert refused.errors() == {key: [f"not supported yet: {NOT_SUPPORTED_YET[key]}; leave {key} {keep}"]}
    assert refused.error_count == 1
    assert validate_connector_config(registry, _config_for(key, default)).error_count == 0
    assert validate_connector_config(registry, _config_for(key, None)).error_count == 0


def test_not_supported_keys_are_refused_without_a_known_plugin(registry: PluginRegistry) -> None:
    infos = validate_connector_config(
        registry, {"name": "x", "connector.class": "Nope", "config.action.reload": "none"}
    )
    assert set(infos.errors()) == {"connector.class", "config.action.reload"}
    assert infos.errors()["config.action.reload"][0].startswith("not supported yet: Sluiceway's config")
    assert infos.errors()["config.action.reload"][0].endswith("leave config.action.reload at restart")


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("errors.retry.timeout", "-1", True),
        ("errors.retry.timeout", "0", True),
        ("errors.retry.timeout", "30000", True),
        ("errors.retry.timeout", "-2", False),
        ("errors.retry.timeout", "soon", False),
        ("errors.retry.delay.max.ms", "1", True),
        ("errors.retry.delay.max.ms", "0", False),
    ],
)
def test_retry_settings_take_kafkas_ranges(
    registry: PluginRegistry, key: str, value: str, accepted: bool
) -> None:
    errors = validate_connector_config(registry, datagen(**{key: value})).errors()
    assert (errors == {}) is accepted, errors
    if not accepted:
        assert list(errors) == [key]


def test_an_invalid_value_of_a_not_supported_key_gets_only_its_own_error(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, datagen(**{"errors.tolerance": "some"}))
    assert list(infos.errors()) == ["errors.tolerance"]
    assert infos.error_count == 1
    assert "not supported yet" not in infos.errors()["errors.tolerance"][0]


def test_error_count_counts_every_message(registry: PluginRegistry) -> None:
    infos = validate_connector_config(
        registry, {"connector.class": "FileStreamSink", "tasks.max": "-3", "errors.tolerance": "some"}
    )
    # name missing, file missing, tasks.max, errors.tolerance, and one for topics/topics.regex.
    assert infos.error_count == 5
    assert infos.error_count == sum(len(m) for m in infos.errors().values())


def test_exactly_once_required_is_refused(registry: PluginRegistry) -> None:
    assert (
        validate_connector_config(registry, datagen(**{"exactly.once.support": "Requested"})).error_count == 0
    )
    infos = validate_connector_config(registry, datagen(**{"exactly.once.support": "required"}))
    assert list(infos.errors()) == ["exactly.once.support"]


def test_heartbeat_keys(registry: PluginRegistry) -> None:
    ok = validate_connector_config(
        registry, datagen(**{"heartbeat.interval.ms": "60000", "heartbeat.records.topic": "hb"})
    )
    assert ok.error_count == 0
    assert value_of(ok, "heartbeat.interval.ms").value == 60000
    bad = validate_connector_config(
        registry, datagen(**{"heartbeat.interval.ms": "-1", "heartbeat.records.topic": "hb"})
    )
    assert set(bad.errors()) == {"heartbeat.interval.ms"}


@pytest.mark.parametrize("empty", ["", "  "])
def test_empty_worker_fallback_keys_read_as_unset(registry: PluginRegistry, empty: str) -> None:
    # KIP-910 and docs/CONFIGURATION.md: an empty heartbeat.* or task.restart.* value means the worker's.
    keys = [
        "heartbeat.interval.ms",
        "heartbeat.records.topic",
        "task.restart.enable",
        "task.restart.backoff.initial.ms",
        "task.restart.backoff.max.ms",
        "task.restart.max.attempts",
    ]
    infos = validate_connector_config(registry, datagen(**dict.fromkeys(keys, empty)))
    assert infos.error_count == 0, infos.errors()
    assert all(value_of(infos, key).value is None for key in keys)
    # Also for a sink (the restart keys) and without a known plugin (only the common keys).
    sink = file_sink(topics="t", **dict.fromkeys(keys[2:], empty))
    assert validate_connector_config(registry, sink).error_count == 0
    unknown = {"name": "x", "connector.class": "no.such.Plugin", "task.restart.max.attempts": empty}
    assert set(validate_connector_config(registry, unknown).errors()) == {"connector.class"}


def test_restart_keys_are_optional_and_checked(registry: PluginRegistry) -> None:
    unset = validate_connector_config(registry, datagen())
    assert value_of(unset, "task.restart.enable").value is None  # the worker's value applies
    ok = validate_connector_config(
        registry,
        datagen(**{"task.restart.enable": "false", "task.restart.max.attempts": "3"}),
    )
    assert ok.error_count == 0 and value_of(ok, "task.restart.max.attempts").value == 3
    bad = validate_connector_config(
        registry,
        file_sink(
            **{
                "topics": "t",
                "task.restart.enable": "maybe",
                "task.restart.backoff.initial.ms": "0",
                "task.restart.backoff.max.ms": "x",
                "task.restart.max.attempts": "-2",
            }
        ),
    )
    assert set(bad.errors()) == {
        "task.restart.enable",
        "task.restart.backoff.initial.ms",
        "task.restart.backoff.max.ms",
        "task.restart.max.attempts",
    }


def test_topic_creation_keys_when_used(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, datagen(**{"topic.creation.groups": "compacted"}))
    assert set(infos.errors()) == {
        "topic.creation.default.replication.factor",
        "topic.creation.default.partitions",
    }
    good = datagen(
        **{
            "topic.creation.default.replication.factor": "-1",
            "topic.creation.default.partitions": "3",
            "topic.creation.groups": "compacted",
            "topic.creation.compacted.include": "orders-.*, (bad",
            "topic.creation.compacted.partitions": "0",
        }
    )
    infos = validate_connector_config(registry, good)
    assert set(infos.errors()) == {"topic.creation.compacted.include", "topic.creation.compacted.partitions"}
    assert value_of(infos, "topic.creation.compacted.replication.factor").value == -1
    # Ignored when the worker has topic creation disabled.
    assert (
        validate_connector_config(registry, good, policy=WorkerPolicy(topic_creation=False)).error_count == 0
    )


TOPIC_CREATION_BASE = {
    "topic.creation.default.replication.factor": "-1",
    "topic.creation.default.partitions": "3",
    "topic.creation.groups": "g",
    "topic.creation.g.include": "g-.*",
}


@pytest.mark.parametrize(
    ("change", "key", "fragment"),
    [
        ({"topic.creation.g.exclude": "ok-.*, [bad"}, "topic.creation.g.exclude", "regular expression"),
        ({"topic.creation.default.partitions": "0"}, "topic.creation.default.partitions", "1 or more"),
        (
            {"topic.creation.default.replication.factor": "0"},
            "topic.creation.default.replication.factor",
            "1 or more",
        ),
        ({"topic.creation.g.replication.factor": "0"}, "topic.creation.g.replication.factor", "1 or more"),
        ({"topic.creation.g.partitions": "-2"}, "topic.creation.g.partitions", "1 or more"),
        (
            {"topic.creation.default.replication.factor": None},
            "topic.creation.default.replication.factor",
            "required, and not set",
        ),
        (
            {"topic.creation.default.partitions": None},
            "topic.creation.default.partitions",
            "required, and not set",
        ),
        ({"topic.creation.groups": "g, h, g"}, "topic.creation.groups", "listed again: g"),
    ],
    ids=[
        "bad-exclude-regex",
        "default-partitions-0",
        "default-replication-factor-0",
        "group-replication-factor-0",
        "group-partitions-negative",
        "default-replication-factor-missing",
        "default-partitions-missing",
        "duplicate-group",
    ],
)
def test_each_topic_creation_rule_is_checked_alone(
    registry: PluginRegistry, change: dict[str, str | None], key: str, fragment: str
) -> None:
    assert validate_connector_config(registry, datagen(**TOPIC_CREATION_BASE)).error_count == 0
    config = {**TOPIC_CREATION_BASE, **change}
    infos = validate_connector_config(registry, datagen(**{k: v for k, v in config.items() if v is not None}))
    errors = infos.errors()
    assert set(errors) == {key}
    assert fragment in " ".join(errors[key])


def test_listing_default_as_a_group_is_accepted(registry: PluginRegistry) -> None:
    infos = validate_connector_config(
        registry, datagen(**{**TOPIC_CREATION_BASE, "topic.creation.groups": "default,g"})
    )
    assert infos.error_count == 0


# The rule syntax of a draft of KIP-158 (001_... seed, as struck out there), and keys no group reads.
DRAFT_RULES = {
    "topic.creation": "firstRule,defaultRule",
    "topic.creation.firstRule.regex": "MyPrefix.*",
    "topic.creation.firstRule.replication.factor": "3",
    "topic.creation.defaultRule.regex": ".*",
    "topic.creation.defaultRule.partitions": "5",
}


@pytest.mark.parametrize("topic_creation", [True, False], ids=["creation-on", "creation-off"])
def test_draft_rule_keys_are_refused_on_a_source_naming_each_key(
    registry: PluginRegistry, topic_creation: bool
) -> None:
    config = datagen(**TOPIC_CREATION_BASE, **DRAFT_RULES)
    errors = validate_connector_config(
        registry, config, policy=WorkerPolicy(topic_creation=topic_creation)
    ).errors()
    assert set(errors) == set(DRAFT_RULES)
    assert "rule list of a draft of KIP-158" in errors["topic.creation"][0]
    assert "topic.creation.groups" in errors["topic.creation"][0]
    assert "rule regex" in errors["topic.creation.firstRule.regex"][0]
    assert "'firstRule' in topic.creation.groups" in errors["topic.creation.firstRule.regex"][0]
    assert "group 'defaultRule' is not listed" in errors["topic.creation.defaultRule.partitions"][0]


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("topic.creation", "rule list of a draft"),
        ("topic.creation.g.regex", "topic.creation.g.include and .exclude"),
        ("topic.creation.default.regex", "topic.creation.default.include"),
        ("topic.creation.h.partitions", "group 'h' is not listed in topic.creation.groups"),
        ("topic.creation.h.cleanup.policy", "group 'h' is not listed"),
        ("topic.creation..partitions", "group '' is not listed"),
        ("topic.creation.enable", "is a worker setting"),
        ("topic.creation.default", "not a topic creation key"),
        ("topic.creation.", "not a topic creation key"),
    ],
)
def test_each_unread_topic_creation_key_is_refused(registry: PluginRegistry, key: str, fragment: str) -> None:
    errors = validate_connector_config(registry, datagen(**TOPIC_CREATION_BASE, **{key: "x"})).errors()
    assert set(errors) == {key}
    assert fragment in errors[key][0]


def test_keys_of_declared_groups_are_read(registry: PluginRegistry) -> None:
    # Dotted group names: a key belongs to the longest listed group it starts with.
    config = datagen(
        **{
            **TOPIC_CREATION_BASE,
            "topic.creation.groups": "g,g.compact",
            "topic.creation.g.cleanup.policy": "delete",
            "topic.creation.g.compact.include": "c-.*",
            "topic.creation.g.compact.cleanup.policy": "compact",
            "topic.creation.default.min.insync.replicas": "1",
        },
    )
    assert validate_connector_config(registry, config).error_count == 0


def test_sinks_ignore_topic_creation_keys_as_kafka_does(registry: PluginRegistry) -> None:
    # No topic.creation* key means anything to a sink, so none suggests a topic is created.
    config = file_sink(topics="t", **DRAFT_RULES, **{"topic.creation.default.partitions": "3"})
    assert validate_connector_config(registry, config).error_count == 0


def test_validate_against_a_named_plugin(registry: PluginRegistry) -> None:
    config = {"name": "gen", "topic": "t"}
    infos = validate_connector_config(registry, config, plugin="DataGenSource")
    assert infos.error_count == 0
    assert infos.plugin_class_name == "sluiceway_executor.connectors.datagen.DataGenSourceConnector"
    mismatch = validate_connector_config(
        registry, {**config, "connector.class": "FileStreamSource"}, "DataGenSource"
    )
    assert mismatch.errors()["connector.class"] == [
        "the config names plugin FileStreamSource, but the request is for DataGenSource"
    ]
    same = validate_connector_config(
        registry,
        {**config, "connector.class": "sluiceway_executor.connectors.datagen.DataGenSourceConnector"},
        "DataGenSource",
    )
    assert same.error_count == 0


def test_null_values_are_errors(registry: PluginRegistry) -> None:
    config: dict[str, str | None] = {**datagen(), "records.per.sec": None}
    infos = validate_connector_config(registry, config)  # type: ignore[arg-type]
    assert infos.errors() == {"records.per.sec": ["a config value may not be null"]}


class ExplodingConnector(SourceConnector):
    def version(self) -> str:
        return "0"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[Task]:
        return DataGenSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def config(self) -> ConfigDef:
        return ConfigDef().define("api.key", ConfigType.PASSWORD, None).define("level", ConfigType.INT, 1)

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        raise RuntimeError("the backend is down")


def test_plugin_validate_raising_is_an_error_on_connector_class() -> None:
    registry = PluginRegistry.of(ExplodingConnector)
    infos = validate_connector_config(registry, {"name": "x", "connector.class": "Exploding", "level": "2"})
    assert list(infos.errors()) == ["connector.class"]
    assert "validate() failed: RuntimeError: the backend is down" in infos.errors()["connector.class"][0]
    # The plugin's keys are still listed, with their definitions.
    assert any(info.definition is not None and info.definition.name == "level" for info in infos.configs)


def test_password_values_stay_raw_and_are_listed_for_masking(registry: PluginRegistry) -> None:
    config = {
        "name": "db",
        "connector.class": "JdbcSource",
        "connection.url": "jdbc:postgresql://db/app",
        "connection.password": "hunter2",
        "table": "orders",
        "incrementing.column.name": "id",
        "producer.override.sasl.jaas.config": "secret",
        "producer.override.acks": "all",
    }
    infos = validate_connector_config(registry, config)
    assert infos.error_count == 0
    assert value_of(infos, "connection.password").value == Password("hunter2")
    assert password_keys(registry, config) == {"connection.password", "producer.override.sasl.jaas.config"}
    assert password_keys(PluginRegistry.of(ExplodingConnector), {"connector.class": "Exploding"}) == {
        "api.key"
    }
    # An unknown plugin's secret-looking keys are masked all the same.
    assert password_keys(registry, {"connector.class": "Nope", "db.password": "x", "db.host": "h"}) == {
        "db.password"
    }


def test_framework_definitions() -> None:
    common = common_config_def().keys()
    assert common["tasks.max"].default == 1
    assert common["tasks.max"].valid_values() == "[1,...]"
    assert common["name"].required
    assert common["connector.class"].required
    assert common["errors.tolerance"].default == "none"
    assert common["transforms"].default == []
    source = source_config_def().keys()
    assert source["heartbeat.interval.ms"].type is ConfigType.LONG
    assert source["heartbeat.interval.ms"].default is None
    assert source["offsets.storage.topic"].default is None
    sink = sink_config_def().keys()
    assert sink["topics"].default == []
    assert sink["topics.regex"].default == ""
    assert sink["errors.deadletterqueue.topic.replication.factor"].default == 3
    assert "topics" not in source
    assert "topic.creation.groups" not in sink
