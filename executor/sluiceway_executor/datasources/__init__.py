"""Spark Python data sources (`pyspark.sql.datasource`) through which record I/O happens inside
Spark. Each is registered on a Spark Connect session with `spark.dataSource.register(cls)`; the
server's Python workers import this package, so it must be installed where Spark runs."""

from sluiceway_executor.datasources.kafka import KafkaDataSource
from sluiceway_executor.datasources.registry import register
from sluiceway_executor.datasources.source_task import SourceTaskDataSource

__all__ = ["KafkaDataSource", "SourceTaskDataSource", "register"]
