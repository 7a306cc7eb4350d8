"""An executor resolves a task's config references just before building its pipeline and committer:
they get resolved values, the assignment keeps the raw ones, and failures name what did not
resolve without any resolved value."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest

from sluiceway.api.v1 import common_pb2
from sluiceway.connect.config_providers import ConfigProviders, ConfigReferenceError
from sluiceway_executor.offset_commits import OffsetCommitter
from sluiceway_executor.pipelines.pipeline import Pipeline
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_executor.runner import TaskRunner
from tests.unit.executor.task_hosts import RecordingHost, count

SECRET = "executor-side-secret-value"
VARIABLE = "SLUICEWAY_TEST_TASK_SECRET"


def spec(connector: Mapping[str, str], task: Mapping[str, str]) -> TaskSpec:
    return TaskSpec(
        "connectors/c/tasks/0", "c", 0, 7, dict(connector), dict(task), False, 1, fingerprint="fp"
    )


class RefusingFactory:
    """Records the spec it gets and fails, echoing the resolved value, as careless code does."""

    def __init__(self) -> None:
        self.seen: list[TaskSpec] = []

    def __call__(self, spec: TaskSpec, worker_config: Mapping[str, str]) -> Pipeline:
        self.seen.append(spec)
        raise RuntimeError(f"cannot log in with {spec.connector_config.get('db.password')}")


def no_committer(spec: TaskSpec, worker_config: Mapping[str, str]) -> OffsetCommitter:
    raise AssertionError("the pipeline never starts")


def run_runner(
    task: TaskSpec, worker_config: Mapping[str, str]
) -> tuple[RecordingHost, RefusingFactory, TaskRunner]:
    host, factory = RecordingHost(), RefusingFactory()
    # Restarts off: the test is about the one failure and its trace.
    worker_config = {**worker_config, "task.restart.enable": "false"}
    runner = TaskRunner(task, host, factory, worker_config, committer_factory=no_committer)
    runner.start()
    host.wait_for(count(common_pb2.STATE_FAILED, 1))
    runner.join(10)
    return host, factory, runner


def test_task_spec_resolves_a_copy() -> None:
    raw = spec({"db.password": "${env:PW}", "topic": "t"}, {"file": "${env:OUT}", "task": "0"})
    resolved, substituted = raw.resolved(
        ConfigProviders.from_worker_config({"config.providers": "env"}, {"PW": "p4ss", "OUT": "/o"})
    )
    assert resolved.connector_config == {"db.password": "p4ss", "topic": "t"}
    assert resolved.task_config == {"file": "/o", "task": "0"}
    assert resolved.fingerprint == raw.fingerprint and raw.connector_config["db.password"] == "${env:PW}"
    assert substituted == {"p4ss": "${env:PW}", "/o": "${env:OUT}"}
    with pytest.raises(ConfigReferenceError) as caught:
        raw.resolved(ConfigProviders.from_worker_config({"config.providers": "env"}, {"PW": "p4ss"}))
    assert list(caught.value.problems) == ["task config file"]


def test_the_pipeline_gets_resolved_values_and_failures_hide_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, VARIABLE, SECRET)
    task = spec({"db.password": f"${{env:{VARIABLE}}}"}, {})
    host, factory, runner = run_runner(task, {"config.providers": "env"})
    (seen,) = factory.seen
    assert seen.connector_config["db.password"] == SECRET
    assert runner.spec.connector_config["db.password"] == f"${{env:{VARIABLE}}}"
    (report,) = host.reports
    state, trace = report.state, report.trace
    assert state == common_pb2.STATE_FAILED
    assert f"cannot log in with ${{env:{VARIABLE}}}" in trace and SECRET not in trace


def test_an_unresolved_reference_fails_the_task_before_its_pipeline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(os.environ, VARIABLE, raising=False)
    host, factory, _ = run_runner(
        spec({"db.password": f"${{env:{VARIABLE}}}"}, {}), {"config.providers": "env"}
    )
    assert factory.seen == []
    (report,) = host.reports
    state, trace = report.state, report.trace
    assert state == common_pb2.STATE_FAILED
    assert "not started" in trace and f"environment variable '{VARIABLE}' is not set" in trace
    # Without the provider enabled, the trace says which worker key to set.
    host, factory, _ = run_runner(spec({"x": "${file:/etc/hosts:k}"}, {}), {})
    assert factory.seen == [] and "config.providers" in host.reports[0].trace
