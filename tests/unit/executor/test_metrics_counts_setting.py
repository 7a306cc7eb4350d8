"""The worker setting metrics.task.counts.enable: how it is declared and read, where an executor
takes it from, and what an `Observed` made with counting off does (nothing, without Spark)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import pytest

from sluiceway.connect import ConnectException
from sluiceway.connect.config import ConfigException, ConfigType
from sluiceway.connect.worker_settings import (
    EXECUTOR_CONFIG_DEF,
    METRICS_TASK_COUNTS_ENABLE_CONFIG,
    WORKER_CONFIG_DEF,
    check_worker_settings,
    worker_default,
)
from sluiceway_executor.main import parse_args
from sluiceway_executor.own_config import load_own_config
from sluiceway_executor.pipelines.observed import Observed, counts_enabled

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KEY = METRICS_TASK_COUNTS_ENABLE_CONFIG
VARIABLE = "SLUICEWAY_METRICS_TASK_COUNTS_ENABLE"


def test_it_is_a_boolean_both_processes_know_on_by_default() -> None:
    assert KEY == "metrics.task.counts.enable"
    assert worker_default(KEY) == "true"
    for definition in (WORKER_CONFIG_DEF, EXECUTOR_CONFIG_DEF):
        assert definition.keys()[KEY].type is ConfigType.BOOLEAN
    # The control plane checks the value it would hand on to executors.
    check_worker_settings({KEY: "FALSE"})
    with pytest.raises(ConfigException, match=KEY):
        check_worker_settings({KEY: "off"})


@pytest.mark.parametrize(
    ("config", "expected"),
    [({}, True), ({KEY: "true"}, True), ({KEY: " False "}, False), ({KEY: "false"}, False)],
)
def test_the_pipelines_read_it_with_counting_on_when_unset(config: dict[str, str], expected: bool) -> None:
    assert counts_enabled(config) is expected


def test_a_value_that_is_not_a_boolean_fails_the_task_naming_the_key() -> None:
    with pytest.raises(ConnectException, match=f"{KEY}: expected true or false, got 'no'"):
        counts_enabled({KEY: "no"})


def test_an_executor_takes_it_from_its_variable_and_refuses_a_bad_one_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_own_config(None, {VARIABLE: "false"}) == {KEY: "false"}
    monkeypatch.setenv(VARIABLE, "false")
    assert counts_enabled(parse_args([]).worker_config) is False
    monkeypatch.setenv(VARIABLE, "sometimes")
    with pytest.raises(SystemExit):
        parse_args([])


def test_with_counting_off_the_frame_is_left_as_it_is_and_has_no_tally() -> None:
    frame = cast("DataFrame", object())  # never touched: no Spark is needed
    observed = Observed("read", sized=True, enabled=False)
    assert observed.watch(frame) is frame
    assert observed.tally() is None
