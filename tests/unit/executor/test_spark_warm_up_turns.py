"""SparkWarmUp's turns, with a stand-in for the Spark Connect client and for the warm-up jobs (the
jobs themselves run against the real server in
tests/integration/executor/test_spark_warm_up_jobs.py): each session once, only once a worker
config is known, a replacement session again, and a failure logged without a retry."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest
from pyspark.sql import SparkSession

from sluiceway_executor.spark_sessions import SparkSessions
from sluiceway_executor.spark_warm_up import SparkWarmUp


class FakeSession:
    def __init__(self, number: int) -> None:
        self.number = number

    def stop(self) -> None:
        pass


class Jobs:
    """Records which session each warm-up ran on, with which config; may be held or made to fail."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, dict[str, str]]] = []
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()
        self.fail = False

    def __call__(self, spark: SparkSession, config: Mapping[str, str]) -> None:
        self.started.set()
        self.release.wait(5)
        self.runs.append((cast(Any, spark).number, dict(config)))
        if self.fail:
            raise RuntimeError("the job failed")


def keeper(stop: threading.Event) -> SparkSessions:
    built: list[FakeSession] = []

    def connect(remote: str) -> SparkSession:
        built.append(FakeSession(len(built) + 1))
        return cast(SparkSession, built[-1])

    return SparkSessions("sc://nowhere:1", stop, connect=connect, retry_min=0.01, retry_max=0.05)


def setup(jobs: Jobs) -> tuple[SparkSessions, SparkWarmUp]:
    stop = threading.Event()
    sessions = keeper(stop)
    warm = SparkWarmUp(sessions, stop, run=jobs)
    sessions.on_new_session(warm.session_built)
    return sessions, warm


def test_a_session_is_warmed_once_and_only_with_a_worker_config() -> None:
    jobs = Jobs()
    sessions, warm = setup(jobs)
    sessions.start()
    assert warm.wait(5) and jobs.runs == []  # no worker config yet: nothing to connect to
    warm.configure({"bootstrap.servers": "broker:9092"})
    assert warm.wait(5)
    warm.configure({"bootstrap.servers": "broker:9092"})  # a second welcome
    assert warm.wait(5)
    assert jobs.runs == [(1, {"bootstrap.servers": "broker:9092"})]
    assert warm.warmed_generation == 1


def test_a_replacement_session_is_warmed_with_the_latest_config() -> None:
    jobs = Jobs()
    sessions, warm = setup(jobs)
    first = sessions.start()
    warm.configure({"bootstrap.servers": "a:9092"})
    assert warm.wait(5)
    warm.configure({"bootstrap.servers": "b:9092"})
    sessions.renew(first)
    assert warm.wait(5)
    assert jobs.runs == [(1, {"bootstrap.servers": "a:9092"}), (2, {"bootstrap.servers": "b:9092"})]


def test_a_session_built_while_another_warms_gets_its_turn_after() -> None:
    jobs = Jobs()
    sessions, warm = setup(jobs)
    first = sessions.start()
    jobs.release.clear()
    warm.configure({"bootstrap.servers": "a:9092"})
    assert jobs.started.wait(5)
    sessions.renew(first)  # while session 1's warm-up is held
    jobs.release.set()
    for _ in range(50):
        if warm.warmed_generation == 2:
            break
        warm.wait(0.1)
    assert [number for number, _ in jobs.runs] == [1, 2]


def test_a_failed_warm_up_is_logged_and_not_retried(caplog: pytest.LogCaptureFixture) -> None:
    jobs = Jobs()
    jobs.fail = True
    sessions, warm = setup(jobs)
    sessions.start()
    with caplog.at_level(logging.INFO, logger="sluiceway_executor.spark_warm_up"):
        warm.configure({"bootstrap.servers": "a:9092"})
        assert warm.wait(5)
        warm.configure({"bootstrap.servers": "a:9092"})
        assert warm.wait(5)
    assert len(jobs.runs) == 1
    assert "warming Spark Connect session 1 up failed (the job failed); pipelines start cold" in caplog.text


def test_nothing_starts_once_the_executor_stops() -> None:
    jobs = Jobs()
    stop = threading.Event()
    sessions = keeper(stop)
    warm = SparkWarmUp(sessions, stop, run=jobs)
    sessions.start()
    stop.set()
    warm.configure({"bootstrap.servers": "a:9092"})
    assert warm.wait(5) and jobs.runs == []
