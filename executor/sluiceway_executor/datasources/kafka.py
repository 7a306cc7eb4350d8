"""Kafka record I/O inside Spark: the Python data source `sluiceway-kafka`. Its reader
(`kafka_reader.py`) returns exactly the records of planned offset ranges; its writer
(`kafka_writer.py`) produces a DataFrame's rows with an idempotent producer, failing the Spark job if
any delivery fails. What both share (name, row layout, option parsing) is in `kafka_common.py`.

    register(spark)  # sluiceway_executor.datasources.registry
    df = (spark.read.format("sluiceway-kafka")
          .option("bootstrap.servers", servers)
          .option("ranges", json.dumps([r.to_json() for r in plan_ranges(...)]))
          .load())
    (df.select("key", "value").write.format("sluiceway-kafka").mode("append")
       .option("bootstrap.servers", servers).option("topic", "out").save())

Reader options: `bootstrap.servers`, `ranges` (JSON list of {"topic", "partition", "start", "end"}, end
exclusive; see sluiceway_executor.kafka_ranges), `consumer.config` (JSON object of librdkafka
settings), `read.timeout.ms` (default 60000: how long a split may make no progress before it fails),
`max.rows.per.split` (default 500000: a range longer than this is read by several Spark tasks),
`min.rows.per.split` (default 100000: ranges of different partitions share a Spark task until it
holds about this many rows, so a small batch over many partitions costs one task, not one per
partition). Rows: `topic, partition, offset, timestamp, key, value, headers` as Spark's own Kafka
source lays them out (headers null when a record has none).

Writer options: `bootstrap.servers`, `topic` (used where the DataFrame has no `topic` column or it is
null), `producer.config` (JSON object). Input columns: `value` (binary or string; null = tombstone),
and optionally `key`, `topic`, `partition` (null = the partitioner chooses), `timestamp` (timestamp, or
long milliseconds) and `headers` (array<struct<key: string, value: binary or string>>). Other columns
are ignored, so a DataFrame read by this source can be written back as it is.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter
from pyspark.sql.types import StructType

from sluiceway_executor.datasources.kafka_common import SCHEMA, SHORT_NAME, ReaderOptions, WriterOptions
from sluiceway_executor.datasources.kafka_reader import KafkaReader
from sluiceway_executor.datasources.kafka_writer import KafkaWriter, _check_input_schema

__all__ = ["KafkaDataSource"]


class KafkaDataSource(DataSource):
    """Bounded reads of planned offset ranges and idempotent, all-or-failure writes."""

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaReader(ReaderOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ValueError(f"{SHORT_NAME}: Kafka topics can only be appended to; use mode('append')")
        options = WriterOptions.parse(self.options)
        _check_input_schema(schema, options.topic)
        return KafkaWriter(options)
