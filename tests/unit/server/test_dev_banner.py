"""The start-up table of `sluiceway dev`: its "Try" lines are the README Quickstart's first commands
(its first ```sh block), with the CLI as the user can type it from where the stack was started."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from sluiceway_server.dev import DEFAULT_CONTROL_PLANE_PORT, QUICKSTART, banner, cli_command
from tests.readme_blocks import blocks_under

ROWS = [("broker (Tansu, in memory)", "127.0.0.1:9092"), ("logs", "var/dev-logs/")]


def quickstart_block() -> list[list[str]]:
    """The Quickstart's first shell block, each line split as the shell would (comments dropped)."""
    block = blocks_under("Quickstart", "sh")[0]
    return [shlex.split(line, comments=True) for line in block.text.splitlines() if line.strip()]


def try_lines(text: str) -> list[list[str]]:
    """The commands under the table's "Try" line, split as the shell would (comments dropped)."""
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("Try "))
    commands: list[list[str]] = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        commands.append(shlex.split(line, comments=True))
    return commands


def test_the_try_lines_are_the_readme_quickstarts() -> None:
    readme = quickstart_block()
    text = banner(ROWS, [], DEFAULT_CONTROL_PLANE_PORT, ".venv/bin/sluiceway")
    # Line for line, as the shell reads them: the venv's activation, then the commands.
    assert try_lines(text) == readme


def test_another_port_adds_the_server_flag_and_a_cli_on_the_path_needs_no_activation() -> None:
    text = banner(ROWS, [], 9000, "sluiceway")
    assert try_lines(text) == [
        ["sluiceway", "--server", "127.0.0.1:9000", *command] for command in QUICKSTART
    ]
    assert "activate" not in text


def test_a_cli_elsewhere_is_activated_from_where_it_is() -> None:
    text = banner(ROWS, [], DEFAULT_CONTROL_PLANE_PORT, "/opt/my env/bin/sluiceway")
    assert try_lines(text)[0] == ["source", "/opt/my env/bin/activate"]


def test_the_cli_is_named_as_it_can_be_typed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    script = Path(os.path.abspath(sys.executable)).parent / "sluiceway"
    if not script.exists():
        pytest.skip("the project is not installed in this interpreter's environment")
    venv = script.parent.parent
    # Not on the PATH: its path, relative to the directory the venv is in, absolute from elsewhere.
    monkeypatch.setenv("PATH", os.defpath)
    monkeypatch.chdir(venv.parent)
    assert cli_command() == f"{venv.name}/bin/sluiceway"
    monkeypatch.chdir(tmp_path)
    assert cli_command() == str(script)
    # On the PATH (an activated venv): the bare name.
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.defpath}")
    assert cli_command() == "sluiceway"
