"""Fixtures of the client library tests: a fake control plane on a loopback port and a
virtual clock, so retries and deadlines are tested without waiting."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Test helpers are imported by their path from the repository root (as mypy resolves them),
# whichever way pytest was started.
_ROOT = str(Path(__file__).resolve().parents[3])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.unit.client.fake_control_plane import Served, VirtualClock, serve  # noqa: E402


@pytest.fixture
def served() -> Iterator[Served]:
    started = serve()
    yield started
    started.server.stop(grace=None)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()
