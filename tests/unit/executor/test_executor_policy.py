"""The worker's policy on the executor: task classes only from installed plugins or plugin.path,
paths inside connector.allowed.paths before a task runs, and no internal topic read or written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from sluiceway.connect import ConnectException, PluginRegistry, PluginType
from sluiceway.connect.plugins import load_class
from sluiceway_executor.connectors.datagen import DataGenBatchTask, DataGenSourceConnector
from sluiceway_executor.connectors.filestream import (
    FileStreamSinkConnector,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from sluiceway_executor.datasources.source_task import SourceTaskOptions, load_chosen_class
from sluiceway_executor.kafka_ranges import list_partitions
from sluiceway_executor.offset_commits import KafkaCommitterFactory, KafkaOffsetCommitter
from sluiceway_executor.pipelines.loading import load_task_class, worker_policy
from sluiceway_executor.pipelines.sink import SinkPipeline
from sluiceway_executor.pipelines.source import SourcePipeline
from sluiceway_executor.pipelines.spec import TaskSpec

WORKER = {"bootstrap.servers": "localhost:1", "config.storage.topic": "cfg"}

PLUGIN = """
from collections.abc import Mapping

from sluiceway.connect import ConfigDef, SourceConnector, Task
from sluiceway_executor.connectors.datagen import DataGenBatchTask


class PathTask(DataGenBatchTask):
    pass


class PathConnector(SourceConnector):
    def version(self) -> str:
        return "1"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[Task]:
        return PathTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def config(self) -> ConfigDef:
        return ConfigDef()
"""


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))


@pytest.fixture
def plugin_dir(tmp_path: Path) -> tuple[Path, str]:
    module = f"exec_plugin_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(PLUGIN)
    return tmp_path, module


def spec(config: dict[str, str], task_config: dict[str, str] | None = None) -> TaskSpec:
    return TaskSpec(
        name="connectors/c/tasks/0",
        connector="c",
        task_index=0,
        generation=1,
        connector_config=config,
        task_config=task_config or {},
        paused=False,
        task_count=1,
    )


REGISTRY = PluginRegistry.of(DataGenSourceConnector, FileStreamSourceConnector, FileStreamSinkConnector)


# ---------------------------------------------------------------------- task classes


def test_task_class_from_an_installed_plugin_package() -> None:
    task = "sluiceway_executor.connectors.datagen.DataGenBatchTask"
    plugin_type, cls = load_task_class(
        spec({"connector.class": "DataGenSource"}, {"task.class": task}), REGISTRY, worker_policy(WORKER)
    )
    assert (plugin_type, cls) == (PluginType.SOURCE, DataGenBatchTask)


def test_task_class_outside_the_allowed_sources_is_refused_unimported() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys
                from sluiceway.connect import PluginRegistry
                from sluiceway_executor.connectors.datagen import DataGenSourceConnector
                from sluiceway_executor.pipelines.loading import load_task_class
                from sluiceway_executor.pipelines.spec import TaskSpec

                spec = TaskSpec("connectors/c/tasks/0", "c", 0, 1, {"connector.class": "DataGenSource"},
                                {"task.class": "this.Zen"}, False, 1)
                try:
                    load_task_class(spec, PluginRegistry.of(DataGenSourceConnector))
                except Exception as e:
                    print("REFUSED", e)
                print("IMPORTED" if "this" in sys.modules else "NOT IMPORTED")
                """
            ),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "REFUSED cannot load the task class this.Zen" in result.stdout
    assert "NOT IMPORTED" in result.stdout
    assert "Beautiful is better than ugly" not in result.stdout


def test_connector_and_task_from_plugin_path(plugin_dir: tuple[Path, str]) -> None:
    directory, module = plugin_dir
    config = {"connector.class": f"{module}.PathConnector"}
    task = {"task.class": f"{module}.PathTask"}
    with pytest.raises(Exception, match=r"nor in plugin\.path"):
        load_task_class(spec(config, task), REGISTRY, worker_policy(WORKER))
    policy = worker_policy({**WORKER, "plugin.path": str(directory)})
    plugin_type, cls = load_task_class(spec(config, task), REGISTRY, policy)
    assert plugin_type is PluginType.SOURCE and cls.__name__ == "PathTask"
    # A plugin.path task class for an installed connector too.
    _, cls = load_task_class(spec({"connector.class": "DataGenSource"}, task), REGISTRY, policy)
    assert cls.__name__ == "PathTask"
    # Inside Spark the chosen class loads from the same directories.
    assert load_chosen_class(f"{module}.PathTask", policy.plugin_path) is cls
    options = SourceTaskOptions("t.T", {}, [], 1, 1, {}, {}, plugin_path=policy.plugin_path)
    assert SourceTaskOptions.parse(options.to_options()).plugin_path == (str(directory),)


def test_load_class_needs_an_allowed_source() -> None:
    with pytest.raises(ImportError, match=r"no plugin\.path is set"):
        load_class("sluiceway_executor.connectors.datagen.DataGenBatchTask")
    assert load_class(
        "sluiceway_executor.connectors.datagen.DataGenBatchTask", packages={"sluiceway_executor"}
    )
    with pytest.raises(AttributeError, match="does not exist"):
        load_class("sluiceway_executor.connectors.datagen.Nothing", packages={"sluiceway_executor"})


