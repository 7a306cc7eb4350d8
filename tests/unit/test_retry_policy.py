"""The shared retry policy (sluiceway.common.retry): how waits grow and vary, that a run never waits past
its deadline or beyond its attempts, the stop events, and the Kafka transient tests the loops hand
it (sluiceway.common.kafka_errors). A virtual clock stands in for time wherever a run is simulated."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.common.kafka_errors import flagged_retriable, retriable_exception, transient_exception
from sluiceway.common.retry import Deadline, RetryPolicy, sleep, sleep_async


class Clock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def draws(values: list[float]) -> Iterator[float]:
    yield from values
    while True:
        yield 0.5


seconds = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)
positive = st.floats(min_value=1e-6, max_value=1e4, allow_nan=False)
policies = st.builds(
    RetryPolicy,
    initial=seconds,
    maximum=seconds,
    multiplier=st.floats(min_value=1.0, max_value=10.0),
    jitter=st.floats(min_value=0.0, max_value=1.0),
)
draw = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


# --- the waits --------------------------------------------------------------------------------


@given(policy=policies, failures=st.integers(min_value=1, max_value=10_000))
def test_nominal_waits_grow_and_stop_at_the_maximum(policy: RetryPolicy, failures: int) -> None:
    nominal = policy.nominal(failures)
    assert 0.0 <= nominal <= policy.maximum
    assert nominal <= policy.nominal(failures + 1)
    assert policy.nominal(1) == min(policy.initial, policy.maximum)


@given(policy=policies, failures=st.integers(min_value=1, max_value=10_000), u=draw)
def test_a_wait_stays_within_the_jitter_of_its_nominal_length(
    policy: RetryPolicy, failures: int, u: float
) -> None:
    nominal = policy.nominal(failures)
    delay = policy.delay(failures, u)
    assert nominal * (1 - policy.jitter) - 1e-9 <= delay <= nominal * (1 + policy.jitter) + 1e-9
    assert delay <= policy.maximum * (1 + policy.jitter) + 1e-9
    assert delay <= policy.ceiling(failures) + 1e-9


@given(policy=policies, low=draw, high=draw)
def test_a_larger_draw_never_gives_a_shorter_wait(policy: RetryPolicy, low: float, high: float) -> None:
    low, high = min(low, high), max(low, high)
    assert policy.factor(low) <= policy.factor(high)
    # Draws outside [0, 1] count as its ends.
    assert policy.factor(-5.0) == policy.factor(0.0)
    assert policy.factor(7.0) == policy.factor(1.0)


def test_a_doubling_policy_and_its_cap() -> None:
    policy = RetryPolicy(initial=0.5, maximum=10.0)
    assert [policy.nominal(n) for n in range(1, 8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert policy.nominal(10**9) == 10.0
    assert policy.delay(3, 0.5) == pytest.approx(2.0)
    assert policy.delay(3, 0.0) == pytest.approx(1.6) and policy.ceiling(3) == pytest.approx(2.4)
    assert RetryPolicy(initial=0.2, maximum=0.2).nominal(50) == 0.2
    assert RetryPolicy(initial=0.0, maximum=5.0).delay(4, 0.9) == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": -1.0, "maximum": 1.0},
        {"initial": 1.0, "maximum": -1.0},
        {"initial": 1.0, "maximum": 2.0, "multiplier": 0.5},
        {"initial": 1.0, "maximum": 2.0, "jitter": 1.5},
        {"initial": 1.0, "maximum": 2.0, "jitter": -0.1},
        {"initial": 1.0, "maximum": 2.0, "deadline": -1.0},
        {"initial": 1.0, "maximum": 2.0, "max_attempts": 0},
    ],
)
def test_invalid_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


# --- a run --------------------------------------------------------------------------------------


@given(
    policy=policies,
    deadline=st.one_of(st.none(), seconds),
    max_attempts=st.one_of(st.none(), st.integers(min_value=1, max_value=50)),
    attempt_seconds=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=60),
    random_draws=st.lists(draw, max_size=60),
)
def test_a_run_never_waits_past_its_deadline_nor_beyond_its_attempts(
    policy: RetryPolicy,
    deadline: float | None,
    max_attempts: int | None,
    attempt_seconds: list[float],
    random_draws: list[float],
) -> None:
    policy = RetryPolicy(
        initial=policy.initial,
        maximum=policy.maximum,
        multiplier=policy.multiplier,
        jitter=policy.jitter,
        deadline=deadline,
        max_attempts=max_attempts,
    )
    clock = Clock()
    source = draws(random_draws)
    run = policy.start(clock=clock, random=lambda: next(source))
    attempts = 0
    for spent in attempt_seconds:
        attempts += 1
        clock.now += spent  # the attempt itself, which failed
        remaining = run.deadline.remaining()
        delay = run.next_delay()
        if delay is None:
            # Only for a reason: attempts used up, or the wait would reach the deadline.
            used_up = max_attempts is not None and attempts >= max_attempts
            assert used_up or (deadline is not None and remaining <= policy.ceiling(run.failures))
            break
        assert delay >= 0.0
        assert delay <= policy.maximum * (1 + policy.jitter) + 1e-9
        if run.deadline.at is not None:
            assert clock.now + delay <= run.deadline.at
        clock.now += delay
    assert max_attempts is None or attempts <= max_attempts


def test_a_run_gives_up_rather_than_start_an_attempt_without_time() -> None:
    clock = Clock()
    run = RetryPolicy(initial=1.0, maximum=1.0, jitter=0.0, deadline=2.5).start(clock=clock)
    assert run.next_delay() == 1.0
    clock.now += 1.0
    assert run.next_delay() == 1.0
    clock.now += 1.0
    # 0.5 s left: a 1 s wait would pass the deadline.
    assert run.next_delay() is None
    assert run.failures == 3


def test_reset_starts_the_waits_again_and_keeps_the_deadline() -> None:
    clock = Clock()
    run = RetryPolicy(initial=1.0, maximum=8.0, jitter=0.0, deadline=100.0).start(clock=clock)
    assert [run.next_delay() for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    at = run.deadline.at
    run.reset()
    assert run.next_delay() == 1.0 and run.deadline.at == at


def test_a_callers_deadline_replaces_the_policys() -> None:
    clock = Clock()
    policy = RetryPolicy(initial=1.0, maximum=1.0, jitter=0.0, deadline=1000.0)
    run = policy.start(Deadline(1.5, clock=clock), clock=clock)
    assert run.next_delay() == 1.0
    clock.now += 1.0
    assert run.next_delay() is None


def test_again_waits_only_for_a_transient_error() -> None:
    policy = RetryPolicy(initial=0.0, maximum=0.0, transient=lambda exc: isinstance(exc, TimeoutError))
    run = policy.start()
    assert not run.again(ValueError("for good"))
    assert run.failures == 0, "a permanent error is not counted"
    assert run.again(TimeoutError("slow"))
    assert run.failures == 1


def test_a_stop_event_ends_a_wait_at_once() -> None:
    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert not RetryPolicy(initial=30.0, maximum=30.0).start().wait(stop)
    assert not sleep(30.0, stop)
    assert time.monotonic() - started < 1.0
    assert sleep(0.0, threading.Event()) and sleep(0.0)


def test_the_event_loop_waits_end_on_their_stop_event_too() -> None:
    async def scenario() -> None:
        stop = asyncio.Event()
        run = RetryPolicy(initial=0.01, maximum=0.01).start()
        assert await run.wait_async()
        assert await run.wait_async(stop)
        assert await sleep_async(0.0)
        asyncio.get_running_loop().call_later(0.05, stop.set)
        started = time.monotonic()
        assert not await sleep_async(30.0, stop)
        assert time.monotonic() - started < 5.0
        assert not await RetryPolicy(initial=30.0, maximum=30.0).start().wait_async(stop)

    asyncio.run(scenario())


# --- deadlines ---------------------------------------------------------------------------------


@given(seconds=positive, passed=seconds, at_least=st.floats(min_value=0.0, max_value=1.0))
def test_a_deadline_counts_down_and_then_refuses(seconds: float, passed: float, at_least: float) -> None:
    clock = Clock()
    deadline = Deadline(seconds, clock=clock)
    clock.now += passed
    left = seconds - passed
    assert deadline.remaining() == pytest.approx(max(left, 0.0), abs=1e-6)
    assert deadline.remaining(at_least) >= at_least
    if deadline.expired():
        with pytest.raises(TimeoutError, match="config write timed out"):
            deadline.left("config write")
    else:
        assert deadline.left("config write") > 0


def test_no_deadline_never_expires() -> None:
    deadline = Deadline(None)
    assert deadline.remaining() == math.inf and deadline.left() == math.inf
    assert not deadline.expired()


# --- the Kafka transient tests -----------------------------------------------------------------


def test_the_shared_transient_test_and_librdkafkas_own_flag() -> None:
    moving = KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "moving"))
    flagged = KafkaException(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))
    refused = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "no"))
    fatal = KafkaError(KafkaError._FENCED, "fenced", fatal=True, retriable=True)
    assert transient_exception(moving) and transient_exception(flagged)
    assert transient_exception(TimeoutError("no answer in time"))
    assert not transient_exception(refused) and not transient_exception(ValueError("x"))
    # The commit and consumer loops ask the flag alone: a code that passes by itself is not enough.
    assert retriable_exception(flagged) and not retriable_exception(moving)
    assert not retriable_exception(TimeoutError("x"))
    assert not flagged_retriable(fatal) and not flagged_retriable(None)
