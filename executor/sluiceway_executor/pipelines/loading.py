"""Loading a task's class: the dotted `task.class` of its config, or its connector plugin's
`task_class()`. Used on the executor and, for record-level tasks, inside Spark."""

from __future__ import annotations

import importlib
from typing import Any, Final

from sluiceway.connect import ConnectException, PluginRegistry, PluginType, Task
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["TASK_CLASS_CONFIG", "load_class", "load_task_class"]

TASK_CLASS_CONFIG: Final = "task.class"


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
