"""How a connector.class value finds its plugin when it is not spelled exactly (case ignored, the
"did you mean" hint, the short names errors list), and the messages for a required key left unset
and for a sink that names no topics."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from sluiceway.connect import (
    ConfigDef,
    ConfigException,
    ConfigType,
    PluginNotFoundError,
    PluginRegistry,
    PluginType,
    SinkConnector,
    Task,
    validate_connector_config,
)
from sluiceway.connect.validation import SINK_TOPICS_MISSING_MESSAGE
from sluiceway_executor.connectors import BUILT_IN_CONNECTORS
from sluiceway_executor.connectors.datagen import DataGenSourceConnector, DataGenSourceTask
from sluiceway_executor.pipelines.loading import load_task_class
from sluiceway_executor.pipelines.spec import TaskSpec

DATAGEN = "sluiceway_executor.connectors.datagen.DataGenSourceConnector"
INSTALLED = "Installed: DataGenSource, FileStreamSink, FileStreamSource, JdbcSink, JdbcSource, SparkFileSink"


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover(built_in=BUILT_IN_CONNECTORS)


class _Sink(SinkConnector):
    def version(self) -> str:
        return "1"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[Task]:
        return DataGenSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def config(self) -> ConfigDef:
        return ConfigDef()


class Upper:
    class FooSinkConnector(_Sink):
        pass


class Lower:
    class FoosinkConnector(_Sink):
        pass


class Other:
    class FooSinkConnector(_Sink):
        pass


@pytest.mark.parametrize(
    "typed",
    ["datagensource", "DATAGENSOURCE", "dataGenSourceConnector", " datagensource ", DATAGEN.lower()],
)
def test_case_is_ignored_when_nothing_matches_exactly(registry: PluginRegistry, typed: str) -> None:
    assert registry.resolve(typed).class_name == DATAGEN


def test_every_built_in_short_name_resolves_in_lower_case(registry: PluginRegistry) -> None:
    for desc in registry.connectors():
        assert registry.resolve(desc.short_name.lower()) is desc
    assert registry.short_names() == INSTALLED.removeprefix("Installed: ").split(", ")


def test_names_that_differ_only_in_case_need_the_exact_case() -> None:
    registry = PluginRegistry.of(Upper.FooSinkConnector, Lower.FoosinkConnector)
    assert registry.resolve("FooSink").cls is Upper.FooSinkConnector
    assert registry.resolve("Foosink").cls is Lower.FoosinkConnector
    with pytest.raises(PluginNotFoundError) as e:
        registry.resolve("foosink")
    assert str(e.value) == (
        "'foosink' names more than one connector plugin when case is ignored: "
        f"{__name__}.Lower.FoosinkConnector, {__name__}.Upper.FooSinkConnector; "
        "give the name in its exact case, or the full class name"
    )


def test_an_alias_two_plugins_share_is_ambiguous_in_any_case() -> None:
    registry = PluginRegistry.of(Upper.FooSinkConnector, Other.FooSinkConnector)
    for typed in ("FooSink", "foosink"):
        with pytest.raises(PluginNotFoundError, match=r"ambiguous|more than one") as e:
            registry.resolve(typed)
        assert f"{__name__}.Other.FooSinkConnector" in str(e.value)
        assert f"{__name__}.Upper.FooSinkConnector" in str(e.value)
    # With no alias of their own, the error lists them by full class name.
    assert [d.short_name for d in registry.connectors()] == [
        f"{__name__}.Other.FooSinkConnector",
        f"{__name__}.Upper.FooSinkConnector",
    ]


def test_a_misspelt_name_gets_the_nearest_and_the_installed_short_names(registry: PluginRegistry) -> None:
    with pytest.raises(PluginNotFoundError) as e:
        registry.resolve("DataGenSorce")
    assert e.value.name == "DataGenSorce"
    assert str(e.value) == (
        f"'DataGenSorce' is not an installed connector plugin; did you mean DataGenSource? {INSTALLED}"
    )


@pytest.mark.parametrize(
    ("typed", "hint"),
    [
        ("datagensorce", "did you mean DataGenSource?"),
        ("jdbc", "did you mean JdbcSink or JdbcSource?"),
        ("Spark", "did you mean SparkFileSink?"),
        ("FileStreamSinkConector", "did you mean FileStreamSink?"),
        ("sluiceway_executor.connectors.datagen.DataGenSorceConnector", "did you mean DataGenSource?"),
    ],
)
def test_suggestions(registry: PluginRegistry, typed: str, hint: str) -> None:
    with pytest.raises(PluginNotFoundError) as e:
        registry.resolve(typed)
    assert f"; {hint} {INSTALLED}" in str(e.value)
    assert str(e.value).endswith(INSTALLED)


def test_no_suggestion_when_nothing_is_near(registry: PluginRegistry) -> None:
    with pytest.raises(PluginNotFoundError) as e:
        registry.resolve("Nope")
    assert str(e.value) == f"'Nope' is not an installed connector plugin. {INSTALLED}"
    with pytest.raises(PluginNotFoundError) as long:
        registry.resolve("x" * 10_000)
    assert "did you mean" not in str(long.value)
    assert "(10000 characters)" in str(long.value)


def test_validation_and_the_executor_resolve_the_same_way(registry: PluginRegistry) -> None:
    infos = validate_connector_config(
        registry, {"name": "g", "connector.class": "datagensource", "topic": "t"}
    )
    assert (infos.error_count, infos.plugin_class_name) == (0, DATAGEN)
    typo = validate_connector_config(registry, {"name": "g", "connector.class": "DataGenSorce", "topic": "t"})
    assert typo.errors()["connector.class"] == [
        f"'DataGenSorce' is not an installed connector plugin; did you mean DataGenSource? {INSTALLED}"
    ]
    spec = TaskSpec(
        name="connectors/g/tasks/0",
        connector="g",
        task_index=0,
        generation=1,
        connector_config={"connector.class": "datagensource", "topic": "t"},
        task_config={},
        paused=False,
        task_count=1,
    )
    plugin_type, cls = load_task_class(spec, registry)
    assert (plugin_type, cls) == (PluginType.SOURCE, DataGenSourceConnector().task_class())


def test_missing_connector_class_lists_the_plugins(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, {"name": "g"})
    assert infos.errors()["connector.class"] == [
        "required, and not set: The connector plugin to run, a subclass of "
        f"sluiceway.connect.SourceConnector or SinkConnector. {INSTALLED}"
    ]


def test_a_missing_required_key_says_what_it_is_for(registry: PluginRegistry) -> None:
    infos = validate_connector_config(registry, {"name": "g", "connector.class": "DataGenSource"})
    assert infos.errors() == {
        "topic": ["required, and not set: The topic to write the generated records to."]
    }


def _required(documentation: str) -> ConfigDef:
    return ConfigDef().define("k", ConfigType.STRING, documentation=documentation)


@pytest.mark.parametrize(
    ("documentation", "message"),
    [
        ("", "required, and not set (it has no default)"),
        ("Where rows go. Other details follow.", "required, and not set: Where rows go."),
        ("No full stop", "required, and not set: No full stop."),
        ("  Spread\n   over lines.\n More.", "required, and not set: Spread over lines."),
        (
            "A URL, e.g. Jdbc:x or i.e. Other. Then.",
            "required, and not set: A URL, e.g. Jdbc:x or i.e. Other.",
        ),
        ("Version 3.5 or later. Then.", "required, and not set: Version 3.5 or later."),
        ("word " * 100, "required, and not set: " + " ".join(["word"] * 32) + "…"),
    ],
)
def test_missing_message_is_the_first_sentence_bounded(documentation: str, message: str) -> None:
    (value,) = _required(documentation).validate({})
    assert value.errors == [message]
    with pytest.raises(ConfigException) as e:
        _required(documentation).parse({})
    assert str(e.value) == f"k: {message}"


def test_a_sink_without_topics_gets_one_error(registry: PluginRegistry) -> None:
    config = {"name": "out", "connector.class": "filestreamsink", "file": "/tmp/out.txt"}
    infos = validate_connector_config(registry, config)
    assert infos.errors() == {"topics": [SINK_TOPICS_MISSING_MESSAGE]}
    assert infos.error_count == 1
    assert SINK_TOPICS_MISSING_MESSAGE == (
        "a sink connector needs topics or topics.regex: the comma-separated names of the topics it "
        "reads, or a Python regular expression that their whole names match; neither is set"
    )
    named = validate_connector_config(registry, {"name": "out", "file": "/tmp/out.txt"}, "FileStreamSink")
    assert named.errors() == {"topics": [SINK_TOPICS_MISSING_MESSAGE]}
