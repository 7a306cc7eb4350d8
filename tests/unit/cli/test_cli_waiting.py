"""The progress line of the CLI commands that wait while a connector's tasks leave the executors
(`connectors delete --wait`, `offsets alter`, `offsets reset`): the line drawn from what a poll saw,
and the drawing itself against the fake control plane, on a console made to act as a terminal."""

from __future__ import annotations

import io
import threading
import time

import grpc
import pytest
from rich.console import Console

from sluiceway.api.v1 import cluster_pb2
from sluiceway.cli import waiting
from sluiceway.cli.common import Context
from sluiceway.cli.waiting import Seen, changing_offsets, deleting, held_tasks, progress_text
from sluiceway.errors import NotFoundError
from tests.unit.client.fake_control_plane import Served, rich_status


def _info(**executors: list[str]) -> cluster_pb2.ServerInfo:
    return cluster_pb2.ServerInfo(
        executors=[
            cluster_pb2.ExecutorInfo(id=executor, tasks=tasks) for executor, tasks in executors.items()
        ]
    )


def test_the_tasks_each_executor_holds_are_read_from_the_server_info() -> None:
    info = _info(
        b=["connectors/gen/tasks/2"],
        a=["connectors/gen/tasks/1", "connectors/other/tasks/0", "not a task", "connectors/gen/tasks/0"],
        c=["connectors/gen-2/tasks/0"],
        d=[],
    )
    assert held_tasks(info, "gen") == {"a": (0, 1), "b": (2,)}
    assert held_tasks(info, "nothing") == {}


def test_delete_wait_lines() -> None:
    plan = deleting("connectors/gen", delete_offsets=False)
    held = {"exec-b": (2,), "exec-a": (0, 1)}
    assert progress_text(plan, Seen(held, True), 3.7, 30) == (
        "Deleting connector gen (3s of 30s): waiting for 3 tasks to leave exec-a (tasks 0, 1), "
        "exec-b (task 2) and for its deleted() callback"
    )
    assert progress_text(plan, Seen({"exec-a": (0,)}, False), 1.2) == (
        "Deleting connector gen (1s): waiting for 1 task to leave exec-a (task 0) "
        "and for its deleted() callback"
    )
    assert progress_text(plan, Seen({}, False), 12, 30) == (
        "Deleting connector gen (12s of 30s): its tasks have left the executors; "
        "waiting for its deleted() callback"
    )
    # Both polls failed (or none has answered yet): what is known, nothing made up.
    assert progress_text(plan, Seen(), 0.2, 30) == (
        "Deleting connector gen (0s of 30s): waiting for its tasks to leave the executors "
        "and for its deleted() callback"
    )


def test_delete_offsets_lines_follow_the_deletion() -> None:
    plan = deleting("gen", delete_offsets=True)
    assert progress_text(plan, Seen({"exec-a": (0,)}, True), 2, 30) == (
        "Deleting connector gen and its offsets (2s of 30s): waiting for 1 task to leave exec-a (task 0), "
        "then for the offsets reset, the deletion and its deleted() callback"
    )
    assert progress_text(plan, Seen({}, True), 3, 30).endswith(
        ": its tasks have left the executors; waiting for the offsets reset, the deletion and its "
        "deleted() callback"
    )
    # Deleted: only the callback is left (and a failed status poll changes nothing).
    assert progress_text(plan, Seen({}, False), 4, 30).endswith("; waiting for its deleted() callback")
    assert progress_text(plan, Seen({"exec-a": (0,)}, False), 4, 30).endswith(
        "(task 0) and for its deleted() callback"
    )
    assert "offsets reset" in progress_text(plan, Seen({}, None), 4, 30)


def test_offsets_lines() -> None:
    reset, alter = changing_offsets("gen", reset=True), changing_offsets("gen", reset=False)
    assert reset.after_deletion is None  # so the connector's status is not polled
    assert progress_text(reset, Seen({"exec-a": (0,)}), 5, 30) == (
        "Resetting the offsets of connector gen (5s of 30s): waiting for 1 task to leave exec-a (task 0), "
        "then for the reset"
    )
    assert progress_text(alter, Seen({}), 6, 30) == (
        "Altering the offsets of connector gen (6s of 30s): its tasks have left the executors; "
        "waiting for the change"
    )
    assert progress_text(alter, Seen(), 0, None) == (
        "Altering the offsets of connector gen (0s): waiting for its tasks to leave the executors, "
        "then for the change"
    )


