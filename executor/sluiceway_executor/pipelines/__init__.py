"""Task pipelines: what one micro-batch of a source or sink task does (docs/ARCHITECTURE.md §3).

The runner (``sluiceway_executor.runner``) drives a :class:`~.pipeline.Pipeline` batch after batch
and commits each batch's offsets to Kafka (``sluiceway_executor.offset_commits``); the pipelines
themselves only read, convert and write through Spark (their Kafka client settings come from
``sluiceway.connect.kafka_clients``). The modules (all but record_tasks.py import without Spark):

- ``spec.py``: ``TaskSpec`` (one assignment as plain values) and the batch size;
- ``pipeline.py``: the runner's interface: ``Pipeline``, ``PipelineFactory``, ``BatchOutcome``, and
  what a pipeline may also do (``SchedulesHeartbeats``, ``PlansAhead``) and ``merge_offsets``;
- ``batch_sizing.py``: each batch's record limit and its share per partition;
- ``loading.py``: loading a task's class;
- ``factory.py``: ``SparkPipelineFactory``;
- ``source.py``, ``sink.py``, ``record_tasks.py``: the batches themselves.
"""

from __future__ import annotations

from sluiceway.common.names import parse_task_name  # the one task-name parser; re-exported

__all__ = [
    "parse_task_name",
]
