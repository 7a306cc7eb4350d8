"""How long the herder work of a call may take: the caller's remaining time, less a small margin
so that the caller receives our DEADLINE_EXCEEDED naming the stage that was running, or the
default (`request.timeout.ms`) for a call without a deadline."""

from __future__ import annotations

from typing import Any

import grpc


def call_timeout(context: grpc.aio.ServicerContext[Any, Any], default: float) -> float:
    remaining = context.time_remaining()
    if remaining is None:
        return default
    return max(remaining - min(0.1, remaining * 0.1), 0.0)
