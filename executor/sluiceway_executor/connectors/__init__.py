"""Built-in connector plugins: BUILT_IN_CONNECTORS, which the server (server.py) and the executor
(main.py) hand to ``PluginRegistry.discover``; they are also registered under the
``sluiceway.connectors`` entry points (pyproject.toml), beside third-party plugins.

None of these modules imports Spark at import time: the control plane loads them to validate configs.
"""

from typing import Final

from sluiceway.connect import Connector
from sluiceway_executor.connectors.datagen import DataGenSourceConnector, DataGenSourceTask
from sluiceway_executor.connectors.filestream import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from sluiceway_executor.connectors.jdbc_sink import JdbcSinkConnector, JdbcSinkTask
from sluiceway_executor.connectors.jdbc_source import JdbcSourceConnector, JdbcSourceTask
from sluiceway_executor.connectors.spark_file import SparkFileSinkConnector, SparkFileSinkTask
from sluiceway_executor.datagen_records import datagen_record

__all__ = [
    "BUILT_IN_CONNECTORS",
    "DataGenSourceConnector",
    "DataGenSourceTask",
    "FileStreamSinkConnector",
    "FileStreamSinkTask",
    "FileStreamSourceConnector",
    "FileStreamSourceTask",
    "JdbcSinkConnector",
    "JdbcSinkTask",
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "SparkFileSinkConnector",
    "SparkFileSinkTask",
    "datagen_record",
]

BUILT_IN_CONNECTORS: Final[tuple[type[Connector], ...]] = (
    DataGenSourceConnector,
    FileStreamSourceConnector,
    FileStreamSinkConnector,
    SparkFileSinkConnector,
    JdbcSourceConnector,
    JdbcSinkConnector,
)
