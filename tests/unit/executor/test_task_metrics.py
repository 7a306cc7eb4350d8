"""The executor's task metrics (task_metrics.py): what one committed batch adds, the sink's lag by
partition, the state a task reported, the series leaving with the task, and where an executor's
metrics.listeners comes from."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluiceway.api.v1 import common_pb2
from sluiceway.common.metrics_endpoint import MetricsEndpoint
from sluiceway.common.offsets import OffsetPair
from sluiceway_executor.main import parse_args
from sluiceway_executor.pipelines.observed import Tally
from sluiceway_executor.pipelines.pipeline import BatchOutcome, ProducedRecord
from sluiceway_executor.task_metrics import ExecutorMetrics

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
# What a batch that read something commits.
OFFSETS: list[OffsetPair] = [({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 1})]


def _samples(metrics: ExecutorMetrics) -> Samples:
    endpoint = MetricsEndpoint.start("127.0.0.1", 0, metrics.registry)
    try:
        with urllib.request.urlopen(endpoint.url, timeout=10) as answer:
            text = answer.read().decode()
    finally:
        endpoint.stop()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted({"connector": "c", "task": "0", **labels}.items()))))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_committed_batch_adds_its_counts_phases_and_lag() -> None:
    clock = Clock()
    metrics = ExecutorMetrics("e-1", "1.2.3", clock=clock)
    meter = metrics.task("c", 0)
    assert metrics.task("c", 0) is meter
    clock.now += 7
    outcome = BatchOutcome(
        records=100,
        offsets=OFFSETS,
        steps={"plan": 0.02, "write": 1.5},
        skipped=3,
        dead_letters=(ProducedRecord("dlq", None, b"x"),),
        read=Tally(100, 4096),
        written=Tally(97),
        backlog={("t", 0): 40, ("t", 1): 0},
    )
    assert _get(_samples(metrics), "sluiceway_task_seconds_since_last_commit") == 7
    meter.committed(outcome, 0.25)
    samples = _samples(metrics)
    assert samples[("sluiceway_executor_info", (("executor", "e-1"), ("version", "1.2.3")))] == 1
    assert _get(samples, "sluiceway_task_records_read_total") == 100
    assert _get(samples, "sluiceway_task_records_written_total") == 97
    assert _get(samples, "sluiceway_task_bytes_read_total") == 4096
    assert _get(samples, "sluiceway_task_bytes_written_total") is None  # typed rows have no wire size
    assert _get(samples, "sluiceway_task_records_skipped_total") == 3
    assert _get(samples, "sluiceway_task_records_dead_lettered_total") == 1
    assert _get(samples, "sluiceway_task_batches_total") == 1
    assert _get(samples, "sluiceway_task_batch_seconds_sum", phase="write") == 1.5
    assert _get(samples, "sluiceway_task_batch_seconds_sum", phase="commit") == 0.25
    assert _get(samples, "sluiceway_task_batch_seconds_count", phase="plan") == 1
    assert _get(samples, "sluiceway_task_seconds_since_last_commit") == 0
    assert _get(samples, "sluiceway_sink_task_consumer_lag", topic="t", partition="0") == 40
    assert _get(samples, "sluiceway_sink_task_consumer_lag", topic="t", partition="1") == 0

    # A partition the task no longer reads leaves; one planned ahead counts as planned; an empty
    # batch commits nothing.
    clock.now += 4
    meter.committed(BatchOutcome(records=0, steps={"plan_ahead": 0.01}, backlog={("t", 1): 5}), 0.0)
    samples = _samples(metrics)
    assert _get(samples, "sluiceway_task_seconds_since_last_commit") == 4
    assert _get(samples, "sluiceway_sink_task_consumer_lag", topic="t", partition="0") is None
    assert _get(samples, "sluiceway_sink_task_consumer_lag", topic="t", partition="1") == 5
    assert _get(samples, "sluiceway_task_batch_seconds_count", phase="plan") == 2
    assert _get(samples, "sluiceway_task_batches_total") == 2
    assert _get(samples, "sluiceway_task_records_read_total") == 100  # an empty batch adds nothing


def test_without_spark_counts_the_pipelines_own_are_used() -> None:
    metrics = ExecutorMetrics("e", "v")
    metrics.task("c", 0).committed(BatchOutcome(records=10, skipped=2), 0.1)
    # A DataFrame source does not know its count; Spark's did not come back: nothing is guessed.
    metrics.task("c", 0).committed(BatchOutcome(records=None), 0.1)
    samples = _samples(metrics)
    assert _get(samples, "sluiceway_task_records_read_total") == 10
    assert _get(samples, "sluiceway_task_records_written_total") == 8


def test_the_reported_state_is_one_series_and_restarts_are_counted() -> None:
    metrics = ExecutorMetrics("e", "v")
    meter = metrics.task("c", 0)
    for state in (common_pb2.STATE_RUNNING, common_pb2.STATE_RESTARTING, common_pb2.STATE_RESTARTING):
        meter.reported(state)
    meter.reported(common_pb2.STATE_RUNNING)
    samples = _samples(metrics)
    assert _get(samples, "sluiceway_task_reported_state", state="RUNNING") == 1
    assert _get(samples, "sluiceway_task_reported_state", state="RESTARTING") is None
    assert _get(samples, "sluiceway_task_restarts_total") == 2


def test_a_task_that_leaves_takes_its_series_along() -> None:
    metrics = ExecutorMetrics("e", "v")
    metrics.task("c", 0).committed(BatchOutcome(records=1, backlog={("t", 0): 1}), 0.1)
    metrics.task("c", 0).reported(common_pb2.STATE_RUNNING)
    metrics.task("c", 1).committed(BatchOutcome(records=2), 0.1)
    metrics.forget("c", 0)
    metrics.forget("c", 7)  # never here: nothing happens
    left = {labels for _, labels in _samples(metrics) if ("connector", "c") in labels}
    assert left and all(("task", "1") in labels for labels in left)
    assert [(m.connector, m.task) for m in metrics.meters()] == [("c", 1)]
    # Assigned here again: counted afresh.
    assert _get(_samples(metrics), "sluiceway_task_records_read_total") is None
    metrics.task("c", 0).committed(BatchOutcome(records=4), 0.1)
    assert _get(_samples(metrics), "sluiceway_task_records_read_total") == 4


def test_an_executors_metrics_listener_is_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICEWAY_METRICS_LISTENERS", raising=False)
    assert parse_args([]).metrics_listener is None
    monkeypatch.setenv("SLUICEWAY_METRICS_LISTENERS", "http://0.0.0.0:0")
    assert parse_args([]).metrics_listener == ("0.0.0.0", 0)
    monkeypatch.setenv("SLUICEWAY_METRICS_LISTENERS", "https://127.0.0.1:9100")
    with pytest.raises(SystemExit):
        parse_args([])


def test_progress_is_the_rate_over_the_last_minute_and_the_lag() -> None:
    clock = Clock()
    meter = ExecutorMetrics("e", "v", clock=clock).task("c", 0)
    before = meter.progress()
    assert before.records_per_second == 0
    assert not before.HasField("lag") and not before.HasField("last_commit_time")
    # 30 s in: 600 records since the start, 20 a second.
    clock.now += 30
    meter.committed(BatchOutcome(records=600, offsets=OFFSETS, backlog={("t", 0): 90, ("t", 1): 10}), 0.1)
    now = meter.progress()
    assert now.records_per_second == 20
    assert now.lag == 100
    assert now.last_commit_time.ToMilliseconds() == 1_030_000
    assert now.measure_time.ToMilliseconds() == 1_030_000
    # 90 s in, 1200 more 30 s later: the minute from 30 s to 90 s holds 1200 (the sample at 30 s is
    # the window's base).
    clock.now += 30
    meter.committed(BatchOutcome(records=600, offsets=OFFSETS, backlog={("t", 0): 0, ("t", 1): 0}), 0.1)
    clock.now += 30
    meter.committed(BatchOutcome(records=600, offsets=OFFSETS, backlog={("t", 0): 0, ("t", 1): 0}), 0.1)
    assert meter.progress().records_per_second == 1200 / 60
    assert meter.progress().lag == 0
    # Nothing for two minutes: the rate falls to 0; the last commit stays.
    clock.now += 120
    assert meter.progress().records_per_second == 0
    assert meter.progress().last_commit_time.ToMilliseconds() == 1_090_000
    # A source has no lag.
    source = ExecutorMetrics("e", "v", clock=clock).task("s", 0)
    source.committed(BatchOutcome(records=5), 0.1)
    assert not source.progress().HasField("lag")
