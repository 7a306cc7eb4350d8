"""Retries: which codes, backoff bounds, RetryInfo, the overall deadline, request ids and
streams. A virtual clock makes the waits instant; the server still sees real gRPC deadlines."""

from __future__ import annotations

import asyncio
import random
import time

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.client import AsyncSluicewayClient, Retrier, RetryPolicy, SluicewayClient
from sluiceway.client._retry import Attempts
from sluiceway.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    ResourceExhaustedError,
    SluicewayError,
    UnavailableError,
)
from tests.unit.client.fake_control_plane import DATAGEN, Served, VirtualClock, rich_status

CONFIG = {"connector.class": DATAGEN, "topic": "t"}


def _unavailable(retry_delay: float | None = None) -> grpc.Status:
    return rich_status(grpc.StatusCode.UNAVAILABLE, "no leader", "NO_LEADER", retry_delay=retry_delay)


def _client(
    served: Served, clock: VirtualClock, policy: RetryPolicy | None = None, **kwargs: object
) -> SluicewayClient:
    retrier = Retrier(policy, clock=clock, sleep=clock.sleep, random=lambda: 0.5)
    return SluicewayClient(served.target, retrier=retrier, **kwargs)  # type: ignore[arg-type]


# --- the policy itself ----------------------------------------------------------------------


def test_default_policy() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 100
    assert (policy.initial_backoff, policy.backoff_multiplier, policy.max_backoff) == (0.1, 2.0, 5.0)
    assert policy.retryable_codes == {grpc.StatusCode.UNAVAILABLE}
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in RetryPolicy.including_resource_exhausted().retryable_codes
    assert RetryPolicy.disabled().max_attempts == 1


def test_backoff_ceiling_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy()
    assert [policy.backoff_ceiling(n) for n in range(1, 9)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    )
    assert policy.backoff_ceiling(10_000) == 5.0


@pytest.mark.parametrize(
    "kwargs",
    [{"max_attempts": 0}, {"initial_backoff": -1}, {"backoff_multiplier": 0.5}, {"max_backoff": -0.1}],
)
def test_invalid_policies_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


@given(
    retry=st.integers(min_value=1, max_value=200),
    draw=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    server_delay=st.none() | st.floats(min_value=0.0, max_value=1000.0),
)
def test_delay_is_the_servers_retry_info_else_full_jitter(
    retry: int, draw: float, server_delay: float | None
) -> None:
    policy = RetryPolicy()
    error = UnavailableError("down", retry_delay=server_delay)
    delay = policy.delay(retry, error, lambda: draw)
    ceiling = policy.backoff_ceiling(retry)
    assert delay >= 0
    if server_delay is None:
        assert delay == pytest.approx(draw * ceiling)
        assert delay < ceiling or ceiling == 0
    else:
        assert delay == min(server_delay, policy.max_retry_info_delay)


def test_retry_info_can_be_ignored() -> None:
    policy = RetryPolicy(honor_retry_info=False)
    assert policy.delay(1, UnavailableError("x", retry_delay=30.0), lambda: 0.5) == pytest.approx(0.05)


def test_attempts_stop_at_max_attempts_and_before_the_deadline() -> None:
    clock = VirtualClock()
    attempts = Attempts(RetryPolicy(max_attempts=3), None, clock=clock, random=lambda: 0.5)
    error = UnavailableError("down")
    delays = []
    while True:
        assert attempts.begin() is None
        delay = attempts.next_delay(error)
        if delay is None:
            break
        delays.append(delay)
    assert attempts.attempt == 3
    assert delays == pytest.approx([0.05, 0.1])

    attempts = Attempts(RetryPolicy(), 1.0, clock=clock, random=lambda: 0.5)
    assert attempts.begin() == pytest.approx(1.0)
    # The server asks for 2 s but only 1 s is left: give up now rather than sleep past it.
    assert attempts.next_delay(UnavailableError("down", retry_delay=2.0)) is None
    assert attempts.next_delay(FailedPreconditionError("no")) is None


# --- against a server -------------------------------------------------------------------------


