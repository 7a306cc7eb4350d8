"""Retries of failed calls: which codes, how long to wait, and never past the caller's deadline.

One logical call (e.g. `create_connector`) owns one `Attempts`: it fixes the overall deadline
once, hands each attempt the time that remains as its gRPC timeout, and decides after each
failure whether another attempt fits. Waits use exponential backoff with full jitter, and a
server's `google.rpc.RetryInfo` delay, when it sends one, is the wait: it knows when trying again
makes sense (a control plane electing a leader asks for about half a second).

An address where nothing can be connected to at all (the connection refused, the host name not
resolving, the TLS handshake failing) is a different case: until some call through the same
`Retrier` has reached a server, such failures are retried only for `connect_patience` seconds,
so a mistyped address or a server that is not running is reported at once instead of at the end
of the deadline. Once a server has answered, the full deadline applies again: then a refused
connection is most likely a restarting replica.

The client keeps its own loop, for the server's hint and the request id every attempt re-sends,
but its backoff and deadline are the shared ones of `sluiceway.common.retry`: `RetryPolicy.backoff` is
the shared policy its waits are drawn from, and `Attempts` counts down a `sluiceway.common.retry.Deadline`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random as _random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from typing import Protocol, TypeVar

import grpc

from sluiceway.common import retry as shared
from sluiceway.errors import SluicewayError, from_rpc_error

__all__ = ["AsyncStreamCall", "Attempts", "Retrier", "RetryPolicy", "StreamCall", "is_connect_failure"]

_R = TypeVar("_R")
_R_co = TypeVar("_R_co", covariant=True)


class StreamCall(Protocol[_R_co]):
    """What a sync server-streaming stub call returns: an iterator that can be cancelled."""

    def __iter__(self) -> Iterator[_R_co]: ...
    def __next__(self) -> _R_co: ...
    def cancel(self) -> bool: ...


class AsyncStreamCall(Protocol):
    """What a grpc.aio server-streaming stub call returns (read() yields grpc.aio.EOF last)."""

    async def read(self) -> object: ...
    def cancel(self) -> bool: ...


Clock = Callable[[], float]
RandomSource = Callable[[], float]

# How gRPC itself words an UNAVAILABLE for an address it could not open a connection to (refused,
# a host name that does not resolve, a TLS handshake that failed): no server was involved.
_CONNECT_FAILURE_TEXTS = (
    "failed to connect to all addresses",
    "connection refused",
    "errors resolving",
    "dns resolution failed",
)


def is_connect_failure(error: SluicewayError) -> bool:
    """Whether `error` is gRPC's own report that no connection could be made, as opposed to an
    UNAVAILABLE a server answered (which carries a google.rpc.Status) or a connection that broke."""
    if error.code != grpc.StatusCode.UNAVAILABLE or error.status is not None:
        return False
    text = error.message.lower()
    return any(marker in text for marker in _CONNECT_FAILURE_TEXTS)


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed calls are retried.

    Only codes in `retryable_codes` are retried (by default UNAVAILABLE: no leader, a replica
    or Kafka briefly unreachable). Mutations stay safe to retry because each logical call
    sends one `request_id` with every attempt. DEADLINE_EXCEEDED is never worth retrying:
    the caller's deadline bounds all attempts together.
    """

    # Total attempts including the first; 1 disables retries. The call's deadline usually ends the
    # retries first: this bound is high enough to ride out a control-plane election.
    max_attempts: int = 100
    # Seconds; the ceiling of the first wait, which then grows by `backoff_multiplier`.
    initial_backoff: float = 0.1
    backoff_multiplier: float = 2.0
    max_backoff: float = 5.0
    retryable_codes: frozenset[grpc.StatusCode] = frozenset({grpc.StatusCode.UNAVAILABLE})
    # Wait the server's RetryInfo.retry_delay when it sends one...
    honor_retry_info: bool = True
    # ...but no longer than this, so a misbehaving server cannot park the client.
    max_retry_info_delay: float = 60.0
    # Seconds a call keeps retrying failures to connect at all (see `is_connect_failure`) while no
    # call through its Retrier has reached a server yet; None retries them like any UNAVAILABLE.
    connect_patience: float | None = 2.0
    # The shared policy the waits come from, derived from the fields above. Full jitter (a wait
    # anywhere below the ceiling) is the shared jitter of 1 around half the ceiling.
    backoff: shared.RetryPolicy = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.max_retry_info_delay < 0:
            raise ValueError("backoff delays must not be negative")
        if self.connect_patience is not None and self.connect_patience < 0:
            raise ValueError("connect_patience must not be negative")
        if self.backoff_multiplier < 1:
            raise ValueError("backoff_multiplier must be at least 1")
        backoff = shared.RetryPolicy(
            initial=self.initial_backoff / 2,
            maximum=self.max_backoff / 2,
            multiplier=self.backoff_multiplier,
            jitter=1.0,
            max_attempts=self.max_attempts,
        )
        object.__setattr__(self, "backoff", backoff)

    @classmethod
    def disabled(cls) -> RetryPolicy:
        """Every call makes exactly one attempt."""
        return cls(max_attempts=1)

    @classmethod
    def including_resource_exhausted(cls) -> RetryPolicy:
        """The default policy, also retrying RESOURCE_EXHAUSTED (e.g. behind a rate limiter)."""
        return cls(
            retryable_codes=frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})
        )

    def is_retryable(self, error: SluicewayError) -> bool:
        return error.code in self.retryable_codes

    def backoff_ceiling(self, retry: int) -> float:
        """Upper bound of the wait before retry number `retry` (1 = the second attempt)."""
        return self.backoff.ceiling(retry)

    def delay(self, retry: int, error: SluicewayError, random: RandomSource) -> float:
        """The wait before retry number `retry` after `error`: the server's RetryInfo delay when
        there is one (capped by max_retry_info_delay), else full jitter, i.e. uniform in
        [0, ceiling)."""
        if self.honor_retry_info and error.retry_delay is not None:
            return min(error.retry_delay, self.max_retry_info_delay)
        return self.backoff.delay(retry, random())


