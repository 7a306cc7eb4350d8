"""Plugin discovery from entry points and Kafka's alias rules."""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Mapping

import pytest

import sluiceway
from sluiceway.connect import (
    ConfigDef,
    PluginNotFoundError,
    PluginRegistry,
    PluginType,
    SinkConnector,
    SourceConnector,
    Task,
)
from sluiceway.connect import plugins as plugins_module
from sluiceway_executor.connectors.datagen import DataGenSourceConnector, DataGenSourceTask

BUILT_INS = {
    "sluiceway_executor.connectors.datagen.DataGenSourceConnector": PluginType.SOURCE,
    "sluiceway_executor.connectors.filestream.FileStreamSourceConnector": PluginType.SOURCE,
    "sluiceway_executor.connectors.filestream.FileStreamSinkConnector": PluginType.SINK,
    "sluiceway_executor.connectors.spark_file.SparkFileSinkConnector": PluginType.SINK,
    "sluiceway_executor.connectors.jdbc_source.JdbcSourceConnector": PluginType.SOURCE,
    "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector": PluginType.SINK,
}


class _Source(SourceConnector):
    def version(self) -> str:
        return "1.2.3"

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


class _Sink(SinkConnector):
    def version(self) -> str:
        raise RuntimeError("no version today")

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


class First:
    class MirrorConnector(_Source):
        pass

    class Mirror(_Source):
        pass


class Second:
    class MirrorConnector(_Sink):
        pass


class OrdersConnector(_Source):
    pass


def test_discover_finds_all_built_ins() -> None:
    registry = PluginRegistry.discover()
    found = {desc.class_name: desc for desc in registry.connectors()}
    for class_name, plugin_type in BUILT_INS.items():
        assert class_name in found, class_name
        assert found[class_name].type is plugin_type
        assert found[class_name].version == sluiceway.__version__
    names = [desc.class_name for desc in registry.connectors()]
    assert names == sorted(names)


@pytest.mark.parametrize(
    ("alias", "class_name"),
    [
        ("DataGenSource", "sluiceway_executor.connectors.datagen.DataGenSourceConnector"),
        ("DataGenSourceConnector", "sluiceway_executor.connectors.datagen.DataGenSourceConnector"),
        ("FileStreamSource", "sluiceway_executor.connectors.filestream.FileStreamSourceConnector"),
        ("FileStreamSink", "sluiceway_executor.connectors.filestream.FileStreamSinkConnector"),
        ("FileStreamSinkConnector", "sluiceway_executor.connectors.filestream.FileStreamSinkConnector"),
        ("SparkFileSink", "sluiceway_executor.connectors.spark_file.SparkFileSinkConnector"),
        ("JdbcSource", "sluiceway_executor.connectors.jdbc_source.JdbcSourceConnector"),
        ("JdbcSourceConnector", "sluiceway_executor.connectors.jdbc_source.JdbcSourceConnector"),
        ("JdbcSink", "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector"),
        (" JdbcSink ", "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector"),
        (
            "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector",
            "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector",
        ),
        # Kafka's JDBC connectors' classes, and the class paths from before the JDBC module split.
        (
            "io.confluent.connect.jdbc.JdbcSourceConnector",
            "sluiceway_executor.connectors.jdbc_source.JdbcSourceConnector",
        ),
        (
            "io.confluent.connect.jdbc.JdbcSinkConnector",
            "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector",
        ),
        (
            "sluiceway_executor.connectors.jdbc.JdbcSourceConnector",
            "sluiceway_executor.connectors.jdbc_source.JdbcSourceConnector",
        ),
        (
            "sluiceway_executor.connectors.jdbc.JdbcSinkConnector",
            "sluiceway_executor.connectors.jdbc_sink.JdbcSinkConnector",
        ),
    ],
)
def test_built_in_names_resolve(alias: str, class_name: str) -> None:
    assert PluginRegistry.discover().resolve(alias).class_name == class_name


def test_new_instance_and_aliases() -> None:
    desc = PluginRegistry.of(DataGenSourceConnector).resolve("DataGenSource")
    assert desc.aliases == ("DataGenSourceConnector", "DataGenSource")
    assert isinstance(desc.new_instance(), DataGenSourceConnector)


