"""The automatic-restart policy (`task.restart.*`) and the schedule a runner follows after failures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.connect.config import ConfigException
from sluiceway.connect.restart_config import RestartPolicy
from sluiceway_executor.failures import FailureKind
from sluiceway_executor.restarts import (
    INFRA_BACKOFF_MAX_S,
    INFRA_BACKOFF_MIN_S,
    Failure,
    Next,
    RestartSchedule,
)


def test_defaults_restart_forever_from_one_second_doubling_to_a_minute() -> None:
    policy = RestartPolicy.from_configs({}, {})
    assert policy == RestartPolicy(True, 1000, 60000, -1)
    assert [policy.delay_ms(n) for n in range(1, 9)] == [1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]
    assert policy.allows(10_000) and policy.delay_ms(10_000) == 60000


def test_the_connector_wins_key_by_key_and_blank_values_fall_back_to_the_worker() -> None:
    policy = RestartPolicy.from_configs(
        {"task.restart.max.attempts": "5", "task.restart.backoff.initial.ms": "200"},
        {"task.restart.max.attempts": "2", "task.restart.backoff.initial.ms": "  "},
    )
    assert (policy.max_attempts, policy.backoff_initial_ms) == (2, 200)


def test_limits_and_off() -> None:
    assert [RestartPolicy(max_attempts=2).allows(n) for n in (1, 2, 3)] == [True, True, False]
    assert not RestartPolicy(max_attempts=0).allows(1)
    assert not RestartPolicy(enabled=False).allows(1)


def test_a_bad_value_names_its_key() -> None:
    with pytest.raises(ConfigException) as caught:
        RestartPolicy.from_configs({}, {"task.restart.backoff.initial.ms": "-1"})
    assert caught.value.name == "task.restart.backoff.initial.ms"


@given(
    initial=st.integers(1, 10**6),
    maximum=st.integers(1, 10**7),
    attempt=st.integers(1, 10**4),
    variation=st.floats(0.0, 2.0),
)
def test_a_pause_stays_within_a_fifth_of_its_nominal_length_and_never_shrinks(
    initial: int, maximum: int, attempt: int, variation: float
) -> None:
    policy = RestartPolicy(True, initial, maximum, -1)
    nominal = policy.delay_ms(attempt)
    assert nominal <= max(maximum, 1) and nominal == min(initial * 2 ** min(attempt - 1, 40), maximum)
    assert nominal <= policy.delay_ms(attempt + 1)
    assert round(nominal * 0.8) <= policy.delay_ms(attempt, variation) <= round(nominal * 1.2)


def failure(kind: FailureKind, ran_for: float = 0.0, worked: bool = False) -> Failure:
    return Failure(kind, "a batch failed", "trace", ran_for, worked)


def test_the_schedule_counts_only_the_tasks_own_failures() -> None:
    schedule = RestartSchedule(RestartPolicy(True, 100, 1000, 2), can_renew_session=True, random=lambda: 0.5)
    assert schedule.after(failure(FailureKind.SPARK_SESSION)).action is Next.RENEW_SESSION
    infra = [schedule.after(failure(FailureKind.INFRASTRUCTURE)) for _ in range(7)]
    assert [s.delay for s in infra] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert all(s.action is Next.WAIT and s.attempt == 0 for s in infra)
    own = [schedule.after(failure(FailureKind.TASK)) for _ in range(3)]
    assert [(s.action, s.delay, s.attempt) for s in own] == [
        (Next.WAIT, 0.1, 1),
        (Next.WAIT, 0.2, 2),
        (Next.GIVE_UP, 0.0, 0),
    ]


def test_a_stable_run_resets_the_count_and_a_working_run_the_infrastructure_pause() -> None:
    schedule = RestartSchedule(RestartPolicy(True, 100, 1000, -1), can_renew_session=True, random=lambda: 0.5)
    assert schedule.after(failure(FailureKind.TASK)).attempt == 1
    assert schedule.after(failure(FailureKind.TASK, ran_for=0.5)).attempt == 2
    assert schedule.after(failure(FailureKind.TASK, ran_for=1.0)).attempt == 1
    assert schedule.after(failure(FailureKind.INFRASTRUCTURE)).delay == INFRA_BACKOFF_MIN_S
    assert schedule.after(failure(FailureKind.INFRASTRUCTURE)).delay == 2 * INFRA_BACKOFF_MIN_S
    assert schedule.after(failure(FailureKind.INFRASTRUCTURE, worked=True)).delay == INFRA_BACKOFF_MIN_S
    assert INFRA_BACKOFF_MAX_S == 30.0


def test_without_a_session_keeper_a_lost_session_is_waited_for_like_the_infrastructure() -> None:
    schedule = RestartSchedule(RestartPolicy(enabled=False), can_renew_session=False, random=lambda: 0.5)
    step = schedule.after(failure(FailureKind.SPARK_SESSION))
    assert (step.action, step.delay, step.attempt) == (Next.WAIT, 1.0, 0)


def test_pauses_vary_by_at_most_a_fifth() -> None:
    # Draws outside [0, 1] count as its ends.
    wild = iter([5.0, -3.0])
    schedule = RestartSchedule(
        RestartPolicy(True, 1000, 60000, -1), can_renew_session=True, random=lambda: next(wild)
    )
    assert schedule.after(failure(FailureKind.TASK)).delay == pytest.approx(1.2)
    assert schedule.after(failure(FailureKind.TASK)).delay == pytest.approx(1.6)


def test_a_session_lost_again_at_once_is_waited_for_before_the_next_new_session() -> None:
    schedule = RestartSchedule(RestartPolicy(), can_renew_session=True, random=lambda: 0.5)
    lost = failure(FailureKind.SPARK_SESSION)
    steps = [schedule.after(lost) for _ in range(5)]
    assert [(s.action, s.delay) for s in steps] == [
        (Next.RENEW_SESSION, 0.0),
        (Next.WAIT, 1.0),
        (Next.RENEW_SESSION, 0.0),
        (Next.WAIT, 2.0),
        (Next.RENEW_SESSION, 0.0),
    ]
    # A run that completed a batch on its new session gets another new session at once.
    assert schedule.after(failure(FailureKind.SPARK_SESSION, worked=True)).action is Next.RENEW_SESSION