class Attempts:
    """The retry state of one logical call."""

    def __init__(
        self,
        policy: RetryPolicy,
        timeout: float | None,
        *,
        clock: Clock,
        random: RandomSource,
        reached_server: Callable[[], bool] | None = None,
    ) -> None:
        self._policy = policy
        self._random = random
        self._clock = clock
        self._started = clock()
        self._deadline = shared.Deadline(timeout, clock=clock)
        # Whether a server has ever answered the caller (None: not known, taken as not yet).
        self._reached_server = reached_server
        self.attempt = 0
        self.last_error: SluicewayError | None = None

    @property
    def deadline(self) -> float | None:
        """The overall deadline on the retrier's clock, or None without one."""
        return self._deadline.at

    def remaining(self) -> float | None:
        return None if self._deadline.at is None else self._deadline.remaining()

    def begin(self) -> float | None:
        """Starts the next attempt and returns its gRPC timeout: whatever is left of the
        overall deadline. Raises the previous failure if nothing is left."""
        remaining = self.remaining()
        if remaining is not None and remaining <= 0 and self.last_error is not None:
            raise self.last_error
        self.attempt += 1
        if remaining is None:
            return None
        # A zero or negative timeout would make grpc fail the call with an unhelpful error.
        return max(remaining, 1e-3)

    def next_delay(self, error: SluicewayError) -> float | None:
        """After a failed attempt: how long to wait before the next one, or None to give up
        (not retryable, attempts used up, the wait would run past the deadline, or no connection
        could be made for longer than the policy's connect_patience)."""
        self.last_error = error
        if not self._policy.is_retryable(error) or self.attempt >= self._policy.max_attempts:
            return None
        delay = self._policy.delay(self.attempt, error, self._random)
        if self._past_connect_patience(error, delay):
            return None
        remaining = self.remaining()
        if remaining is not None and delay >= remaining:
            return None
        return delay

    def _past_connect_patience(self, error: SluicewayError, delay: float) -> bool:
        patience = self._policy.connect_patience
        if patience is None or not is_connect_failure(error):
            return False
        if self._reached_server is not None and self._reached_server():
            return False
        return self._clock() - self._started + delay > patience