def test_the_committer_factory_finds_plugin_path_connectors(plugin_dir: tuple[Path, str]) -> None:
    directory, module = plugin_dir
    factory = KafkaCommitterFactory(REGISTRY)
    task_spec = spec({"connector.class": f"{module}.PathConnector"})
    committer = factory(task_spec, {**WORKER, "plugin.path": str(directory)})
    assert isinstance(committer, KafkaOffsetCommitter) and committer.source


def test_a_bad_worker_policy_fails_the_task() -> None:
    with pytest.raises(ConnectException, match=r"connector\.client\.config\.override\.policy"):
        worker_policy({"connector.client.config.override.policy": "Sometimes"})


# ---------------------------------------------------------------------- paths


def test_paths_outside_the_allowed_directories_are_not_run(tmp_path: Path) -> None:
    policy = worker_policy({**WORKER, "connector.allowed.paths": str(tmp_path)})
    inside = {"connector.class": "FileStreamSource", "topic": "t", "file": str(tmp_path / "in.txt")}
    assert load_task_class(spec(inside, dict(inside)), REGISTRY, policy)[1] is FileStreamSourceTask
    outside = {**inside, "file": "/etc/passwd"}
    with pytest.raises(ConnectException, match="the task is not run: file: /etc/passwd is outside"):
        load_task_class(spec(outside, dict(outside)), REGISTRY, policy)
    # The task config is checked as well as the connector's.
    with pytest.raises(ConnectException, match="the task is not run"):
        load_task_class(spec(inside, {**inside, "file": "/etc/shadow"}), REGISTRY, policy)
    # With no allowed paths configured, any path runs.
    assert (
        load_task_class(spec(outside, dict(outside)), REGISTRY, worker_policy(WORKER))[1]
        is FileStreamSourceTask
    )


@pytest.mark.parametrize(
    "exposing", [{"auth.tokens.file": "/etc/tokens"}, {"listeners": "0.0.0.0:8083"}], ids=["auth", "listener"]
)
def test_an_exposed_worker_runs_no_path_task_without_allowed_paths(
    tmp_path: Path, exposing: dict[str, str]
) -> None:
    # The worker config Welcome carries says whether the control plane is exposed; a config stored
    # before it was (validation refuses it now) is not run either.
    config = {"connector.class": "FileStreamSource", "topic": "t", "file": str(tmp_path / "in.txt")}
    with pytest.raises(ConnectException, match=r"the task is not run: file: .*set connector\.allowed\.paths"):
        load_task_class(spec(config, dict(config)), REGISTRY, worker_policy({**WORKER, **exposing}))
    allowed = worker_policy({**WORKER, **exposing, "connector.allowed.paths": str(tmp_path)})
    assert load_task_class(spec(config, dict(config)), REGISTRY, allowed)[1] is FileStreamSourceTask
    # Tasks without path keys run as before.
    generator = {"connector.class": "DataGenSource", "topic": "t"}
    assert (
        load_task_class(spec(generator), REGISTRY, worker_policy({**WORKER, **exposing}))[0]
        is PluginType.SOURCE
    )


# ---------------------------------------------------------------------- internal topics


def test_a_sink_never_reads_an_internal_topic() -> None:
    config = {"connector.class": "FileStreamSink", "file": "/tmp/x", "topics": "orders, cfg"}
    with pytest.raises(ConnectException, match="may not read internal topics: cfg"):
        SinkPipeline(cast(Any, None), spec(config), WORKER, FileStreamSinkConnector().task_class())
    regex = {"connector.class": "FileStreamSink", "file": "/tmp/x", "topics.regex": ".*"}
    pipeline = SinkPipeline(cast(Any, None), spec(regex), WORKER, FileStreamSinkConnector().task_class())
    assert pipeline._policy.is_internal_topic("cfg")


class _Metadata:
    def __init__(self, names: list[str]) -> None:
        self.topics = {name: SimpleNamespace(error=None, partitions={0: None}) for name in names}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> _Metadata:
        return self


def test_regex_planning_skips_internal_topics() -> None:
    policy = worker_policy(WORKER)
    cluster = _Metadata(["cfg", "connect-status", "orders", "__consumer_offsets", "connect-heartbeats"])
    found = list_partitions(cluster, None, ".*", 1.0, policy.is_internal_topic)
    assert [tp.topic for tp in found] == ["connect-heartbeats", "orders"]


class _Writes:
    """Stands in for a DataFrame: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the batch was used ({name})")


def test_a_source_batch_for_an_internal_topic_is_not_written() -> None:
    config = {"connector.class": "DataGenSource", "topic": "orders"}
    pipeline = SourcePipeline(cast(Any, None), spec(config), WORKER, DataGenBatchTask)
    for topics in ({"cfg"}, {"orders", "__consumer_offsets"}, {"connect-status"}):
        with pytest.raises(ConnectException, match="go to internal topics") as refused:
            pipeline._write(cast(Any, _Writes()), topics)
        assert "nothing of the batch was written" in str(refused.value)
