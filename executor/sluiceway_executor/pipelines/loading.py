"""Loading a task's class: the dotted `task.class` of its config, or its connector plugin's
`task_class()`. Used on the executor and, for record-level tasks, inside Spark.

A dotted `task.class` is imported only from the top-level package of an installed connector plugin
or from a module in the worker's `plugin.path` directories (`sluiceway.connect.plugins.load_class`);
anything else is refused before it is imported. Before a task runs, the values of the keys its
connector declares paths must lie inside `connector.allowed.paths`, which must be set when the
control plane is exposed (authentication on, or a listener off loopback: the worker config Welcome
carries says so); this is the check validation makes, repeated for configs stored before it applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sluiceway.connect import ConnectException, PluginRegistry, PluginType, Task
from sluiceway.connect.plugins import load_class
from sluiceway.connect.validation import connector_config_def
from sluiceway.connect.worker_policy import WorkerPolicy, path_errors
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["TASK_CLASS_CONFIG", "load_task_class", "worker_policy"]

TASK_CLASS_CONFIG: Final = "task.class"


def worker_policy(worker_config: Mapping[str, str]) -> WorkerPolicy:
    """The policy of the worker config a task runs with; a bad value fails the task."""
    try:
        return WorkerPolicy.from_worker_config(worker_config)
    except ValueError as exc:
        raise ConnectException(f"the worker config is not usable: {exc}") from exc


def load_task_class(
    spec: TaskSpec, registry: PluginRegistry | None = None, policy: WorkerPolicy | None = None
) -> tuple[PluginType, type[Task]]:
    """The connector's type and its task class: ``task.class`` of the task config when set (the
    control plane sets it), else the connector plugin's ``task_class()``.

    With a ``policy`` (the worker's), the registry looks in its plugin.path too, and the task's
    configs must keep the connector's path keys inside connector.allowed.paths (which an exposed
    worker must set)."""
    registry = registry or PluginRegistry.discover()
    if policy is not None:
        registry = registry.with_plugin_path(policy.plugin_path)
    connector_class = spec.connector_config.get("connector.class", "")
    desc = registry.resolve(connector_class)
    if policy is not None and policy.confines_paths:
        refused = path_errors(connector_config_def(desc), (spec.connector_config, spec.task_config), policy)
        if refused:
            raise ConnectException(
                "the task is not run: " + "; ".join(f"{key}: {why}" for key, why in sorted(refused.items()))
            )
    dotted = spec.task_config.get(TASK_CLASS_CONFIG, "").strip()
    if dotted:
        try:
            cls = load_class(dotted, packages=registry.installed_packages(), plugin_path=registry.plugin_path)
        except (ImportError, AttributeError) as exc:
            raise ConnectException(f"cannot load the task class {dotted}: {exc}") from exc
    else:
        cls = desc.new_instance().task_class()
    if not issubclass(cls, Task):
        raise ConnectException(f"{dotted or cls.__qualname__} is not a Task")
    return desc.type, cls
