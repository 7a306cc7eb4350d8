"""Built-in connector plugins, registered under the ``sluiceway.connectors`` entry points.

None of these modules imports Spark at import time: the control plane loads them to validate configs.
"""

from sluiceway_executor.connectors.datagen import DataGenSourceConnector, DataGenSourceTask
from sluiceway_executor.connectors.filestream import (
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from sluiceway_executor.connectors.jdbc import (
    JdbcSinkConnector,
    JdbcSinkTask,
    JdbcSourceConnector,
    JdbcSourceTask,
)
from sluiceway_executor.connectors.spark_file import SparkFileSinkConnector, SparkFileSinkTask
from sluiceway_executor.datagen_records import datagen_record

__all__ = [
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
