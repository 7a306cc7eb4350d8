"""Connector plugins that misbehave on request, and one that routes records to topics of its
choosing, loaded by the test control plane and executors through `connector.class` dotted paths
(this directory is on their PYTHONPATH)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigDef,
    ConfigType,
    ConfigValue,
    ConnectException,
    DataFrameSourceTask,
    Importance,
    OffsetStorageReader,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ALTER_OFFSETS = "alter.offsets"
ROUTING_TOPICS = "routing.topics"
ROUTING_RECORDS = "routing.records.per.topic"
ROUTING_DECLARED = "routing.declared.topics"


def _answer_alter(config: Mapping[str, str], default: bool) -> bool:
    """What `alter.offsets` asks alter_offsets to do."""
    behaviour = config.get(ALTER_OFFSETS, "default")
    if behaviour == "ack":
        return True
    if behaviour == "unsupported":
        raise NotImplementedError("this connector keeps its offsets elsewhere")
    if behaviour == "fail":
        raise ConnectException("offsets refused on purpose")
    if behaviour == "hang":
        time.sleep(3)
    return default


class ControllableSourceTask(SourceTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.1)
        return None

    def stop(self) -> None:
        pass


class ControllableSourceConnector(SourceConnector):
    """`fail.start` / `fail.stop` raise; `start.delay.ms` sleeps in start(); `task.count` tasks;
    `marker.file` gets a line per callback so tests can see what ran and in which order."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "fail.start",
                ConfigType.BOOLEAN,
                False,
                importance=Importance.LOW,
                documentation="start() raises",
            )
            .define(
                "fail.stop",
                ConfigType.BOOLEAN,
                False,
                importance=Importance.LOW,
                documentation="stop() raises",
            )
            .define(
                "start.delay.ms", ConfigType.INT, 0, importance=Importance.LOW, documentation="start() sleeps"
            )
            .define(
                "task.count", ConfigType.INT, 1, importance=Importance.LOW, documentation="tasks to generate"
            )
            .define(
                "marker.file", ConfigType.STRING, "", importance=Importance.LOW, documentation="callback log"
            )
            .define(
                "secret", ConfigType.PASSWORD, "", importance=Importance.LOW, documentation="a password field"
            )
            .define(
                ALTER_OFFSETS,
                ConfigType.STRING,
                "default",
                importance=Importance.LOW,
                documentation="alter_offsets(): default (False), ack (True), unsupported, fail, hang",
            )
        )

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        return _answer_alter(connector_config, super().alter_offsets(connector_config, offsets))

    def _mark(self, event: str) -> None:
        marker = self.props.get("marker.file", "")
        if marker:
            with Path(marker).open("a") as out:
                out.write(event + "\n")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self._mark("start")
        delay = int(props.get("start.delay.ms", "0"))
        if delay:
            time.sleep(delay / 1000)
        if props.get("fail.start", "false").lower() == "true":
            raise RuntimeError("start failed on purpose")

    def task_class(self) -> type[Task]:
        return ControllableSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        count = int(self.props.get("task.count", "1"))
        return [{"task.index": str(i)} for i in range(min(count, max_tasks))]

    def stop(self) -> None:
        self._mark("stop")
        if self.props.get("fail.stop", "false").lower() == "true":
            raise RuntimeError("stop failed on purpose")


class SlowSourceConnector(ControllableSourceConnector):
    """Every plugin callback is slow: `config()` sleeps CONFIG_DELAY seconds on each call,
    `validate()` sleeps `validate.delay.ms` more, and `start()` honours `start.delay.ms`. The control
    plane must keep answering other calls meanwhile."""

    CONFIG_DELAY = 1.5

    def config(self) -> ConfigDef:
        time.sleep(self.CONFIG_DELAY)
        return (
            super()
            .config()
            .define(
                "validate.delay.ms",
                ConfigType.INT,
                0,
                importance=Importance.LOW,
                documentation="validate() sleeps",
            )
        )

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        delay = int(props.get("validate.delay.ms", "0"))
        if delay:
            time.sleep(delay / 1000)
        return super().validate(props)


class ControllableSinkTask(SinkTask):
    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def put(self, records: Sequence[SinkRecord]) -> None:
        pass

    def stop(self) -> None:
        pass


