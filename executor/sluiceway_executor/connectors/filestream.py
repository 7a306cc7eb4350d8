"""FileStreamSource / FileStreamSink: one text file as a stream of lines, in both directions.

Both are record-level connectors, so their tasks run inside Spark (``pipelines/record_tasks.py``):
``file`` is a path on the machines where Spark runs the task, not on the executor.

The source turns every complete line (ended by ``\\n``, ``\\r\\n`` or ``\\r``) into a string record.
Each batch opens the file again at the committed byte position: the source partition is
``{"filename": path}`` and the offset ``{"position": bytes}``, the position just after a record's line.
The sink appends every record value as one line and syncs the file before its offsets are
committed. Kafka Connect falls back to stdin and stdout without ``file``; here ``file`` is required.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any, Final, TypeGuard

import sluiceway
from sluiceway.connect import (
    AbstractConfig,
    ConfigDef,
    ConfigType,
    ConnectException,
    Importance,
    NonEmptyString,
    PathKind,
    Range,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)
from sluiceway_executor.connectors.base import BuiltInConnector

__all__ = [
    "FileStreamSinkConnector",
    "FileStreamSinkTask",
    "FileStreamSourceConnector",
    "FileStreamSourceTask",
]

_log = logging.getLogger(__name__)

FILE_CONFIG: Final = "file"
TOPIC_CONFIG: Final = "topic"
TASK_BATCH_SIZE_CONFIG: Final = "batch.size"
DEFAULT_TASK_BATCH_SIZE: Final = 2000

FILENAME_FIELD: Final = "filename"
POSITION_FIELD: Final = "position"

STRING_SCHEMA: Final[Mapping[str, Any]] = {"type": "string", "optional": False}
_READ_CHUNK: Final = 64 * 1024
# How long poll() waits before returning nothing when the file is missing or has no new complete
# line (the same second as Kafka's task).
IDLE_WAIT_S: Final = 1.0


def source_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            FILE_CONFIG,
            ConfigType.STRING,
            validator=NonEmptyString(),
            importance=Importance.HIGH,
            documentation=(
                "Path of the text file to read, as the Spark workers running the task see it. A file "
                "that does not exist yet is waited for. When the worker sets connector.allowed.paths, an "
                "absolute path inside one of those directories."
            ),
            path_kind=PathKind.FILE,
        )
        .define(
            TOPIC_CONFIG,
            ConfigType.STRING,
            validator=NonEmptyString(),
            importance=Importance.HIGH,
            documentation="Kafka topic every line is written to.",
        )
        .define(
            TASK_BATCH_SIZE_CONFIG,
            ConfigType.INT,
            DEFAULT_TASK_BATCH_SIZE,
            Range.at_least(1),
            Importance.LOW,
            "Most lines one poll() returns. A batch polls until the file has no new line, "
            "batch.max.records is reached or a second has passed.",
        )
    )


def sink_config_def() -> ConfigDef:
    return ConfigDef().define(
        FILE_CONFIG,
        ConfigType.STRING,
        validator=NonEmptyString(),
        importance=Importance.HIGH,
        documentation=(
            "Path of the text file that every record value is appended to as one line, on the Spark "
            "workers running the task; created when missing. When the worker sets "
            "connector.allowed.paths, an absolute path inside one of those directories."
        ),
        path_kind=PathKind.FILE,
    )


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class FileStreamSourceConnector(BuiltInConnector, SourceConnector):
    def config(self) -> ConfigDef:
        return source_config_def()

    def _on_start(self, config: AbstractConfig) -> None:
        _log.info("FileStreamSource will read lines of %s", config.get_string(FILE_CONFIG))

    def task_class(self) -> type[Task]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        # One file, one task: a second task would emit every line again.
        return [dict(self._props)]

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        if not (connector_config.get(FILE_CONFIG) or "").strip():
            raise ConnectException(
                f"'{FILE_CONFIG}' is not set, so this connector has no file whose offsets could be altered"
            )
        for partition, offset in offsets:
            if offset is None:
                # A reset (null offset) is accepted for any partition, however malformed.
                continue
            if POSITION_FIELD not in offset:
                raise ConnectException(
                    f"Offset {dict(offset)} must be null (a reset) or hold the byte position under "
                    f"'{POSITION_FIELD}'"
                )
            position = offset[POSITION_FIELD]
            if not _is_int(position):
                raise ConnectException(
                    f"'{POSITION_FIELD}' must be a whole number of bytes (Kafka Connect stores a "
                    f"Long value), got {position!r}"
                )
            if position < 0:
                raise ConnectException(
                    f"'{POSITION_FIELD}' is a byte position and must be non-negative, got {position}"
                )
            if FILENAME_FIELD not in partition:
                raise ConnectException(
                    f"Source partitions of this connector are {{'{FILENAME_FIELD}': <path>}}; "
                    f"{dict(partition)} does not contain the key '{FILENAME_FIELD}'"
                )
        # A position past the end of the file is no error: a task reads from there once the file grows.
        return True


class FileStreamSourceTask(SourceTask):
    def __init__(self, *, idle_wait_s: float = IDLE_WAIT_S) -> None:
        self._idle_wait_s = idle_wait_s
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._filename = ""
        self._topic = ""
        self._batch_size = DEFAULT_TASK_BATCH_SIZE
        self._stream: IO[bytes] | None = None
        self._buffer = bytearray()
        # Byte position in the file of the first byte of _buffer.
        self._position = 0

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(source_config_def(), props)
        self._filename = config.get_string(FILE_CONFIG) or ""
        self._topic = config.get_string(TOPIC_CONFIG) or ""
        self._batch_size = config.get_int(TASK_BATCH_SIZE_CONFIG)

    @property
    def position(self) -> int:
        """Byte position after the last line returned by ``poll``."""
        return self._position

    def _open(self) -> bool:
        offset = self.context.offset_storage_reader().offset({FILENAME_FIELD: self._filename})
        position = 0
        if offset is not None:
            recorded = offset.get(POSITION_FIELD)
            if recorded is not None and not _is_int(recorded):
                raise ConnectException(
                    f"The committed '{POSITION_FIELD}' of {self._filename} has the incorrect type "
                    f"{type(recorded).__name__}; it must be an integer byte position"
                )
            if recorded is not None:
                if recorded < 0:
                    raise ConnectException(
                        f"The committed '{POSITION_FIELD}' of {self._filename} is {recorded}; "
                        "a byte position cannot be negative"
                    )
                position = int(recorded)
        try:
            stream = open(self._filename, "rb", buffering=0)  # noqa: SIM115 - held open across polls
        except FileNotFoundError:
            _log.warning("source file %s does not exist yet; nothing to read", self._filename)
            return False
        except OSError as e:
            raise ConnectException(f"cannot open {self._filename} for reading: {e}") from e
        stream.seek(position)
        self._stream = stream
        self._position = position
        self._buffer.clear()
        _log.debug("reading %s from byte %d", self._filename, position)
        return True

    def _extract_lines(self, limit: int) -> list[tuple[str, int]]:
        """Complete lines at the start of the buffer (at most ``limit``), each with the position after it."""
        lines: list[tuple[str, int]] = []
        buffer = self._buffer
        start = 0
        while len(lines) < limit:
            newline = buffer.find(b"\n", start)
            carriage = buffer.find(b"\r", start, newline if newline >= 0 else len(buffer))
            if carriage >= 0:
                if carriage + 1 >= len(buffer):
                    break  # a \r at the end may be the first half of \r\n: wait for the next byte
                end = carriage
                next_start = carriage + 2 if buffer[carriage + 1] == ord("\n") else carriage + 1
            elif newline >= 0:
                end = newline
                next_start = newline + 1
            else:
                break
            lines.append((buffer[start:end].decode("utf-8", errors="replace"), self._position + next_start))
            start = next_start
        del buffer[:start]
        self._position += start
        return lines

    def poll(self) -> list[SourceRecord] | None:
        with self._lock:
            if self._stopping.is_set():
                return None
            if self._stream is None and not self._open():
                found: list[tuple[str, int]] = []
            else:
                found = self._read_lines()
        if not found:
            self._stopping.wait(self._idle_wait_s)
            return None
        now_ms = int(time.time() * 1000)
        partition = {FILENAME_FIELD: self._filename}
        return [
            SourceRecord(
                source_partition=partition,
                source_offset={POSITION_FIELD: position},
                topic=self._topic,
                value=line,
                timestamp_ms=now_ms,
                value_schema=STRING_SCHEMA,
            )
            for line, position in found
        ]

    def _read_lines(self) -> list[tuple[str, int]]:
        assert self._stream is not None
        found = self._extract_lines(self._batch_size)
        while len(found) < self._batch_size:
            try:
                chunk = self._stream.read(_READ_CHUNK)
            except OSError as e:
                raise ConnectException(f"reading {self._filename} failed: {e}") from e
            if not chunk:
                break
            self._buffer += chunk
            found.extend(self._extract_lines(self._batch_size - len(found)))
        return found

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None


class FileStreamSinkConnector(BuiltInConnector, SinkConnector):
    def config(self) -> ConfigDef:
        return sink_config_def()

    def _on_start(self, config: AbstractConfig) -> None:
        _log.info("FileStreamSink will append lines to %s", config.get_string(FILE_CONFIG))

    def task_class(self) -> type[Task]:
        return FileStreamSinkTask

    def alter_offsets(
        self, connector_config: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]
    ) -> bool:
        # Offsets live only in the consumer group; nothing to check or propagate.
        return True


def render_value(value: Any) -> str:
    """The text of a record value as one line (Kafka prints the value; null prints as "null")."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


class FileStreamSinkTask(SinkTask):
    def __init__(self) -> None:
        self._filename = ""
        self._file: IO[str] | None = None

    def version(self) -> str:
        return sluiceway.__version__

    def start(self, props: Mapping[str, str]) -> None:
        config = AbstractConfig(sink_config_def(), props)
        self._filename = config.get_string(FILE_CONFIG) or ""
        try:
            # newline="" writes "\n" as is on every platform.
            self._file = open(self._filename, "a", encoding="utf-8", newline="")  # noqa: SIM115 - held open until stop()
        except OSError as e:
            raise ConnectException(f"cannot open {self._filename!r} for appending: {e}") from e

    def put(self, records: Sequence[SinkRecord]) -> None:
        if self._file is None:
            raise ConnectException("FileStreamSinkTask is not started")
        self._file.write("".join(render_value(record.value) + "\n" for record in records))

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        if self._file is None:
            return
        self._file.flush()
        # Offsets are committed after flush returns, so the lines must be on disk by then.
        os.fsync(self._file.fileno())

    def stop(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
