"""Task pipelines: what one micro-batch of a source or sink task does (docs/ARCHITECTURE.md §3).

The runner (``sluiceway_executor.runner``) drives a :class:`Pipeline` batch after batch and commits
each batch's offsets through the control plane; the pipelines themselves only read, convert and
write through Spark. Everything here that does not need Spark is importable without it.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from sluiceway.api.v1 import common_pb2, executor_pb2
from sluiceway.connect import ConnectException, PluginRegistry, PluginType, Task
from sluiceway.offsets import OffsetPair, dict_to_struct, offsets_from_proto, offsets_to_proto, struct_to_dict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BATCH_MAX_RECORDS_CONFIG",
    "DEFAULT_BATCH_MAX_RECORDS",
    "BatchOutcome",
    "OffsetPair",
    "Pipeline",
    "PipelineFactory",
    "SparkPipelineFactory",
    "TaskSpec",
    "batch_max_records",
    "dict_to_struct",
    "kafka_client_config",
    "load_task_class",
    "offsets_from_proto",
    "offsets_to_proto",
    "parse_task_name",
    "register_data_sources",
    "struct_to_dict",
]

BATCH_MAX_RECORDS_CONFIG: Final = "batch.max.records"
DEFAULT_BATCH_MAX_RECORDS: Final = 100_000
TASK_CLASS_CONFIG: Final = "task.class"


_TASK_NAME = re.compile(r"connectors/(?P<connector>[^/]+)/tasks/(?P<task>\d+)")


def parse_task_name(name: str) -> tuple[str, int]:
    """``connectors/{connector}/tasks/{task}`` → (connector, task index)."""
    match = _TASK_NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"not a task resource name: {name!r}")
    return match["connector"], int(match["task"])


@dataclass(frozen=True)
class TaskSpec:
    """One task assignment as plain values."""

    name: str
    connector: str
    task_index: int
    generation: int
    connector_config: Mapping[str, str]
    task_config: Mapping[str, str]
    paused: bool
    task_count: int
    source_offsets: tuple[OffsetPair, ...] = ()

    @classmethod
    def from_proto(cls, assignment: executor_pb2.TaskAssignment) -> TaskSpec:
        connector, index = parse_task_name(assignment.task)
        return cls(
            name=assignment.task,
            connector=connector,
            task_index=index,
            generation=assignment.generation,
            connector_config=dict(assignment.connector_config),
            task_config=dict(assignment.task_config),
            paused=assignment.target_state == common_pb2.PAUSED,
            task_count=max(assignment.task_count, index + 1),
            source_offsets=tuple(offsets_from_proto(assignment.source_offsets)),
        )

    def same_work(self, other: TaskSpec) -> bool:
        """Whether ``other`` asks for exactly what this assignment runs (a repeated message)."""
        return (
            self.generation == other.generation
            and self.connector_config == other.connector_config
            and self.task_config == other.task_config
            and self.paused == other.paused
            and self.task_count == other.task_count
        )


@dataclass(frozen=True)
class BatchOutcome:
    """What one batch did: ``records`` handled (None when the pipeline cannot tell cheaply; it is
    then taken as "some"), the ``offsets`` to commit now that the data is durable, and the
    ``topics`` it wrote (sources) or read (sinks)."""

    records: int | None
    offsets: list[OffsetPair] = field(default_factory=list)
    topics: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return self.records == 0


class Pipeline(Protocol):
    """One task's batches. ``run_batch`` does the Spark work and returns once the batch's data is
    durable; ``committed`` is called after the control plane accepted its offsets."""

    def start(self) -> None: ...

    def run_batch(self, batch_id: int) -> BatchOutcome: ...

    def committed(self, outcome: BatchOutcome) -> None: ...

    def stop(self) -> None: ...


class PipelineFactory(Protocol):
    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline: ...


# Kafka client settings every client role gets from the worker config (as Kafka Connect passes
# security settings to its producers, consumers and admin clients).
_COMMON_EXACT = ("bootstrap.servers", "client.dns.lookup", "security.protocol")
_COMMON_PREFIXES = ("ssl.", "sasl.")
_ROLES = ("producer", "consumer", "admin")


def kafka_client_config(
    worker_config: Mapping[str, str], role: str, connector_config: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Kafka client settings for ``role`` (producer, consumer or admin): the worker's common
    settings, then its ``{role}.*`` pass-through settings, then the connector's
    ``{role}.override.*`` ones (Kafka Connect's precedence)."""
    if role not in _ROLES:
        raise ValueError(f"unknown Kafka client role {role!r}")
    config = {
        key: value
        for key, value in worker_config.items()
        if key in _COMMON_EXACT or key.startswith(_COMMON_PREFIXES)
    }
    prefix = f"{role}."
    override = f"{role}.override."
    config.update(
        {
            key[len(prefix) :]: value
            for key, value in worker_config.items()
            if key.startswith(prefix) and not key.startswith(override)
        }
    )
    if connector_config is not None:
        config.update(
            {
                key[len(override) :]: value
                for key, value in connector_config.items()
                if key.startswith(override)
            }
        )
    if not config.get("bootstrap.servers"):
        raise ConnectException("the worker config from the control plane has no bootstrap.servers")
    return config