def test_alias_shared_by_two_plugins_is_ambiguous() -> None:
    registry = PluginRegistry.of(First.MirrorConnector, Second.MirrorConnector, OrdersConnector)
    for alias in ("MirrorConnector", "Mirror"):
        with pytest.raises(PluginNotFoundError, match="ambiguous") as e:
            registry.resolve(alias)
        assert e.value.name == alias
        assert f"{__name__}.First.MirrorConnector" in str(e.value)
        assert f"{__name__}.Second.MirrorConnector" in str(e.value)
    # The full names still work, and other plugins keep their aliases.
    assert registry.resolve(f"{__name__}.Second.MirrorConnector").type is PluginType.SINK
    assert registry.resolve("Orders").class_name == f"{__name__}.OrdersConnector"


def test_pruned_name_colliding_with_a_simple_name_is_ambiguous() -> None:
    # "Mirror" is First.Mirror's simple name and First.MirrorConnector's pruned name.
    registry = PluginRegistry.of(First.MirrorConnector, First.Mirror)
    with pytest.raises(PluginNotFoundError, match="ambiguous"):
        registry.resolve("Mirror")
    assert registry.resolve("MirrorConnector").class_name == f"{__name__}.First.MirrorConnector"


def test_unknown_name_lists_available_plugins() -> None:
    registry = PluginRegistry.of(OrdersConnector)
    with pytest.raises(PluginNotFoundError) as e:
        registry.resolve("NoSuchThing")
    assert e.value.name == "NoSuchThing"
    assert str(e.value) == "'NoSuchThing' is not an installed connector plugin. Installed: Orders"
    with pytest.raises(PluginNotFoundError, match="must not be empty"):
        registry.resolve("  ")


def test_unregistered_dotted_path_outside_plugin_path_is_refused() -> None:
    # Installed and importable, but neither registered nor in plugin.path: refused, and the
    # registered plugins are listed.
    registry = PluginRegistry.of(OrdersConnector)
    for dotted in (
        "sluiceway_executor.connectors.datagen.DataGenSourceConnector",
        f"{__name__}.First.MirrorConnector",
    ):
        with pytest.raises(
            PluginNotFoundError, match=r"neither an installed connector plugin nor in plugin\.path"
        ):
            registry.resolve(dotted)
    with pytest.raises(PluginNotFoundError, match=r"Installed: Orders$"):
        registry.resolve("sluiceway_executor.connectors.datagen.DataGenSourceConnector")
    # The registered class is found by its full name without importing anything.
    assert registry.resolve(f"{__name__}.OrdersConnector").cls is OrdersConnector


@pytest.mark.parametrize(
    "dotted",
    [
        "no_such_module_xyz.Thing",
        "sluiceway_executor.connectors.datagen.NoSuchClass",
        "sluiceway_executor.connectors.datagen.DataGenSourceTask",  # not a connector
        "sluiceway.connect.SourceConnector",  # abstract
    ],
)
def test_dotted_paths_that_are_not_plugins(dotted: str) -> None:
    with pytest.raises(
        PluginNotFoundError, match=r"neither an installed connector plugin nor in plugin\.path"
    ):
        PluginRegistry.of().resolve(dotted)


def test_version_failure_is_undefined() -> None:
    assert PluginRegistry.of(Second.MirrorConnector).connectors()[0].version == "undefined"
    assert PluginRegistry.of(OrdersConnector).connectors()[0].version == "1.2.3"


def test_of_rejects_non_plugins() -> None:
    with pytest.raises(TypeError, match="is abstract"):
        PluginRegistry.of(SourceConnector)  # type: ignore[type-abstract]
    with pytest.raises(TypeError, match="not a subclass"):
        PluginRegistry.of(DataGenSourceTask)  # type: ignore[arg-type]


def test_broken_entry_points_are_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    group = "sluiceway.test.connectors"
    entry_points = [
        importlib.metadata.EntryPoint("Good", f"{__name__}:OrdersConnector", group),
        importlib.metadata.EntryPoint("Missing", "no_such_module_xyz:Nope", group),
        importlib.metadata.EntryPoint(
            "NotAConnector", "sluiceway_executor.connectors.datagen:DataGenSourceTask", group
        ),
    ]

    def fake_entry_points(*, group: str) -> list[importlib.metadata.EntryPoint]:
        return [ep for ep in entry_points if ep.group == group]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    with caplog.at_level(logging.WARNING, logger=plugins_module.__name__):
        registry = PluginRegistry.discover(group)
    assert [d.class_name for d in registry.connectors()] == [f"{__name__}.OrdersConnector"]
    assert "Missing" in caplog.text
    assert "NotAConnector" in caplog.text