# --- drawing -----------------------------------------------------------------------------------


def _terminal() -> tuple[Console, io.StringIO]:
    drawn = io.StringIO()
    return Console(file=drawn, force_terminal=True, force_interactive=True, width=200), drawn


def _context(served: Served, *, json: bool = False) -> Context:
    return Context(target=served.target, timeout=30.0, json=json)


def _until_drawn(drawn: io.StringIO, text: str) -> str:
    """Waits (in the call's thread) until the line holds `text`; the call then returns."""
    deadline = time.monotonic() + 10
    while text not in drawn.getvalue():
        assert time.monotonic() < deadline, drawn.getvalue()
        time.sleep(0.02)
    return "answer"


def test_the_line_is_drawn_while_the_call_runs_then_erased(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "QUIET_SECONDS", 0.0)
    console, drawn = _terminal()
    ctx = _context(served)
    # The fake's executor-1 holds task 0 of connector a, which does not exist (deleted).
    expected = "s of 30s): waiting for 1 task to leave executor-1 (task 0) and for its deleted() callback"
    try:
        result = waiting.wait_with_progress(
            ctx, deleting("a", delete_offsets=False), lambda: _until_drawn(drawn, expected), console=console
        )
    finally:
        ctx.close()
    assert result == "answer"
    assert "Deleting connector a (" in drawn.getvalue()
    assert drawn.getvalue().endswith("\x1b[2K")  # the line erased
    methods = {attempt.method for attempt in served.fake.attempts}
    assert {"GetServerInfo", "GetConnectorStatus"} <= methods


def test_a_failing_poll_leaves_its_part_out_and_the_calls_error_is_raised(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(waiting, "QUIET_SECONDS", 0.0)
    denied = rich_status(grpc.StatusCode.PERMISSION_DENIED, "no", "PERMISSION_DENIED")
    served.fake.fail("GetServerInfo", denied, times=1000)
    console, drawn = _terminal()
    ctx = _context(served)

    def call() -> str:
        _until_drawn(drawn, "waiting for its tasks to leave the executors, then for the reset")
        return ctx.client.reset_offsets("missing").message

    try:
        with pytest.raises(NotFoundError):
            waiting.wait_with_progress(ctx, changing_offsets("missing", reset=True), call, console=console)
    finally:
        ctx.close()
    # Not a deleting command: its status is not polled.
    assert not served.fake.attempts_of("GetConnectorStatus")


def test_quick_calls_json_output_and_other_streams_draw_nothing(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    console, drawn = _terminal()
    plan = deleting("a", delete_offsets=False)
    ctx = _context(served)
    try:
        # Answered within QUIET_SECONDS: nothing drawn.
        assert waiting.wait_with_progress(ctx, plan, lambda: 7, console=console) == 7
        assert drawn.getvalue() == ""
        monkeypatch.setattr(waiting, "QUIET_SECONDS", 0.0)
        released = threading.Event()

        def slow() -> int:
            released.wait(0.3)
            return 8

        # --output json, and stderr that is no terminal (pytest captures it): the call alone, no poll.
        json_ctx = _context(served, json=True)
        assert waiting.wait_with_progress(json_ctx, plan, slow, console=console) == 8
        assert waiting.wait_with_progress(ctx, plan, slow) == 8
        assert drawn.getvalue() == ""
        assert not served.fake.attempts_of("GetServerInfo")
        # A terminal that cannot redraw a line (TERM=dumb).
        dumb = Console(file=drawn, force_terminal=True, force_interactive=False)
        assert waiting.wait_with_progress(ctx, plan, slow, console=dumb) == 8
        assert drawn.getvalue() == ""
    finally:
        ctx.close()


def test_the_commands_print_the_same_answers(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    from sluiceway.cli.main import main

    served.fake.add_connector("gen")
    assert main(["--server", served.target, "connectors", "delete", "gen", "--wait"]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "Deleted connector gen.\nIts deleted() callback: SUCCEEDED.\n",
        "",
    )
    assert not served.fake.attempts_of("GetServerInfo")
