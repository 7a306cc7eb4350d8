"""The one retry policy of the control plane, the executors and the client.

Every loop that tries a failed call again describes its waits with a :class:`RetryPolicy` (a frozen
value, usually a module constant) and runs on a :class:`Retry`, the state of one run of that loop:
how many waits it has taken and its :class:`Deadline`.

The wait after failed attempt ``n`` (1 for the first) is ``initial * multiplier**(n - 1)``, capped at
``maximum``, times a factor drawn evenly from ``[1 - jitter, 1 + jitter]``: no wait is ever longer
than ``maximum * (1 + jitter)``. ``jitter=1`` is full jitter, anywhere from nothing to twice the
nominal wait. A loop stops trying when its deadline would pass during the wait (so no attempt
starts without time left), when ``max_attempts`` attempts were made, or when the failure is not
transient by the policy's test. Loops that are never to give up on their own (leadership, the
reconciler, attaching to the control plane) have no deadline and end by a stop event or by being
cancelled.

A wait can be taken with ``time.sleep``, on a ``threading.Event`` (set to stop the loop), or on the
event loop with ``asyncio.sleep`` or an ``asyncio.Event``. The clock and the random draws can be
replaced, so tests need not wait in real time.

The Kafka loops use ``sluiceway.common.kafka_errors.transient_exception`` as the transient test, or, where
librdkafka's own flag is the contract, ``retriable_exception`` (that module says where and why).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random as _random
import threading
import time
from collections.abc import Callable

__all__ = [
    "Clock",
    "Deadline",
    "RandomSource",
    "Retry",
    "RetryPolicy",
    "any_error",
    "sleep",
    "sleep_async",
]

# Seconds on a monotonic clock.
Clock = Callable[[], float]
# Even draws from [0, 1).
RandomSource = Callable[[], float]


def any_error(error: BaseException) -> bool:
    """The transient test of loops that try again whatever went wrong."""
    return True


class Deadline:
    """The moment by which something must be done, on a monotonic clock; or none at all."""

    __slots__ = ("_clock", "at")

    def __init__(self, seconds: float | None, *, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.at: float | None = None if seconds is None else clock() + seconds

    def remaining(self, at_least: float = 0.0) -> float:
        """Seconds until the deadline, never below `at_least` (a call given a timeout of nothing
        would fail without trying); infinity without a deadline."""
        if self.at is None:
            return math.inf
        return max(self.at - self._clock(), at_least)

    def expired(self) -> bool:
        return self.at is not None and self._clock() >= self.at

    def left(self, what: str = "operation") -> float:
        """The seconds left for a step of `what`; raises TimeoutError once there are none."""
        if self.at is None:
            return math.inf
        left = self.at - self._clock()
        if left <= 0:
            raise TimeoutError(f"{what} timed out")
        return left


@dataclasses.dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a loop waits between attempts and when it stops (see the module doc)."""

    # Seconds: the nominal wait after the first failure, and the cap of every later nominal wait.
    initial: float
    maximum: float
    # Each nominal wait is this many times the one before (1: always `initial`).
    multiplier: float = 2.0
    # The fraction by which each wait varies either way, between 0 and 1.
    jitter: float = 0.2
    # Seconds from the start of a run after which no attempt begins; None: no limit.
    deadline: float | None = None
    # Attempts in all, the first included; None: no limit.
    max_attempts: int | None = None
    # Whether a failure is worth another attempt.
    transient: Callable[[BaseException], bool] = any_error

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise ValueError("retry delays must not be negative")
        if self.multiplier < 1:
            raise ValueError("the retry multiplier must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("the retry jitter must be between 0 and 1")
        if self.deadline is not None and self.deadline < 0:
            raise ValueError("a retry deadline must not be negative")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def nominal(self, failures: int) -> float:
        """The wait after `failures` failed attempts (1 for the first), before jitter."""
        exponent = max(failures, 1) - 1
        if self.initial == 0 or self.maximum == 0:
            return 0.0
        # Compared as logarithms first: multiplier ** exponent (or maximum / initial) can overflow.
        growth = exponent * math.log(self.multiplier)
        if growth >= math.log(self.maximum) - math.log(self.initial):
            return self.maximum
        try:
            return min(self.maximum, self.initial * self.multiplier**exponent)
        except OverflowError:  # a tiny initial wait, whose growth alone is past the float range
            return min(self.maximum, math.exp(math.log(self.initial) + growth))

    def factor(self, draw: float) -> float:
        """The jitter factor for an even draw from [0, 1): from 1 - jitter up to 1 + jitter."""
        draw = min(max(draw, 0.0), 1.0)
        return 1.0 - self.jitter + 2.0 * self.jitter * draw

    def delay(self, failures: int, draw: float) -> float:
        """The wait after `failures` failed attempts, for an even draw from [0, 1)."""
        return self.nominal(failures) * self.factor(draw)

    def ceiling(self, failures: int) -> float:
        """The longest the wait after `failures` failed attempts can be."""
        return self.nominal(failures) * (1.0 + self.jitter)

    def start(
        self,
        deadline: Deadline | None = None,
        *,
        clock: Clock = time.monotonic,
        random: RandomSource = _random.random,
    ) -> Retry:
        """A new run under this policy, bounded by `deadline` when given, else by the policy's own
        `deadline` counted from now."""
        if deadline is None:
            deadline = Deadline(self.deadline, clock=clock)
        return Retry(self, deadline, random=random)


def sleep(delay: float, stop: threading.Event | None = None) -> bool:
    """Waits `delay` seconds; False (at once) if `stop` is or becomes set meanwhile."""
    if stop is None:
        time.sleep(delay)
        return True
    return not stop.wait(delay)


async def sleep_async(delay: float, stop: asyncio.Event | None = None) -> bool:
    """The event loop's `sleep`: waits `delay` seconds, False if `stop` is or becomes set."""
    if stop is None:
        await asyncio.sleep(delay)
        return True
    try:
        await asyncio.wait_for(stop.wait(), delay)
    except TimeoutError:
        return True
    return False


class Retry:
    """One run of a retrying loop: the failures counted so far and the run's deadline."""

    __slots__ = ("_random", "deadline", "failures", "policy")

    def __init__(self, policy: RetryPolicy, deadline: Deadline, *, random: RandomSource) -> None:
        self.policy = policy
        self.deadline = deadline
        self._random = random
        # Failed attempts so far, which is also the number of waits asked for.
        self.failures = 0

    def reset(self) -> None:
        """Starts the waits again from `initial` (after an attempt that worked); the deadline stays."""
        self.failures = 0

    def next_delay(self) -> float | None:
        """Counts one more failure and returns the wait before the next attempt, or None when there
        is to be no next attempt: attempts used up, or the deadline would pass before it."""
        self.failures += 1
        if self.policy.max_attempts is not None and self.failures >= self.policy.max_attempts:
            return None
        delay = self.policy.delay(self.failures, self._random())
        if delay >= self.deadline.remaining():
            return None
        return delay

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Takes the next wait; False, without waiting out the delay, when the run is to stop (see
        `next_delay`) or `stop` is set."""
        delay = self.next_delay()
        return delay is not None and sleep(delay, stop)

    async def wait_async(self, stop: asyncio.Event | None = None) -> bool:
        """`wait` on the event loop."""
        delay = self.next_delay()
        return delay is not None and await sleep_async(delay, stop)

    def again(self, error: BaseException, stop: threading.Event | None = None) -> bool:
        """After `error`: whether to try again, having waited; False at once for an error the
        policy does not count as transient."""
        return self.policy.transient(error) and self.wait(stop)
