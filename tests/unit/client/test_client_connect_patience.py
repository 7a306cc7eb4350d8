"""How long the client retries an address it cannot connect to: briefly while no server has ever
answered it (nothing listens there, most likely), as long as the deadline allows once one has (a
replica restarting), and always as long as the deadline allows for an UNAVAILABLE a server sends.
A virtual clock makes the waits instant; the connections and their failures are real."""

from __future__ import annotations

import asyncio
import socket

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]

from sluiceway.client import AsyncSluicewayClient, Retrier, RetryPolicy, SluicewayClient
from sluiceway.client._retry import is_connect_failure
from sluiceway.errors import DeadlineExceededError, UnavailableError
from tests.unit.client.fake_control_plane import Served, VirtualClock, rich_status, serve


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _client(target: str, clock: VirtualClock, policy: RetryPolicy | None = None) -> SluicewayClient:
    retrier = Retrier(policy, clock=clock, sleep=clock.sleep, random=lambda: 0.5)
    return SluicewayClient(target, retrier=retrier, timeout=30)


def test_an_address_nobody_listens_on_is_given_up_after_the_connect_patience(clock: VirtualClock) -> None:
    with _client(f"127.0.0.1:{_unused_port()}", clock) as client, pytest.raises(UnavailableError) as info:
        client.server_info()
    assert is_connect_failure(info.value)
    assert "Connection refused" in info.value.message
    # Several attempts, all within the two seconds of patience, none near the 30 s deadline.
    assert len(clock.sleeps) >= 3
    assert RetryPolicy().connect_patience == 2.0
    assert sum(clock.sleeps) <= 2.0


def test_without_connect_patience_the_whole_deadline_is_used(clock: VirtualClock) -> None:
    policy = RetryPolicy(connect_patience=None)
    with _client(f"127.0.0.1:{_unused_port()}", clock, policy) as client, pytest.raises(UnavailableError):
        client.server_info()
    assert 25 < sum(clock.sleeps) < 30


def test_a_server_that_answered_once_is_waited_for_until_the_deadline(clock: VirtualClock) -> None:
    served = serve()
    client = _client(served.target, clock)
    try:
        client.server_info()
        assert client._retrier.reached_server
        served.server.stop(grace=None).wait()
        with pytest.raises(UnavailableError) as info:
            client.server_info(timeout=10)
    finally:
        client.close()
    assert is_connect_failure(info.value)
    assert 8 < sum(clock.sleeps) < 10


def test_an_unavailable_server_is_retried_beyond_the_connect_patience(
    served: Served, clock: VirtualClock
) -> None:
    # A replica with no leader yet: it answers, with the ErrorInfo and RetryInfo of a live server.
    no_leader = rich_status(grpc.StatusCode.UNAVAILABLE, "no leader", "NO_LEADER", retry_delay=1.0)
    served.fake.fail("GetServerInfo", no_leader, times=5)
    with _client(served.target, clock) as client:
        info = client.server_info()
    assert info.this_replica.id
    assert len(served.fake.attempts_of("GetServerInfo")) == 6
    assert clock.sleeps == pytest.approx([1.0] * 5)


def test_only_grpcs_own_connection_failures_count() -> None:
    refused = "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Connection refused"
    assert is_connect_failure(UnavailableError(refused))
    assert is_connect_failure(
        UnavailableError("errors resolving nowhere.invalid:8083: Domain name not found")
    )
    assert is_connect_failure(UnavailableError("DNS resolution failed for nowhere:8083"))
    # A connection that existed and broke, and anything a server said, are not.
    assert not is_connect_failure(UnavailableError("Socket closed"))
    from_server = UnavailableError(
        refused, status=status_pb2.Status(code=grpc.StatusCode.UNAVAILABLE.value[0])
    )
    assert not is_connect_failure(from_server)
    assert not is_connect_failure(DeadlineExceededError(refused))


def test_connect_patience_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="connect_patience"):
        RetryPolicy(connect_patience=-1)


def test_the_async_client_gives_up_as_soon(clock: VirtualClock) -> None:
    async def call() -> None:
        retrier = Retrier(clock=clock, sleep=clock.sleep, async_sleep=clock.async_sleep, random=lambda: 0.5)
        async with AsyncSluicewayClient(f"127.0.0.1:{_unused_port()}", retrier=retrier, timeout=30) as client:
            await client.server_info()

    with pytest.raises(UnavailableError):
        asyncio.run(call())
    assert 0 < sum(clock.sleeps) <= 2.0
