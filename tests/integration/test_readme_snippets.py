"""The README's Python client example, run as written against a control plane of the test's own."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import pytest

from sluiceway.client import SluicewayClient
from sluiceway.errors import NotFoundError
from tests.conftest import ControlPlaneProcess
from tests.readme_blocks import blocks_under

pytestmark = pytest.mark.integration


def test_the_client_example_prints_names_and_states_as_words(
    control_plane_factory: Callable[..., ControlPlaneProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = blocks_under("The CLI and the Python client", "python")
    # A plane of its own: the example creates a connector under a fixed name. It has no executor;
    # the connector itself runs on the control plane, so it reads RUNNING once its status is there.
    plane = control_plane_factory()
    monkeypatch.setenv("SLUICEWAY_SERVER", plane.address)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example.text, "README.md", "exec"), {"__name__": "readme_example"})
    created, *listed = printed.getvalue().splitlines()
    assert created == "gen2 RUNNING (0,)"
    assert listed in (["gen2 RUNNING"], ["gen2 UNASSIGNED"])
    # The example cleans up after itself.
    with SluicewayClient(plane.address, timeout=30) as client, pytest.raises(NotFoundError):
        client.get_connector("gen2")
