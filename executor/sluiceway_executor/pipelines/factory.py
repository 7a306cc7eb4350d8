"""Building a task's pipeline on the executor's Spark Connect session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from sluiceway.connect import PluginRegistry, PluginType
from sluiceway_executor.pipelines.loading import load_task_class, worker_policy
from sluiceway_executor.pipelines.pipeline import Pipeline
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.spark_sessions import SparkSessions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkPipelineFactory"]


class SparkPipelineFactory:
    """Builds the pipeline of a task on the executor's Spark Connect session: the session ``spark``
    holds now when it is a :class:`SparkSessions` (which replaces a lost session), else ``spark``
    itself. The plugin registry holds the installed plugins; each task's worker config adds its
    plugin.path and the rest of the worker's policy (see ``load_task_class``)."""

    def __init__(self, spark: SparkSession | SparkSessions, registry: PluginRegistry | None = None) -> None:
        self.sessions = spark if isinstance(spark, SparkSessions) else None
        self._fixed = None if isinstance(spark, SparkSessions) else spark
        self._registry = registry or PluginRegistry.discover()

    def _session(self) -> SparkSession:
        return self.sessions.current() if self.sessions is not None else cast("SparkSession", self._fixed)

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline:
        from sluiceway_executor.pipelines.sink import SinkPipeline
        from sluiceway_executor.pipelines.source import SourcePipeline

        plugin_type, task_class = load_task_class(spec, self._registry, worker_policy(worker_config))
        if plugin_type is PluginType.SINK:
            return SinkPipeline(self._session(), spec, worker_config, task_class)
        return SourcePipeline(self._session(), spec, worker_config, task_class)
