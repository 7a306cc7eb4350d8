"""Log files of the development stack: each run starts a fresh set (the previous runs' sets are moved
into `previous-1/` … `previous-N/`), and each file is rotated by size while it is written.

A child's output reaches its file through a pipe that a thread of the parent reads (LogPump), so
the same size limit holds for every child, whether it is a Python process, Tansu or Spark's JVM.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# How many earlier runs' logs `set_aside_previous_run` keeps next to the current run's.
PREVIOUS_RUNS_KEPT = 5
# Past this size a log file is rotated (file.log → file.log.1, …), keeping LOG_BACKUPS of them.
MAX_LOG_BYTES = 10 * 1024 * 1024
LOG_BACKUPS = 2
# Longest piece of a line without a newline that the pump reads at once.
_READ_LIMIT = 1024 * 1024


@dataclass(frozen=True)
class LogRotation:
    """Rotate a log file before it would exceed `max_bytes`, keeping `backups` older ones."""

    max_bytes: int = MAX_LOG_BYTES
    backups: int = LOG_BACKUPS

    def describe(self) -> str:
        """For people: what happens to a file that grows past the limit."""
        size = _size(self.max_bytes)
        if self.backups == 0:
            return f"a file past {size} starts over"
        kept = ".log.1" if self.backups == 1 else f".log.1 … .log.{self.backups}"
        return f"a file past {size} moves to {kept}, the oldest piece dropped"


def _size(count: int) -> str:
    for unit, factor in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= factor and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"


def previous_run_dir(log_dir: Path, runs_ago: int) -> Path:
    """Where the logs of the run `runs_ago` runs before the current one are kept."""
    return log_dir / f"previous-{runs_ago}"


def set_aside_previous_run(
    log_dir: Path, logs: re.Pattern[str], keep: int = PREVIOUS_RUNS_KEPT
) -> Path | None:
    """Move the files directly in `log_dir` whose whole name `logs` matches (the last run's logs and
    their rotated pieces) into previous-1/, after moving previous-N/ to previous-N+1/ and deleting
    the one that would be past `keep`. Returns previous-1/, or None when there was nothing to move
    (the earlier runs then stay where they are)."""
    found = sorted(p for p in log_dir.iterdir() if p.is_file() and logs.fullmatch(p.name))
    if not found:
        return None
    if keep < 1:
        for path in found:
            path.unlink()
        return None
    shutil.rmtree(previous_run_dir(log_dir, keep), ignore_errors=True)
    for runs_ago in range(keep - 1, 0, -1):
        older = previous_run_dir(log_dir, runs_ago)
        if older.is_dir():
            older.rename(previous_run_dir(log_dir, runs_ago + 1))
    target = previous_run_dir(log_dir, 1)
    target.mkdir()
    for path in found:
        path.rename(target / path.name)
    return target


class RotatingLogFile:
    """An append-only byte log that, before a write would take it past the limit, becomes
    `name.1` (`name.1` becomes `name.2`, …, the oldest past `backups` is dropped) and starts
    afresh: what logging.handlers.RotatingFileHandler does, for raw bytes. A write larger than
    the limit still goes whole into a file of its own."""

    def __init__(self, path: Path, rotation: LogRotation) -> None:
        self.path = path
        self.rotation = rotation
        self._file = path.open("ab")
        self._size = self._file.tell()

    def write(self, data: bytes) -> None:
        if self._size > 0 and self._size + len(data) > self.rotation.max_bytes:
            self._rotate()
        self._file.write(data)
        # Flushed at once: `tail -f` and a crashed child's report read the file while it is written.
        self._file.flush()
        self._size += len(data)

    def close(self) -> None:
        self._file.close()

    def _backup(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number}")

    def _rotate(self) -> None:
        self._file.close()
        if self.rotation.backups > 0:
            for number in range(self.rotation.backups - 1, 0, -1):
                if self._backup(number).exists():
                    self._backup(number).replace(self._backup(number + 1))
            self.path.replace(self._backup(1))
        self._file = self.path.open("wb")
        self._size = 0


class LogPump:
    """Copies a child's output, line by line, from `source` (the read end of its pipe) into `log`
    on a daemon thread, until the child and everything it started have closed the pipe; then
    closes both. Should writing fail (a full disk), it says so once on stderr and keeps draining
    the pipe, so that the child never blocks on a full one."""

    def __init__(self, name: str, source: IO[bytes], log: RotatingLogFile) -> None:
        self._source = source
        self._log = log
        self._thread = threading.Thread(target=self._run, name=f"log-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failed = False
        try:
            for line in iter(lambda: self._source.readline(_READ_LIMIT), b""):
                if failed:
                    continue
                try:
                    self._log.write(line)
                except (OSError, ValueError) as exc:
                    failed = True
                    print(
                        f"sluiceway: cannot write {self._log.path} ({exc}); dropping the rest",
                        file=sys.stderr,
                    )
        finally:
            with contextlib.suppress(OSError):
                self._source.close()
            with contextlib.suppress(OSError, ValueError):
                self._log.close()

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` for the pipe's end to be written out; whether it was."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
