"""SparkFileSink's batches, published whole with the Kafka offsets they hold, and those offsets read
back when a task starts.

A batch's files are written by Spark into a hidden staging directory, ``{path}/_staging/task=N/KEY``
(Spark's readers skip names that start with ``_``). Then one small Spark job writes the batch's
offset ranges into it as ``_sluiceway_offsets.json`` and renames the directory, in one step, to
``{path}/task=N/batch=KEY``: a reader of ``{path}`` sees either the whole batch, with its offsets,
or nothing of it. ``KEY`` is the time in milliseconds and 8 random hex digits, so batch names sort
by time across runs and executors.

When a task starts, another small job removes what an interrupted batch of the same task left in
staging and reads the offsets file of the newest batch of each ``task=N`` directory: the only batch
of a task that can have been published without its offsets being committed is its last one. The
offsets file also names the latest change of the connector's offsets (KIP-875) made before the
batch was written (``BatchContext.offsets_change``); a batch written before the change the task now
starts with is left out (``held_ranges``), since the change moved the offsets after it. The offsets
file of a typed batch also holds the lake's schema once that batch is in it (``schema``: Spark's
JSON form of the row schema, lake_schema.py), so the schema outlives the process that wrote it:
the same start-up read gives it back (``newest_rows``, ``lake_schema.lake_state``).

Both jobs run their file operations on a Spark worker (``mapInArrow``, ``pyarrow.fs``), so they
reach the same file systems the batch's own job wrote to. Each is skipped when the executor can
prove it sees the same directory as Spark's driver, and then does the work itself: publishing
when the executor finds the staged batch's ``_SUCCESS`` marker (the driver writes it, under a name
no other batch has); the start-up read when Spark's driver finds a file of a new random name that
the executor has just written into the task's staging directory (checked by analysing a read of
it, which runs no job). The rename is atomic on a local or network file system and on HDFS, not on
object stores such as S3, which have no rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluiceway.connect import ConnectException, OffsetRange, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow import fs as pafs
    from pyspark.sql import SparkSession

__all__ = [
    "MANIFEST",
    "STAGING",
    "batch_dir",
    "batch_key",
    "held_ranges",
    "manifest",
    "newest_rows",
    "newest_written",
    "publish",
    "staging_dir",
]

MANIFEST: Final = "_sluiceway_offsets.json"
STAGING: Final = "_staging"


def batch_key(now_ms: int | None = None) -> str:
    """A batch's name: milliseconds since the epoch (13 digits) and 8 random hex digits."""
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{millis:013d}-{uuid.uuid4().hex[:8]}"


def staging_dir(root: str, task_id: int, key: str) -> str:
    return f"{root}/{STAGING}/task={task_id}/{key}"


def batch_dir(root: str, task_id: int, key: str) -> str:
    return f"{root}/task={task_id}/batch={key}"


