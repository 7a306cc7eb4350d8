"""sluiceway_server.log_files and embedded.spawn with rotation: a run sets the previous run's logs
aside (keeping a few runs), files rotate by size, and a real child's output reaches its rotated
files whole."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from sluiceway_server.dev import STACK_LOGS
from sluiceway_server.embedded import spawn
from sluiceway_server.log_files import LogRotation, RotatingLogFile, set_aside_previous_run

LOGS = re.compile(r"[a-z-]+\.log(?:\.\d+)?")


def _write_run(log_dir: Path, label: str, names: tuple[str, ...] = ("tansu.log", "executor.log")) -> None:
    for name in names:
        (log_dir / name).write_text(f"{label} {name}\n")


def _tree(log_dir: Path) -> dict[str, str]:
    return {
        str(path.relative_to(log_dir)): path.read_text()
        for path in sorted(log_dir.rglob("*"))
        if path.is_file()
    }


def test_first_run_has_nothing_to_set_aside(tmp_path: Path) -> None:
    assert set_aside_previous_run(tmp_path, LOGS) is None
    assert list(tmp_path.iterdir()) == []


def test_each_run_moves_the_last_one_aside_and_keeps_only_the_newest(tmp_path: Path) -> None:
    for run in range(1, 5):
        _write_run(tmp_path, f"run{run}")
        set_aside_previous_run(tmp_path, LOGS, keep=3)
    # Runs 4, 3 and 2 are kept, newest first; run 1 is gone; nothing is left in the directory itself.
    assert _tree(tmp_path) == {
        f"previous-{ago}/{name}": f"run{run} {name}\n"
        for ago, run in ((1, 4), (2, 3), (3, 2))
        for name in ("executor.log", "tansu.log")
    }


def test_rotated_pieces_move_with_their_run_and_other_files_stay(tmp_path: Path) -> None:
    _write_run(tmp_path, "old", ("control-plane-2.log", "executor.log", "executor.log.1", "executor.log.2"))
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "derby.log").write_text("not ours\n")
    (tmp_path / "executor.log.bak").write_text("not ours either\n")

    assert set_aside_previous_run(tmp_path, STACK_LOGS) == tmp_path / "previous-1"

    moved = {path.name for path in (tmp_path / "previous-1").iterdir()}
    assert moved == {"control-plane-2.log", "executor.log", "executor.log.1", "executor.log.2"}
    assert {path.name for path in tmp_path.iterdir() if path.is_file()} == {
        "notes.txt",
        "derby.log",
        "executor.log.bak",
    }


def test_a_run_without_logs_leaves_the_earlier_runs_where_they_are(tmp_path: Path) -> None:
    _write_run(tmp_path, "only")
    set_aside_previous_run(tmp_path, LOGS)
    assert set_aside_previous_run(tmp_path, LOGS) is None
    assert sorted(path.name for path in tmp_path.iterdir()) == ["previous-1"]


def test_a_file_rotates_before_a_write_would_take_it_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    log = RotatingLogFile(path, LogRotation(max_bytes=10, backups=2))
    for chunk in (b"aaaa\n", b"bbbb\n", b"cccc\n", b"dddd\n", b"eeee\n", b"ffff\n", b"gggg\n"):
        log.write(chunk)
    log.close()
    # Two lines a file; the oldest file (aaaa, bbbb) fell off past two backups.
    assert path.read_bytes() == b"gggg\n"
    assert (tmp_path / "x.log.1").read_bytes() == b"eeee\nffff\n"
    assert (tmp_path / "x.log.2").read_bytes() == b"cccc\ndddd\n"
    assert not (tmp_path / "x.log.3").exists()


def test_a_write_larger_than_the_limit_gets_a_file_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    log = RotatingLogFile(path, LogRotation(max_bytes=4, backups=1))
    log.write(b"a\n")
    log.write(b"0123456789\n")
    log.close()
    assert path.read_bytes() == b"0123456789\n"
    assert (tmp_path / "x.log.1").read_bytes() == b"a\n"


def test_without_backups_the_file_starts_over(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    log = RotatingLogFile(path, LogRotation(max_bytes=6, backups=0))
    log.write(b"one\n")
    log.write(b"two\n")
    log.close()
    assert path.read_bytes() == b"two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.log"]


def test_a_childs_output_reaches_its_rotated_files_whole(tmp_path: Path) -> None:
    lines = [f"line {n:05d} {'x' * 40}" for n in range(3000)]
    script = (
        "import sys\n"
        "for n in range(3000):\n"
        "    print(f\"line {n:05d} {'x' * 40}\")\n"
        "print('the end', file=sys.stderr)\n"
    )
    child = spawn(
        "writer", [sys.executable, "-c", script], tmp_path, rotation=LogRotation(max_bytes=50_000, backups=5)
    )
    assert child.process.wait(30) == 0
    # tail() waits for the pump to write the pipe's end.
    assert child.tail(1) == "the end"
    child.stop()

    pieces = sorted(
        tmp_path.glob("writer.log*"), key=lambda p: int(p.suffix[1:]) if p.suffix != ".log" else 0
    )
    assert [p.name for p in pieces] == ["writer.log", *(f"writer.log.{n}" for n in range(1, 4))]
    assert all(p.stat().st_size <= 50_000 for p in pieces)
    # Oldest first, the pieces hold every line once, in order, none split between two files.
    text = "".join(p.read_text() for p in reversed(pieces))
    assert text.splitlines() == [*lines, "the end"]
    assert all(p.read_text().endswith("\n") for p in pieces)


def test_the_rotation_is_described_in_words() -> None:
    assert LogRotation().describe() == "a file past 10 MiB moves to .log.1 … .log.2, the oldest piece dropped"
    assert (
        LogRotation(1000, 1).describe() == "a file past 1000 bytes moves to .log.1, the oldest piece dropped"
    )
    assert LogRotation(2048, 0).describe() == "a file past 2 KiB starts over"
