"""A connector config's transforms and predicates as the control plane validates them: every key at
fault is named with what is wrong, Kafka's class names resolve, and connectors of every kind of task
take them."""

from __future__ import annotations

import pytest

from sluiceway.connect import PluginRegistry
from sluiceway.connect.transform_plugins import TransformPlugins
from sluiceway.connect.validation import validate_connector_config
from sluiceway_executor.connectors import BUILT_IN_CONNECTORS
from sluiceway_executor.transforms import BUILT_IN_PREDICATES, BUILT_IN_TRANSFORMS, built_in_plugins
from sluiceway_executor.transforms.field_transforms import InsertFieldValue
from sluiceway_executor.transforms.predicates import RecordIsTombstone
from tests.conftest import TEST_PLUGINS


@pytest.fixture
def registry() -> PluginRegistry:
    return PluginRegistry(BUILT_IN_CONNECTORS, (), built_in_plugins())


def datagen(**extra: str) -> dict[str, str]:
    return {"name": "gen", "connector.class": "DataGenSource", "topic": "t", **extra}


KAFKA_CHAIN = {
    "transforms": "insert,route,drop",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "origin",
    "transforms.insert.static.value": "dc1",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "copy-$1",
    "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.drop.predicate": "gone",
    "transforms.drop.negate": "false",
    "predicates": "gone",
    "predicates.gone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
}


def test_a_chain_copied_from_kafka_connect_validates(registry: PluginRegistry) -> None:
    assert validate_connector_config(registry, datagen(**KAFKA_CHAIN)).errors() == {}


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ({"transforms": "a", "transforms.a.type": "Nope"}, "transforms.a.type", "no transform is named Nope"),
        ({"transforms": "a"}, "transforms.a.type", "class of this alias is missing"),
        (
            {"transforms": "a", "transforms.a.type": "Cast$Value", "transforms.a.spec": "x:money"},
            "transforms.a.spec",
            "'money' is not a type to cast to",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Cast$Value"},
            "transforms.a.spec",
            "required, and not set",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
            "transforms.a.predicate",
            "no predicate of that alias",
        ),
        (
            {"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "yes"},
            "transforms.a.negate",
            "true or false",
        ),
        (
            {"predicates": "p", "predicates.p.type": "HasHeaderKey"},
            "predicates.p.name",
            "required, and not set",
        ),
        ({"transforms": "a,b,a"}, "transforms", "appears more than once"),
        (
            {"transforms": "q", "transforms.q.type": "Sql", "transforms.q.where": "value.id > 1 AND nope"},
            "transforms.q.where",
            "'nope' at line 1, column 18 is not a part of the record",
        ),
    ],
)
def test_each_key_at_fault_is_named(
    registry: PluginRegistry, extra: dict[str, str], key: str, message: str
) -> None:
    errors = validate_connector_config(registry, datagen(**extra)).errors()
    assert list(errors) == [key]
    assert message in errors[key][0]


def test_every_alias_is_checked_not_only_the_first(registry: PluginRegistry) -> None:
    extra = {
        "transforms": "a,b",
        "transforms.a.type": "Nope",
        "transforms.b.type": "MaskField$Value",
    }
    assert set(validate_connector_config(registry, datagen(**extra)).errors()) == {
        "transforms.a.type",
        "transforms.b.fields",
    }


def test_record_level_sources_and_sinks_take_transforms(registry: PluginRegistry) -> None:
    chain = {"transforms": "f", "transforms.f.type": "Filter"}
    source = {"name": "in", "connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t"}
    assert validate_connector_config(registry, {**source, **chain}).error_count == 0
    sink = {"name": "out", "connector.class": "FileStreamSink", "file": "/tmp/out.txt", "topics": "a"}
    assert validate_connector_config(registry, {**sink, **chain}).error_count == 0


def test_names_resolve_by_kafka_class_full_path_short_name_and_case() -> None:
    plugins = TransformPlugins(BUILT_IN_TRANSFORMS, BUILT_IN_PREDICATES)
    for name in (
        "org.apache.kafka.connect.transforms.InsertField$Value",
        "InsertField$Value",
        "InsertFieldValue",
        "insertfieldvalue",
        "sluiceway_executor.transforms.field_transforms.InsertFieldValue",
    ):
        assert plugins.transform(name) is InsertFieldValue, name
    assert plugins.predicate("RecordIsTombstone") is RecordIsTombstone


def test_a_record_level_plugin_in_plugin_path_is_validated_by_its_own_keys() -> None:
    registry = PluginRegistry(BUILT_IN_CONNECTORS, (str(TEST_PLUGINS),), built_in_plugins())
    good = {
        "transforms": "fp",
        "transforms.fp.type": "record_transforms.Fingerprint",
        "transforms.fp.drop": "a,b",
    }
    assert validate_connector_config(registry, datagen(**good)).error_count == 0
    bad = {**good, "transforms.fp.flaky.tries": "many"}
    errors = validate_connector_config(registry, datagen(**bad)).errors()
    assert list(errors) == ["transforms.fp.flaky.tries"]
    missing = {**good, "transforms.fp.type": "record_transforms.Nothing"}
    assert list(validate_connector_config(registry, datagen(**missing)).errors()) == ["transforms.fp.type"]
