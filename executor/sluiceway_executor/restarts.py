"""What a task's runner does after a failure: when it runs the task again, and whether it gives up.

The kind of failure decides (``failures.FailureKind``):

- a lost Spark Connect session: build a new one (shared by the executor's tasks) and run again at
  once, counting nothing; if the run on the new session fails the same way before any batch, wait
  as for the infrastructure before the next new session;
- the infrastructure (Kafka, or Spark Connect when no new session can be asked for): wait, from
  ``INFRA_BACKOFF_MIN_S`` doubling up to ``INFRA_BACKOFF_MAX_S``, and run again, counting nothing;
  a task is never FAILED for these;
- the task's own error: the automatic-restart policy (``sluiceway.connect.restart_config``) says
  whether it runs again and after how long; each such restart is numbered.

Both kinds of pause are drawn from a ``sluiceway.common.retry.RetryPolicy``, each varied by up to
``JITTER`` either way.

A run that lasted ``RestartPolicy.stable_after_s`` counts as recovered: the next failure of the task
is numbered 1 again. The infrastructure pause starts again from its minimum after a run that
completed a batch.
"""

from __future__ import annotations

import enum
import random as _random
from dataclasses import dataclass
from typing import Final

from sluiceway.common.retry import RandomSource, RetryPolicy
from sluiceway.connect.restart_config import JITTER, RestartPolicy
from sluiceway_executor.failures import FailureKind

__all__ = ["INFRA_BACKOFF_MAX_S", "INFRA_BACKOFF_MIN_S", "Failure", "Next", "RestartSchedule", "Step"]

INFRA_BACKOFF_MIN_S: Final = 1.0
INFRA_BACKOFF_MAX_S: Final = 30.0
# No deadline: a task waits on its infrastructure for as long as it takes.
_INFRA_RETRY: Final = RetryPolicy(initial=INFRA_BACKOFF_MIN_S, maximum=INFRA_BACKOFF_MAX_S, jitter=JITTER)


@dataclass(frozen=True)
class Failure:
    """One failed run of a task."""

    kind: FailureKind
    what: str  # what the runner was doing, for the log
    trace: str
    # Seconds from the report of RUNNING to the failure (0: the run failed before it ran), and
    # whether the run completed at least one batch.
    ran_for: float = 0.0
    worked: bool = False


class Next(enum.Enum):
    RENEW_SESSION = "renew-session"  # replace the Spark Connect session, then run again
    WAIT = "wait"  # run again after ``Step.delay``
    GIVE_UP = "give-up"  # report FAILED and end


@dataclass(frozen=True)
class Step:
    action: Next
    delay: float = 0.0
    # The number of the automatic restart this step leads to; 0 for a wait on the infrastructure.
    attempt: int = 0


class RestartSchedule:
    """Decides, failure after failure, what one task's runner does next."""

    def __init__(
        self,
        policy: RestartPolicy,
        *,
        can_renew_session: bool,
        random: RandomSource = _random.random,
    ) -> None:
        self.policy = policy
        self._can_renew_session = can_renew_session
        self._random = random
        # The task's own failures: the task.restart.* pauses, with the same jitter.
        self._restarts = policy.pauses
        self.attempt = 0
        self._infra = _INFRA_RETRY.start(random=random)
        # The last step was a new session.
        self._renewed = False

    def after(self, failure: Failure) -> Step:
        if failure.worked:
            self._infra.reset()
        if failure.ran_for >= self.policy.stable_after_s:
            self.attempt = 0
        # A new session, unless the run on the last new one failed the same way before any batch:
        # then a wait first, so an error that only looks like a lost session cannot make the
        # executor rebuild its shared session over and over.
        renew = failure.kind is FailureKind.SPARK_SESSION and self._can_renew_session
        if renew and (failure.worked or not self._renewed):
            self._renewed = True
            return Step(Next.RENEW_SESSION)
        self._renewed = False
        if failure.kind is not FailureKind.TASK:
            delay = self._infra.next_delay()
            assert delay is not None  # the policy has neither a deadline nor an attempt limit
            return Step(Next.WAIT, delay)
        if not self.policy.allows(self.attempt + 1):
            return Step(Next.GIVE_UP)
        self.attempt += 1
        return Step(Next.WAIT, self._restarts.delay(self.attempt, self._random()), self.attempt)