def batch_max_records(connector_config: Mapping[str, str]) -> int:
    raw = connector_config.get(BATCH_MAX_RECORDS_CONFIG)
    if raw is None or not raw.strip():
        return DEFAULT_BATCH_MAX_RECORDS
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConnectException(f"{BATCH_MAX_RECORDS_CONFIG} must be an integer, got {raw!r}") from None
    if value < 1:
        raise ConnectException(f"{BATCH_MAX_RECORDS_CONFIG} must be at least 1, got {value}")
    return value


def load_class(dotted: str) -> type:
    """The class at a dotted path (``package.module.Class``, nested classes allowed)."""
    parts = dotted.strip().split(".")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue
            raise
        for attr in parts[split:]:
            obj = getattr(obj, attr)
        if not isinstance(obj, type):
            raise ConnectException(f"{dotted} is not a class")
        return obj
    raise ImportError(f"no module found for {dotted!r}")


def load_task_class(spec: TaskSpec, registry: PluginRegistry | None = None) -> tuple[PluginType, type[Task]]:
    """The connector's type and its task class: ``task.class`` of the task config when set (the
    control plane sets it), else the connector plugin's ``task_class()``."""
    connector_class = spec.connector_config.get("connector.class", "")
    desc = (registry or PluginRegistry.discover()).resolve(connector_class)
    dotted = spec.task_config.get(TASK_CLASS_CONFIG, "").strip()
    if dotted:
        try:
            cls = load_class(dotted)
        except (ImportError, AttributeError) as exc:
            raise ConnectException(f"cannot load the task class {dotted}: {exc}") from exc
    else:
        cls = desc.new_instance().task_class()
    if not issubclass(cls, Task):
        raise ConnectException(f"{dotted or cls.__qualname__} is not a Task")
    return desc.type, cls


def canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def register_data_sources(spark: SparkSession) -> None:
    """Registers the data sources the pipelines read and write through on ``spark``:
    ``sluiceway-kafka``, ``sluiceway-datagen`` and ``sluiceway-source-task``."""
    from sluiceway_executor.datasources.kafka import register
    from sluiceway_executor.pipelines.record_tasks import SourceTaskDataSource

    register(spark)
    spark.dataSource.register(SourceTaskDataSource)


class SparkPipelineFactory:
    """Builds the pipeline of a task on the executor's Spark Connect session."""

    def __init__(self, spark: SparkSession, registry: PluginRegistry | None = None) -> None:
        self._spark = spark
        self._registry = registry or PluginRegistry.discover()

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline:
        from sluiceway_executor.pipelines.sink import SinkPipeline
        from sluiceway_executor.pipelines.source import SourcePipeline

        plugin_type, task_class = load_task_class(spec, self._registry)
        if plugin_type is PluginType.SINK:
            return SinkPipeline(self._spark, spec, worker_config, task_class)
        return SourcePipeline(self._spark, spec, worker_config, task_class)
