"""SparkFileSink and Jdbc connectors: configs, task configs, SQL text; no Spark needed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sluiceway.connect import ConfigException, ConnectException, PluginRegistry, validate_connector_config
from sluiceway_executor.connectors.jdbc_sink import JdbcSinkConnector, sink_table_name
from sluiceway_executor.connectors.jdbc_source import JdbcSourceConnector, JdbcSourceTask
from sluiceway_executor.connectors.spark_file import SparkFileSinkConnector, SparkFileSinkTask


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.of(SparkFileSinkConnector, JdbcSourceConnector, JdbcSinkConnector)


def jdbc_source(**extra: str) -> dict[str, str]:
    return {
        "name": "db",
        "connector.class": "JdbcSource",
        "connection.url": "jdbc:postgresql://localhost:5432/app",
        "table": "orders",
        "incrementing.column.name": "id",
        **extra,
    }


def test_importing_plugins_does_not_import_spark() -> None:
    code = (
        "import sys, sluiceway_executor.connectors, sluiceway.connect;"
        "sys.exit(1 if any(m.split('.')[0] == 'pyspark' for m in sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_spark_file_sink_task_configs_and_task() -> None:
    connector = SparkFileSinkConnector()
    props = {"path": "/tmp/lake", "format": "CSV", "partition.by": "topic", "topics": "a"}
    connector.start(props)
    assert connector.task_configs(2) == [props, props]
    task = connector.task_class()()
    assert isinstance(task, SparkFileSinkTask)
    task.start(props)
    with pytest.raises(ConfigException):
        SparkFileSinkConnector().start({"format": "parquet"})


def test_jdbc_source_config(registry: PluginRegistry) -> None:
    assert validate_connector_config(registry, jdbc_source()).error_count == 0
    infos = validate_connector_config(
        registry,
        jdbc_source(**{"connection.url": "postgresql://x", "mode": "sometimes", "batch.max.rows": "0"}),
    )
    assert set(infos.errors()) == {"connection.url", "mode", "batch.max.rows"}
    missing_column = {k: v for k, v in jdbc_source().items() if k != "incrementing.column.name"}
    infos = validate_connector_config(registry, missing_column)
    assert infos.errors() == {
        "incrementing.column.name": ["incrementing.column.name is required when mode is 'incrementing'"]
    }
    injected = validate_connector_config(registry, jdbc_source(table="orders; DROP TABLE x"))
    assert list(injected.errors()) == ["table"]
    assert validate_connector_config(registry, jdbc_source(table='app."Orders"')).error_count == 0


def test_jdbc_source_connector_has_one_task_and_checks_offsets() -> None:
    connector = JdbcSourceConnector()
    props = {k: v for k, v in jdbc_source().items() if k not in ("name", "connector.class")}
    connector.start(props)
    assert connector.task_configs(4) == [props]
    assert connector.alter_offsets(
        props, [({"table": "orders"}, {"incrementing": 10}), ({"table": "x"}, None)]
    )
    with pytest.raises(ConnectException):
        connector.alter_offsets(props, [({"table": "orders"}, {"incrementing": "10"})])
    with pytest.raises(ConfigException, match=r"incrementing\.column\.name"):
        JdbcSourceConnector().start({"connection.url": "jdbc:postgresql://x/y", "table": "t"})
    task = JdbcSourceTask()
    task.start(props)


def test_jdbc_sink_config(registry: PluginRegistry) -> None:
    base = {
        "name": "out",
        "connector.class": "JdbcSink",
        "connection.url": "jdbc:postgresql://h/db",
        "topics": "a",
    }
    assert validate_connector_config(registry, base).error_count == 0
    assert list(validate_connector_config(registry, {**base, "insert.mode": "upsert"}).errors()) == [
        "insert.mode"
    ]
    connector = JdbcSinkConnector()
    connector.start(base)
    assert len(connector.task_configs(3)) == 3


def test_sink_table_names() -> None:
    assert sink_table_name("${topic}", "orders") == "orders"
    assert sink_table_name("app.${topic}_copy", "orders") == "app.orders_copy"
    assert sink_table_name("${topic}", "orders-v1") == '"orders-v1"'
    assert sink_table_name("${topic}", 'we"ird') == '"we""ird"'
