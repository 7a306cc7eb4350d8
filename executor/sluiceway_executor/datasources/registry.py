"""Registration of this package's data sources on a Spark Connect session."""

from __future__ import annotations

import weakref

from pyspark.sql import SparkSession

from sluiceway_executor.datasources.kafka import KafkaDataSource
from sluiceway_executor.datasources.source_task import SourceTaskDataSource

# Sessions that already have the data sources, so repeated calls cost no round trip.
_registered: weakref.WeakSet[SparkSession] = weakref.WeakSet()


def register(spark: SparkSession) -> None:
    """Registers `sluiceway-kafka` and `sluiceway-source-task` on this session (once per session)."""
    if spark in _registered:
        return
    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(SourceTaskDataSource)
    _registered.add(spark)
