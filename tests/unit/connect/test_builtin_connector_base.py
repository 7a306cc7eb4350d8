"""What the built-in connectors share through BuiltInConnector: Sluiceway's version, a start that
parses the config with the connector's own definition and keeps it only when accepted, a stop with
nothing to stop, and task configs copied from the kept config."""

from __future__ import annotations

import pytest

import sluiceway
from sluiceway.connect import ConfigException, Connector
from sluiceway_executor.connectors.base import BuiltInConnector
from sluiceway_executor.connectors.datagen import DataGenSourceConnector
from sluiceway_executor.connectors.filestream import FileStreamSinkConnector, FileStreamSourceConnector
from sluiceway_executor.connectors.jdbc_sink import JdbcSinkConnector
from sluiceway_executor.connectors.jdbc_source import JdbcSourceConnector
from sluiceway_executor.connectors.spark_file import SparkFileSinkConnector

URL = {"connection.url": "jdbc:postgresql://localhost:5432/app"}
# A config each connector accepts, and one value its own definition refuses.
CASES: list[tuple[type[Connector], dict[str, str], dict[str, str]]] = [
    (DataGenSourceConnector, {"topic": "t"}, {"max.records": "-2"}),
    (FileStreamSourceConnector, {"file": "/tmp/in.txt", "topic": "t"}, {"batch.size": "0"}),
    (FileStreamSinkConnector, {"file": "/tmp/out.txt"}, {"file": ""}),
    (JdbcSourceConnector, {**URL, "table": "orders", "incrementing.column.name": "id"}, {"table": "a b"}),
    (JdbcSinkConnector, URL, {"connection.url": "postgresql://nowhere"}),
    (SparkFileSinkConnector, {"path": "/tmp/lake"}, {"format": "xml"}),
]


@pytest.mark.parametrize(("cls", "good", "bad"), CASES, ids=[case[0].__name__ for case in CASES])
def test_every_built_in_connector_checks_keeps_and_copies_its_config(
    cls: type[Connector], good: dict[str, str], bad: dict[str, str]
) -> None:
    connector = cls()
    assert isinstance(connector, BuiltInConnector)
    assert connector.version() == sluiceway.__version__
    with pytest.raises(ConfigException):
        connector.start({**good, **bad})
    connector.start(good)
    (first, *_) = configs = connector.task_configs(2)
    assert 1 <= len(configs) <= 2
    assert {key: first[key] for key in good} == good
    # Each task config is a copy: changing one changes nothing the connector keeps.
    first["extra"] = "changed"
    assert "extra" not in connector.task_configs(2)[0]
    connector.stop()


def test_a_config_refused_by_the_connector_s_own_check_is_not_kept() -> None:
    connector = JdbcSourceConnector()
    with pytest.raises(ConfigException, match=r"incrementing\.column\.name is required"):
        connector.start({**URL, "table": "orders"})
    assert connector.task_configs(1) == [{}]
