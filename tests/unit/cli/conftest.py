"""Fixtures of the CLI tests: the client tests' fake control plane on a loopback port."""

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

from tests.unit.client.fake_control_plane import Served, serve  # noqa: E402


@pytest.fixture
def served() -> Iterator[Served]:
    started = serve()
    yield started
    started.server.stop(grace=None)