class ControllableSinkConnector(SinkConnector):
    """A sink that writes nothing; `alter.offsets` decides what alter_offsets does."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            ALTER_OFFSETS,
            ConfigType.STRING,
            "default",
            importance=Importance.LOW,
            documentation="alter_offsets(): default (False), ack (True), unsupported, fail, hang",
        )

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return ControllableSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        return _answer_alter(connector_config, super().alter_offsets(connector_config, offsets))


def _routing_config() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            ROUTING_TOPICS,
            ConfigType.LIST,
            importance=Importance.HIGH,
            documentation="the topics the records go to, in turn",
        )
        .define(
            ROUTING_RECORDS,
            ConfigType.INT,
            2,
            importance=Importance.LOW,
            documentation="records written to each topic",
        )
        .define(
            ROUTING_DECLARED,
            ConfigType.LIST,
            None,
            importance=Importance.LOW,
            documentation="the topics the batch says it writes to (SourceBatch.topics); unset: none said",
        )
    )


class TopicRoutingSourceTask(DataFrameSourceTask):
    """One batch, then nothing: `routing.records.per.topic` records for each of `routing.topics`,
    each record naming its topic in the batch's `topic` column. Built with Spark SQL alone, so Spark's
    Python workers never import this module. Its one offset, `{"routed": true}`, marks it done."""

    PARTITION = {"routing": "once"}

    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(_routing_config(), props)
        self.topics = config.get_list(ROUTING_TOPICS)
        self.per_topic = config.get_int(ROUTING_RECORDS)
        declared = config.get(ROUTING_DECLARED)
        self.declared = None if declared is None else frozenset(declared)

    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        if offsets.offset(self.PARTITION) is not None:
            return SourceBatch(data=None)
        names = F.array(*[F.lit(topic) for topic in self.topics])
        index = (F.col("id") % len(self.topics) + 1).cast("int")
        data = spark.range(len(self.topics) * self.per_topic).select(
            F.element_at(names, index).alias("topic"),
            F.struct(F.col("id").alias("n")).alias("value"),
        )
        return SourceBatch(data=data, offsets=[(self.PARTITION, {"routed": True})], topics=self.declared)

    def stop(self) -> None:
        pass


class TopicRoutingSourceConnector(SourceConnector):
    """One task that writes a few records to each of `routing.topics` and then idles."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return _routing_config()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return TopicRoutingSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass


FLAKY_TIMES = "flaky.failures"
FLAKY_LOG = "flaky.log.file"
FLAKY_TOPIC = "flaky.topic"


def _flaky_config() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            FLAKY_TIMES, ConfigType.INT, 0, importance=Importance.LOW, documentation="first batches that fail"
        )
        .define(FLAKY_LOG, ConfigType.STRING, importance=Importance.LOW, documentation="start/fail log")
        .define(FLAKY_TOPIC, ConfigType.STRING, importance=Importance.LOW, documentation="where records go")
    )


class FlakySourceTask(DataFrameSourceTask):
    """Fails the first batch of its first `flaky.failures` runs, then writes ten records once.
    `flaky.log.file` gets a line `start <time>` at each start and `fail <n> <time>` at each failure
    (times from time.time()), so a test can measure the pauses between a failure and the next run."""

    PARTITION = {"flaky": "once"}

    def version(self) -> str:
        return "1.0"

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(_flaky_config(), props)
        self.failures = config.get_int(FLAKY_TIMES)
        self.log = Path(config.get_string(FLAKY_LOG) or "")
        self.topic = config.get_string(FLAKY_TOPIC) or ""
        self._write(f"start {time.time()}")

    def _write(self, line: str) -> None:
        with self.log.open("a") as out:
            out.write(line + "\n")

    def read_batch(
        self, spark: SparkSession, offsets: OffsetStorageReader, context: BatchContext
    ) -> SourceBatch:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        failed = sum(line.startswith("fail ") for line in self.log.read_text().splitlines())
        if failed < self.failures:
            self._write(f"fail {failed + 1} {time.time()}")
            raise ConnectException(f"failing on purpose ({failed + 1})")
        if offsets.offset(self.PARTITION) is not None:
            return SourceBatch(data=None)
        data = spark.range(10).select(
            F.lit(self.topic).alias("topic"), F.struct(F.col("id").alias("n")).alias("value")
        )
        return SourceBatch(data=data, offsets=[(self.PARTITION, {"done": True})])

    def stop(self) -> None:
        pass


class FlakySourceConnector(SourceConnector):
    """One FlakySourceTask."""

    def version(self) -> str:
        return "1.0"

    def config(self) -> ConfigDef:
        return _flaky_config()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return FlakySourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)]

    def stop(self) -> None:
        pass