class Retrier:
    """Runs calls under a policy; the clock, sleep and random source are injectable so tests
    and simulations need not wait in real time.

    It also remembers whether any of its calls has reached a server (`reached_server`), which
    decides how long failures to connect are retried (`RetryPolicy.connect_patience`): each
    client builds its own, and one passed to a client should serve that client alone."""

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: RandomSource = _random.random,
    ) -> None:
        self.policy = policy if policy is not None else RetryPolicy()
        self._clock = clock
        self._sleep = sleep
        self._async_sleep = async_sleep
        self._random = random
        # Set by the first answer of a server to any call: a success, or any failure but gRPC's
        # own report that it could not connect.
        self.reached_server = False

    def attempts(self, timeout: float | None) -> Attempts:
        return Attempts(
            self.policy,
            timeout,
            clock=self._clock,
            random=self._random,
            reached_server=lambda: self.reached_server,
        )

    def _answered(self, result: _R) -> _R:
        self.reached_server = True
        return result

    def _error_of(self, exc: grpc.RpcError) -> SluicewayError:
        error = from_rpc_error(exc)
        if not is_connect_failure(error):
            self.reached_server = True
        return error

    def call(self, timeout: float | None, invoke: Callable[[float | None], _R]) -> _R:
        """Calls `invoke(attempt_timeout)` until it succeeds or must give up; raises
        SluicewayError, never grpc.RpcError."""
        attempts = self.attempts(timeout)
        while True:
            attempt_timeout = attempts.begin()
            try:
                return self._answered(invoke(attempt_timeout))
            except grpc.RpcError as exc:
                error = self._error_of(exc)
                delay = attempts.next_delay(error)
                if delay is None:
                    raise error from exc
            self._sleep(delay)

    async def call_async(self, timeout: float | None, invoke: Callable[[float | None], Awaitable[_R]]) -> _R:
        attempts = self.attempts(timeout)
        while True:
            attempt_timeout = attempts.begin()
            try:
                return self._answered(await invoke(attempt_timeout))
            except grpc.RpcError as exc:
                error = self._error_of(exc)
                delay = attempts.next_delay(error)
                if delay is None:
                    raise error from exc
            await self._async_sleep(delay)

    def stream(
        self, timeout: float | None, open_call: Callable[[float | None], StreamCall[_R]]
    ) -> Generator[_R, None, None]:
        """Opens a server stream, retrying only until its first message arrives: after that,
        a retry could repeat or lose messages the caller has already seen, so failures are
        raised. The call is cancelled when the caller stops iterating."""
        attempts = self.attempts(timeout)
        while True:
            attempt_timeout = attempts.begin()
            call = open_call(attempt_timeout)
            try:
                first = self._answered(next(call))
            except StopIteration:
                self.reached_server = True
                return
            except grpc.RpcError as exc:
                error = self._error_of(exc)
                delay = attempts.next_delay(error)
                if delay is None:
                    raise error from exc
                self._sleep(delay)
                continue
            except BaseException:
                # Interrupted while waiting for the first message: do not leave it open.
                call.cancel()
                raise
            break
        try:
            yield first
            try:
                yield from call
            except grpc.RpcError as exc:
                raise from_rpc_error(exc) from exc
        finally:
            call.cancel()

    async def stream_async(
        self,
        timeout: float | None,
        open_call: Callable[[float | None], AsyncStreamCall],
        message_type: type[_R],
    ) -> AsyncGenerator[_R, None]:
        """The asyncio twin of `stream`."""
        attempts = self.attempts(timeout)
        while True:
            attempt_timeout = attempts.begin()
            call = open_call(attempt_timeout)
            try:
                first = self._answered(await call.read())
            except grpc.RpcError as exc:
                call.cancel()
                error = self._error_of(exc)
                delay = attempts.next_delay(error)
                if delay is None:
                    raise error from exc
                await self._async_sleep(delay)
                continue
            except BaseException:
                # Cancelled (asyncio) while waiting for the first message: end the call too.
                call.cancel()
                raise
            break
        try:
            message = first
            # read() after read() is the only way to continue: grpc.aio forbids mixing it
            # with async iteration on the same call.
            while message is not grpc.aio.EOF:
                if not isinstance(message, message_type):
                    raise TypeError(f"expected {message_type.__name__}, got {type(message).__name__}")
                yield message
                try:
                    message = await call.read()
                except grpc.RpcError as exc:
                    raise from_rpc_error(exc) from exc
        finally:
            call.cancel()