def test_unavailable_is_retried_with_the_same_request_id(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("CreateConnector", _unavailable(retry_delay=0.5), times=2)
    with _client(served, clock) as client:
        created = client.create_connector("gen", CONFIG)
    assert created.name == "gen"
    attempts = served.fake.attempts_of("CreateConnector")
    assert len(attempts) == 3
    ids = {a.request.request_id for a in attempts}
    assert len(ids) == 1
    assert ids.pop() != ""
    # RetryInfo's 0.5 s beats the jittered backoff (0.05 s, 0.1 s).
    assert clock.sleeps == pytest.approx([0.5, 0.5])


def test_each_attempt_gets_the_remaining_time(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("GetServerInfo", _unavailable(retry_delay=3.0), times=2)
    with _client(served, clock, timeout=10.0) as client:
        client.server_info()
    remaining = [a.time_remaining for a in served.fake.attempts_of("GetServerInfo")]
    assert len(remaining) == 3
    # The server sees the real gRPC deadline of each attempt: 10 s, then 7 s, then 4 s
    # (the grpc-timeout header rounds up a little).
    for seen, expected in zip(remaining, [10.0, 7.0, 4.0], strict=True):
        assert seen is not None
        assert expected - 1.0 < seen <= expected + 0.5


def test_retries_never_run_past_the_deadline(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("GetServerInfo", _unavailable(retry_delay=3.0), times=100)
    start = clock.now
    with _client(served, clock, timeout=10.0) as client, pytest.raises(UnavailableError) as info:
        client.server_info()
    # Attempts at t = 0, 3, 6, 9; a fifth would start after the deadline.
    assert len(served.fake.attempts_of("GetServerInfo")) == 4
    assert clock.now - start <= 10.0
    assert info.value.reason == "NO_LEADER"


def test_retries_stop_after_max_attempts(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("GetServerInfo", _unavailable(), times=200)
    with _client(served, clock, timeout=None) as client, pytest.raises(UnavailableError):
        client.server_info()
    assert len(served.fake.attempts_of("GetServerInfo")) == 100
    assert clock.sleeps == pytest.approx([0.5 * min(5.0, 0.1 * 2**n) for n in range(99)])


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL],
)
def test_other_codes_are_not_retried(served: Served, clock: VirtualClock, code: grpc.StatusCode) -> None:
    served.fake.fail("GetServerInfo", rich_status(code, "nope", "SOMETHING"), times=5)
    with _client(served, clock) as client, pytest.raises(SluicewayError) as info:
        client.server_info()
    assert info.value.code is code
    assert len(served.fake.attempts_of("GetServerInfo")) == 1
    assert clock.sleeps == []


def test_resource_exhausted_is_retried_only_when_asked(served: Served, clock: VirtualClock) -> None:
    exhausted = rich_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down", "RATE_LIMITED")
    served.fake.fail("GetServerInfo", exhausted, times=1)
    with _client(served, clock) as client, pytest.raises(ResourceExhaustedError):
        client.server_info()
    served.fake.fail("GetServerInfo", exhausted, times=1)
    with _client(served, clock, RetryPolicy.including_resource_exhausted()) as client:
        assert client.server_info().version == "0.1.0"


def test_a_real_deadline_is_enforced(served: Served) -> None:
    served.fake.fail("GetServerInfo", _unavailable(), times=1, delay=2.0)
    with SluicewayClient(served.target, timeout=0.3) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            client.server_info()
    assert time.monotonic() - started < 1.9


def test_per_call_timeout_overrides_the_client_default(served: Served, clock: VirtualClock) -> None:
    with _client(served, clock, timeout=30.0) as client:
        client.server_info(timeout=5.0)
        client.server_info(timeout=None)
        client.server_info()
    first, second, third = (a.time_remaining for a in served.fake.attempts_of("GetServerInfo"))
    assert first is not None
    assert 4.0 < first <= 5.5
    # No deadline: grpc reports an effectively infinite remaining time.
    assert second is None or second > 1e6
    assert third is not None
    assert 29.0 < third <= 30.5


def test_every_logical_call_gets_its_own_request_id(served: Served, clock: VirtualClock) -> None:
    served.fake.add_connector("gen")
    with _client(served, clock) as client:
        client.pause_connector("gen")
        client.pause_connector("gen")
        client.pause_connector("gen", request_id="mine-1")
    ids = [a.request.request_id for a in served.fake.attempts_of("PauseConnector")]
    assert len(set(ids)) == 3
    assert ids[2] == "mine-1"


def test_metadata_is_sent_on_every_attempt(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("GetServerInfo", _unavailable(), times=1)
    with _client(served, clock, metadata=[("authorization", "Bearer t")]) as client:
        client.server_info()
    assert [a.metadata.get("authorization") for a in served.fake.attempts_of("GetServerInfo")] == [
        "Bearer t",
        "Bearer t",
    ]


def test_upper_case_metadata_keys_are_rejected_early() -> None:
    with pytest.raises(ValueError, match="lower case"):
        SluicewayClient("127.0.0.1:1", metadata=[("Authorization", "x")])


# --- streams -----------------------------------------------------------------------------------


def test_stream_opening_is_retried(served: Served, clock: VirtualClock) -> None:
    served.fake.add_connector("gen", tasks=2)
    served.fake.fail("WatchStatus", _unavailable(retry_delay=1.0), times=2)
    with _client(served, clock) as client:
        events = list(client.watch_status("gen"))
    assert [(e.connector, e.task) for e in events] == [("gen", None), ("gen", 0), ("gen", 1)]
    assert len(served.fake.attempts_of("WatchStatus")) == 3
    assert clock.sleeps == pytest.approx([1.0, 1.0])


def test_stream_failure_after_the_first_message_is_raised(served: Served, clock: VirtualClock) -> None:
    served.fake.add_connector("gen", tasks=2)
    served.fake.watch_fail_after_first = True
    received = []
    with _client(served, clock) as client:
        stream = client.watch_status()
        received.append(next(stream).raw.name)
        with pytest.raises(UnavailableError) as info:
            next(stream)
    assert received == ["connectors/gen"]
    assert info.value.reason == "STORAGE_UNAVAILABLE"
    assert len(served.fake.attempts_of("WatchStatus")) == 1


def test_stream_can_be_abandoned(served: Served, clock: VirtualClock) -> None:
    served.fake.add_connector("gen", tasks=3)
    with _client(served, clock) as client:
        stream = client.watch_status(include_initial=True)
        first = next(stream)
        stream.close()  # type: ignore[attr-defined]
        assert (first.connector, first.task) == ("gen", None)
        # The channel still works after the cancelled stream.
        assert client.server_info().version == "0.1.0"


# --- asyncio -----------------------------------------------------------------------------------


def test_async_client_retries_with_the_same_request_id(served: Served, clock: VirtualClock) -> None:
    served.fake.fail("CreateConnector", _unavailable(retry_delay=3.0), times=2)
    served.fake.fail("WatchStatus", _unavailable(), times=1)

    async def scenario() -> list[str]:
        retrier = Retrier(clock=clock, sleep=clock.sleep, async_sleep=clock.async_sleep, random=random.random)
        async with AsyncSluicewayClient(served.target, retrier=retrier, timeout=10.0) as client:
            await client.create_connector("gen", CONFIG)
            return [event.raw.name async for event in client.watch_status("gen")]

    names = asyncio.run(scenario())
    assert names == ["connectors/gen", "connectors/gen/tasks/0"]
    attempts = served.fake.attempts_of("CreateConnector")
    assert len(attempts) == 3
    assert len({a.request.request_id for a in attempts}) == 1
    # gRPC rounds the grpc-timeout header up to a few significant digits, hence whole seconds.
    for attempt, expected in zip(attempts, [10.0, 7.0, 4.0], strict=True):
        assert attempt.time_remaining is not None
        assert expected - 1.0 < attempt.time_remaining <= expected + 0.5
    assert clock.sleeps[:2] == pytest.approx([3.0, 3.0])
    assert len(served.fake.attempts_of("WatchStatus")) == 2


def test_async_stream_failure_after_first_message(served: Served, clock: VirtualClock) -> None:
    served.fake.add_connector("gen")
    served.fake.watch_fail_after_first = True

    async def scenario() -> list[str]:
        received: list[str] = []
        retrier = Retrier(clock=clock, sleep=clock.sleep, async_sleep=clock.async_sleep)
        async with AsyncSluicewayClient(served.target, retrier=retrier) as client:
            stream = client.watch_status()
            received.append((await anext(stream)).raw.name)
            with pytest.raises(UnavailableError):
                await anext(stream)
        return received

    assert asyncio.run(scenario()) == ["connectors/gen"]
    assert len(served.fake.attempts_of("WatchStatus")) == 1


def test_async_deadline_is_enforced(served: Served) -> None:
    served.fake.fail("GetServerInfo", _unavailable(), times=1, delay=2.0)

    async def scenario() -> None:
        async with AsyncSluicewayClient(served.target, timeout=0.3) as client:
            await client.server_info()

    with pytest.raises(DeadlineExceededError):
        asyncio.run(scenario())
