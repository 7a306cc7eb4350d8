"""The README's Python client example, run as written against a control plane of the test's own."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable

import pytest

from sluiceway.client import SluicewayClient
from tests.conftest import ControlPlaneProcess
from tests.readme_blocks import blocks_under

pytestmark = pytest.mark.integration


def test_the_client_example_prints_names_and_states_as_words(
    control_plane_factory: Callable[..., ControlPlaneProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = blocks_under("The CLI and the Python client", "python")
    # A plane of its own: the example creates a connector under a fixed name. It has no executor,
    # so the connector's tasks stay unassigned; the example's output says which state they are in.
    plane = control_plane_factory()
    monkeypatch.setenv("SLUICEWAY_SERVER", plane.address)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(example.text, "README.md", "exec"), {"__name__": "readme_example"})
    lines = printed.getvalue().splitlines()
    assert lines, "the example printed nothing"
    for line in lines:
        assert re.fullmatch(r"[\w.-]+ (UNASSIGNED|RUNNING|PAUSED|STOPPED|FAILED|RESTARTING)", line), line
    assert any(line.startswith("gen2 ") for line in lines), lines
    with SluicewayClient(plane.address, timeout=30) as client:
        created = client.get_connector("gen2")
        assert (created.name, created.resource_name) == ("gen2", "connectors/gen2")
        assert str(created.target_state) == "RUNNING"
        client.delete_connector("gen2")