def manifest(
    task_id: int, key: str, ranges: Sequence[OffsetRange], offsets_change: str = "", schema: str | None = None
) -> str:
    """The offsets file of a batch; ``schema``, for a typed batch, the lake's schema with it."""
    content: dict[str, Any] = {
        "batch": key,
        "task": task_id,
        "offsets_change": offsets_change,
        "ranges": [
            {"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in ranges
        ],
    }
    if schema is not None:
        content["schema"] = schema
    return json.dumps(content, sort_keys=True)


def held_ranges(rows: Iterable[Mapping[str, Any]], offsets_change: str) -> dict[TopicPartition, OffsetRange]:
    """For each partition, the range of the newest batch holding it among ``rows`` (the ranges of
    the newest batch of each task directory, as ``_NEWEST_SCHEMA`` has them), leaving out those of
    a batch written under another offsets change than ``offsets_change``: the change came after
    that batch, so whether the batch was committed no longer tells where the partition resumes."""
    newest: dict[TopicPartition, tuple[str, OffsetRange]] = {}
    for row in rows:
        if str(row.get("change") or "") != offsets_change:
            continue
        key = TopicPartition(row["topic"], int(row["partition"]))
        held = OffsetRange(key.topic, key.partition, int(row["start"]), int(row["end"]))
        if key not in newest or row["batch"] > newest[key][0]:
            newest[key] = (row["batch"], held)
    return {key: held for key, (_, held) in newest.items()}


# ---------------------------------------------------------------- on a Spark worker


def _local_path(location: str) -> str | None:
    """The absolute local path of a plain path or a ``file:`` URI; None for any other URI."""
    parsed = urllib.parse.urlparse(location)
    if parsed.scheme not in ("", "file"):
        return None
    return os.path.abspath(urllib.parse.unquote(parsed.path) if parsed.scheme else location)


def _filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The file system of a path or URI and the path within it: local for what ``_local_path``
    takes, pyarrow's for any other URI (``hdfs://``, ``s3://``...)."""
    from pyarrow import fs

    local = _local_path(location)
    if local is not None:
        return fs.LocalFileSystem(), local
    filesystem, path = fs.FileSystem.from_uri(location)
    return filesystem, path


def _publish_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Writes the manifest into each row's staging directory and renames it to its batch directory."""
    import pyarrow as pa

    done = 0
    for batch in batches:
        for row in batch.to_pylist():
            filesystem, staging = _filesystem(row["staging"])
            _, final = _filesystem(row["final"])
            with filesystem.open_output_stream(f"{staging}/{MANIFEST}") as out:
                out.write(row["manifest"].encode())
            filesystem.create_dir(final.rsplit("/", 1)[0], recursive=True)
            filesystem.move(staging, final)
            done += 1
    yield pa.RecordBatch.from_pylist([{"published": done}], schema=pa.schema([("published", pa.int64())]))


_NEWEST_SCHEMA: Final = (
    "batch string, change string, topic string, partition int, start long, end long, schema string"
)


def _newest_ranges(filesystem: pafs.FileSystem, root: str, task_id: int) -> list[dict[str, Any]]:
    """Removes what task ``task_id`` left in staging under ``root``, then lists the ranges of the
    newest batch of each task directory there (the rows of ``_NEWEST_SCHEMA``; ``schema`` is None
    for a batch of untyped records)."""
    from pyarrow import fs

    leftovers = f"{root}/{STAGING}/task={task_id}"
    if filesystem.get_file_info(leftovers).type == fs.FileType.Directory:
        filesystem.delete_dir(leftovers)
    found: list[dict[str, Any]] = []
    for task in filesystem.get_file_info(fs.FileSelector(root, allow_not_found=True)):
        if task.type != fs.FileType.Directory or not task.base_name.startswith("task="):
            continue
        names = [
            info.path
            for info in filesystem.get_file_info(fs.FileSelector(task.path))
            if info.type == fs.FileType.Directory and info.base_name.startswith("batch=")
        ]
        if not names:
            continue
        newest = max(names)
        try:
            with filesystem.open_input_stream(f"{newest}/{MANIFEST}") as stream:
                content = json.loads(stream.read().decode())
        except FileNotFoundError:
            continue  # written before batches carried their offsets
        batch, change = str(content.get("batch", "")), str(content.get("offsets_change") or "")
        schema = content.get("schema")
        for item in content.get("ranges", []):
            found.append({"batch": batch, "change": change, **item, "schema": schema})
    return found


def _newest_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``_newest_ranges`` of each row's path and task, on a Spark worker."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("batch", pa.string()),
            ("change", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("start", pa.int64()),
            ("end", pa.int64()),
            ("schema", pa.string()),
        ]
    )
    found: list[dict[str, Any]] = []
    for batch in batches:
        for row in batch.to_pylist():
            filesystem, root = _filesystem(row["path"])
            found.extend(_newest_ranges(filesystem, root, int(row["task"])))
    yield pa.RecordBatch.from_pylist(found, schema=schema)


# ---------------------------------------------------------------- from the executor


def _publish_here(staging: str, final: str, content: str) -> None:
    with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as out:
        out.write(content)
        out.flush()
        os.fsync(out.fileno())
    os.makedirs(os.path.dirname(final), exist_ok=True)
    os.rename(staging, final)


