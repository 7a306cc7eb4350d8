"""A live progress line on stderr for the CLI commands whose one call the control plane holds until
a connector's tasks have left the executors.

Those are `connectors delete --wait` (and `--delete-offsets`, which implies it: the call also waits
for the connector's deleted() callback), `offsets alter` and `offsets reset` (each waits for the
stopped connector's tasks to leave before it touches an offset). While such a call is in flight, and
only when stderr is an interactive terminal and the output is not JSON, a spinner line says what is
awaited: which executors still hold which of the connector's tasks, what else the call waits for, and the
seconds gone. It is refreshed from polls of the same client about once a second: GetServerInfo for
the tasks each executor holds (what the control plane's wait is about; a connector's status lists
no task once it is stopped or deleted) and, for the calls that delete, GetConnectorStatus to see
the deletion happen. A failed poll only leaves its part of the line out. The line is erased when
the call returns, so stdout is exactly what the command prints without it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Final, TypeVar

from sluiceway.api.v1 import cluster_pb2
from sluiceway.cli.common import Context
from sluiceway.common import names
from sluiceway.errors import NotFoundError

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.spinner import Spinner

    from sluiceway.client import SluicewayClient

__all__ = [
    "Seen",
    "Step",
    "Waiting",
    "changing_offsets",
    "deleting",
    "held_tasks",
    "progress_text",
    "wait_with_progress",
]

T = TypeVar("T")

POLL_SECONDS: Final = 1.0
# Each poll's own deadline, so a slow control plane delays a refresh and never the command.
POLL_TIMEOUT_SECONDS: Final = 5.0
# A call that answers within this draws nothing: quick commands stay as quiet as before.
QUIET_SECONDS: Final = 0.5
_REDRAW_SECONDS: Final = 0.25


@dataclasses.dataclass(frozen=True)
class Step:
    """What a call does besides waiting for the tasks to leave."""

    # `its deleted() callback`
    what: str
    # Whether it runs while the tasks leave, rather than after them.
    alongside: bool = False


@dataclasses.dataclass(frozen=True)
class Waiting:
    """What a command waits for, in words."""

    # The bare connector id, as task resource names carry it.
    connector: str
    # `Deleting connector gen`: what the command does.
    title: str
    # What the call does besides the tasks' leaving.
    step: Step
    # What is left of that once the connector is deleted; None when the call does not delete it
    # (and then its status is not polled).
    after_deletion: Step | None = None


def _bare(name: str) -> str:
    # Only for display and matching: the call itself reports a malformed name.
    return name.removeprefix(names.CONNECTORS_PREFIX)


def deleting(name: str, *, delete_offsets: bool) -> Waiting:
    """`connectors delete NAME --wait` or `--delete-offsets`."""
    connector = _bare(name)
    # The control plane starts the callback as it deletes the connector, before the tasks are gone.
    callback = Step("its deleted() callback", alongside=True)
    if delete_offsets:
        # Stopped first; the offsets reset and the deletion wait for the tasks.
        steps = Step("the offsets reset, the deletion and its deleted() callback")
        return Waiting(connector, f"Deleting connector {connector} and its offsets", steps, callback)
    return Waiting(connector, f"Deleting connector {connector}", callback, callback)


def changing_offsets(name: str, *, reset: bool) -> Waiting:
    """`offsets reset NAME` (`reset`) or `offsets alter NAME`."""
    connector = _bare(name)
    if reset:
        return Waiting(connector, f"Resetting the offsets of connector {connector}", Step("the reset"))
    return Waiting(connector, f"Altering the offsets of connector {connector}", Step("the change"))


@dataclasses.dataclass(frozen=True)
class Seen:
    """What the last poll saw; None where its call failed (or was not made)."""

    # Executor id -> the numbers of the connector's tasks it holds.
    held: Mapping[str, tuple[int, ...]] | None = None
    # Whether the connector still exists.
    exists: bool | None = None


def held_tasks(info: cluster_pb2.ServerInfo, connector: str) -> dict[str, tuple[int, ...]]:
    """The tasks of `connector` each executor holds, by executor id (executors holding none left
    out), as GetServerInfo lists them."""
    held: dict[str, tuple[int, ...]] = {}
    for executor in info.executors:
        numbers = []
        for task in executor.tasks:
            try:
                parsed = names.parse_task_name(task)
            except names.InvalidNameError:
                continue
            if parsed.connector == connector:
                numbers.append(parsed.task)
        if numbers:
            held[executor.id] = tuple(sorted(numbers))
    return held


def _tasks_label(numbers: tuple[int, ...]) -> str:
    return ("task " if len(numbers) == 1 else "tasks ") + ", ".join(map(str, numbers))


def _elapsed_label(elapsed: float, timeout: float | None) -> str:
    seconds = f"{int(elapsed)}s"
    return f"{seconds} of {timeout:g}s" if timeout else seconds


def progress_text(waiting: Waiting, seen: Seen, elapsed: float, timeout: float | None = None) -> str:
    """The line drawn after the spinner, e.g. `Deleting connector gen (3s of 30s): waiting for 1
    task to leave exec-a (task 0) and for its deleted() callback`."""
    step = waiting.step
    if seen.exists is False and waiting.after_deletion is not None:
        step = waiting.after_deletion
    joined = f" and for {step.what}" if step.alongside else f", then for {step.what}"
    if seen.held is None:
        detail = f"waiting for its tasks to leave the executors{joined}"
    elif seen.held:
        count = sum(len(numbers) for numbers in seen.held.values())
        where = ", ".join(
            f"{executor} ({_tasks_label(numbers)})" for executor, numbers in sorted(seen.held.items())
        )
        detail = f"waiting for {count} task{'' if count == 1 else 's'} to leave {where}{joined}"
    else:
        detail = f"its tasks have left the executors; waiting for {step.what}"
    # The seconds before the detail, which a narrow terminal cuts short.
    return f"{waiting.title} ({_elapsed_label(elapsed, timeout)}): {detail}"


def _observe(client: SluicewayClient, waiting: Waiting) -> Seen:
    # Whatever a poll raises only leaves its part of the line out: it must never fail the command.
    held: dict[str, tuple[int, ...]] | None = None
    exists: bool | None = None
    try:
        held = held_tasks(client.server_info(timeout=POLL_TIMEOUT_SECONDS), waiting.connector)
    except Exception:
        held = None
    if waiting.after_deletion is not None:
        try:
            client.connector_status(waiting.connector, timeout=POLL_TIMEOUT_SECONDS)
            exists = True
        except NotFoundError:
            exists = False
        except Exception:
            exists = None
    return Seen(held, exists)


class _OneLine:
    """The spinner and its text kept on one line, cut with an ellipsis on a narrow terminal (a
    wrapped line would leave its first part behind on every redraw)."""

    def __init__(self, spinner: Spinner) -> None:
        self.spinner = spinner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from console.render(self.spinner, options.update(no_wrap=True, overflow="ellipsis"))


def wait_with_progress(
    ctx: Context, waiting: Waiting, call: Callable[[], T], *, console: Console | None = None
) -> T:
    """`call()`'s result (or exception). On an interactive stderr (or `console`), without
    `--output json`, the call runs in a worker thread while this thread draws the progress line."""
    # The real stderr must be a terminal itself: rich would also draw on a pipe when FORCE_COLOR is set.
    if ctx.json or (console is None and not _stderr_is_a_terminal()):
        return call()
    from rich.console import Console

    drawn_on = console if console is not None else Console(stderr=True)
    if not drawn_on.is_interactive:  # e.g. TERM=dumb, which cannot redraw a line
        return call()
    client = ctx.client  # made here: the property is not safe to race from two threads
    future: Future[T] = Future()
    stop = threading.Event()

    def run_call() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # handed to the caller's thread, which raises it
            future.set_exception(exc)
        finally:
            stop.set()

    latest = [Seen()]

    def poll() -> None:
        while not stop.is_set():
            latest[0] = _observe(client, waiting)
            stop.wait(POLL_SECONDS)

    started = time.monotonic()
    # Daemon threads: after Ctrl-C the process exits without waiting for the call's deadline.
    threading.Thread(target=run_call, name="sluiceway-call", daemon=True).start()
    threading.Thread(target=poll, name="sluiceway-progress", daemon=True).start()
    try:
        if not stop.wait(QUIET_SECONDS):
            _draw(
                drawn_on,
                stop,
                lambda: progress_text(waiting, latest[0], time.monotonic() - started, ctx.timeout),
            )
    finally:
        stop.set()
    return future.result()


def _stderr_is_a_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def _draw(console: Console, stop: threading.Event, text: Callable[[], str]) -> None:
    """Redraws the line until `stop` is set, then erases it."""
    from rich.live import Live
    from rich.spinner import Spinner
    from rich.text import Text

    spinner = Spinner("dots", Text(text()))
    with Live(
        _OneLine(spinner),
        console=console,
        transient=True,
        refresh_per_second=8,
        redirect_stdout=False,
        redirect_stderr=False,
    ):
        while not stop.wait(_REDRAW_SECONDS):
            # Text, not a str: rich would read `[` in a connector name as markup.
            spinner.update(text=Text(text()))
