"""The command line itself: global options, usage errors, help, and delegation of
`server`, `executor` and `dev`."""

from __future__ import annotations

import sys
import types

import pytest

from sluiceway.cli.main import build_parser, main
from tests.unit.client.fake_control_plane import Served


def test_global_options_before_or_after_the_command() -> None:
    parser = build_parser()
    before = parser.parse_args(["--server", "h:1", "-o", "json", "--timeout", "5", "connectors", "list"])
    after = parser.parse_args(["connectors", "list", "--server", "h:1", "--output", "json", "--timeout", "5"])
    for args in (before, after):
        assert (args.server, args.output, args.timeout) == ("h:1", "json", 5.0)
    # An option given before the command is not reset by the command's own copy of it.
    mixed = parser.parse_args(["--server", "h:1", "connectors", "list", "-o", "json"])
    assert (mixed.server, mixed.output) == ("h:1", "json")
    defaults = parser.parse_args(["cluster", "info"])
    assert (defaults.server, defaults.output, defaults.timeout) == (None, "table", 30.0)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["connectors"],
        ["connectors", "get"],
        ["connectors", "list", "--view", "everything"],
        ["connectors", "create", "c", "--initial-state", "sleeping"],
        ["--timeout", "0", "cluster", "info"],
        ["--timeout", "soon", "cluster", "info"],
        ["--output", "yaml", "cluster", "info"],
        ["offsets", "alter", "c"],
        ["bogus"],
        ["connectors", "get", "a", "b"],
        ["connectors", "list", "--bogus"],
        ["connectors", "create", "c", "k=v", "--bogus"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["connectors", "restart", "c", "--task", "1", "--include-tasks"], "--task restarts one task"),
        (["connectors", "create", "c", "novalue"], "expected key=value"),
        (["connectors", "create", "c"], "no config given"),
        (["connectors", "patch", "c"], "nothing to change"),
        (["connectors", "patch", "c", "--remove", "a", "b=1"], "--remove takes keys"),
        (["connectors", "patch", "c", "a=1", "--remove", "a"], "both set and removed"),
        (["connectors", "validate"], "no config given"),
    ],
)
def test_command_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server", "127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert "usage: sluiceway" in err
    assert message in err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("connectors", "plugins", "offsets", "topics", "cluster", "server", "executor", "dev"):
        assert f"    {command} " in out
    assert main(["connectors", "--help"]) == 0
    out = capsys.readouterr().out
    for command in ("list", "create", "get", "config", "patch", "pause", "resume", "stop", "delete"):
        assert f"    {command} " in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("sluiceway ")


@pytest.mark.parametrize(
    ("command", "module"),
    [
        ("server", "sluiceway_server.main"),
        ("executor", "sluiceway_executor.main"),
        ("dev", "sluiceway_server.dev"),
    ],
)
def test_delegated_commands(command: str, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        seen.append(argv)
        return 7

    fake = types.ModuleType(module)
    fake.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module, fake)
    assert main([command, "--config", "w.properties", "--help"]) == 7
    assert main([command]) == 7
    assert seen == [["--config", "w.properties", "--help"], []]


@pytest.mark.parametrize(
    "argv", [["--output", "json", "dev", "-x"], ["--server=h:1", "server"], ["-ojson", "executor"]]
)
def test_delegated_commands_come_first(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "takes no sluiceway options before it" in capsys.readouterr().err


def test_missing_delegate_is_reported(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes the import fail, as if the package were not installed.
    monkeypatch.setitem(sys.modules, "sluiceway_server.dev", None)
    assert main(["dev"]) == 1
    err = capsys.readouterr().err
    assert "`sluiceway dev` is not available" in err
    assert "sluiceway_server.dev" in err


def test_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--server", "127.0.0.1:1", "--timeout", "0.5", "cluster", "info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: UNAVAILABLE: ")
    assert "is a Sluiceway server listening on 127.0.0.1:1?" in err


def test_server_from_the_environment(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLUICEWAY_SERVER", served.target)
    assert main(["cluster", "info"]) == 0
    assert "Leader:" in capsys.readouterr().out