def publish(spark: SparkSession, staging: str, final: str, content: str, *, here: bool = True) -> None:
    """Publishes a written batch: its manifest ``content`` into ``staging``, then ``staging``
    renamed to ``final``: by this process when it sees the staged batch and ``here`` allows it,
    else on a Spark worker (see the module doc)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    local = _local_path(staging) if here else None
    local_final = _local_path(final)
    # Spark's driver wrote the staged batch's _SUCCESS under a name no other batch has: seeing it
    # proves this process sees the directory the batch was written to.
    if local is not None and local_final is not None and os.path.isfile(os.path.join(local, "_SUCCESS")):
        _publish_here(local, local_final, content)
        return

    job = spark.range(0, 1, 1, 1).select(
        F.lit(staging).alias("staging"), F.lit(final).alias("final"), F.lit(content).alias("manifest")
    )
    rows = job.mapInArrow(_publish_rows, "published long").collect()
    if sum(int(row["published"]) for row in rows) != 1:
        raise ConnectException(f"publishing the batch in {staging} as {final} did not happen")


def _made_dirs(path: str) -> list[str]:
    """Creates ``path`` and its missing parents; the directories it created, deepest first."""
    missing: list[str] = []
    here = path
    while not os.path.isdir(here):
        missing.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    os.makedirs(path, exist_ok=True)
    return missing


def _remove_made(made: list[str]) -> None:
    """Removes the directories ``_made_dirs`` made (deepest first) that are still there and empty,
    so that Spark, perhaps as another user, creates them itself when it writes there."""
    for directory in made:
        if not os.path.isdir(directory):
            continue
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty: neither are its parents


def _seen_by_spark(spark: SparkSession, root: str, task_id: int) -> tuple[str, list[str]] | None:
    """The local path of ``root`` when this process and Spark's driver see the same directory
    there, with the directories made for the proof; else None. The proof: a file of a new random
    name that this process writes into the task's staging directory, which Spark then finds at
    ``root``'s own spelling of that path (an analysis, no Spark job). The file is left for
    ``_newest_ranges`` to remove with the rest of the staging directory; when Spark does not find
    it, it and the directories made for it go at once."""
    from pyspark.errors import AnalysisException

    local = _local_path(root)
    if local is None:
        return None
    local_dir = os.path.join(local, STAGING, f"task={task_id}")
    probe = os.path.join(local_dir, f"_probe-{uuid.uuid4().hex}")
    made: list[str] = []
    try:
        made = _made_dirs(local_dir)
        with open(probe, "x", encoding="utf-8"):
            pass
        spark.read.format("binaryFile").load(staging_dir(root, task_id, os.path.basename(probe))).schema  # noqa: B018
    except (OSError, AnalysisException):
        with contextlib.suppress(OSError):
            os.remove(probe)
        _remove_made(made)
        return None
    return local, made


def newest_rows(spark: SparkSession, root: str, task_id: int, *, here: bool = True) -> list[dict[str, Any]]:
    """The ranges (and schema) of the newest published batch of each task directory under
    ``root``, as ``_NEWEST_SCHEMA`` has them, after removing what task ``task_id`` left in staging:
    by this process when Spark's driver sees the same directory (``_seen_by_spark``) and ``here``
    allows it, else on a Spark worker."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    seen = _seen_by_spark(spark, root, task_id) if here else None
    if seen is not None:
        from pyarrow import fs

        local, made = seen
        rows = _newest_ranges(fs.LocalFileSystem(), local, task_id)
        _remove_made(made)
        return rows
    job = spark.range(0, 1, 1, 1).select(F.lit(root).alias("path"), F.lit(task_id).alias("task"))
    return [row.asDict() for row in job.mapInArrow(_newest_rows, _NEWEST_SCHEMA).collect()]


def newest_written(
    spark: SparkSession, root: str, task_id: int, offsets_change: str = "", *, here: bool = True
) -> Mapping[TopicPartition, OffsetRange]:
    """For each partition, the range of the newest published batch holding it (among the newest
    batch of each task directory, ``newest_rows``) that was written under ``offsets_change``
    (``held_ranges``)."""
    return held_ranges(newest_rows(spark, root, task_id, here=here), offsets_change)
