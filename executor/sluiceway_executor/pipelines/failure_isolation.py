"""Finding the records a batch's job failed on when no column could say which.

Converters and the built-in transforms mark a record they cannot handle in the error column
(``record_errors``). A Spark SQL expression that raises on a record instead, such as a Sql
transform's cast of text that is no number under ANSI rules, a division by zero, or
``raise_error``, fails the whole job: Spark has no per-row try. Under errors.tolerance=all the
pipelines then look for those records by halves (:func:`isolated`): the batch, pinned with an id
per record, is built again half by half, each half that fails split again, down to the single
records that fail on their own (a half whose sibling went through is known to fail and split at
once). That costs one or two jobs per bad record per halving (so it is meant for a few bad records
in a batch), and only data errors start it (:func:`is_data_error`,
SQLSTATE class 22 or a user-raised error): anything else still fails the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sluiceway.connect.plugin_imports import class_name_of
from sluiceway_executor.failures import is_kafka_unreachable, is_spark_session_lost

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["ROW_ID", "IsolatedFailure", "is_data_error", "isolated", "united", "with_row_ids"]

log = logging.getLogger(__name__)

# The id each record of a batch being searched carries.
ROW_ID: Final = "__sluiceway_row"
# SQLSTATEs of errors a record's data causes: class 22 (data exception) and raise_error's.
_DATA_STATE_CLASS: Final = "22"
_USER_RAISED: Final = "P0001"


def is_data_error(error: BaseException) -> bool:
    """Whether ``error`` is Spark's for a record's data (a bad cast, an overflow, a division by
    zero, raise_error), not for the job or the session."""
    if is_spark_session_lost(error) or is_kafka_unreachable(error):
        return False
    get_state = getattr(error, "getSqlState", None)
    state = get_state() if callable(get_state) else None
    return isinstance(state, str) and (state.startswith(_DATA_STATE_CLASS) or state == _USER_RAISED)


@dataclass(frozen=True)
class IsolatedFailure:
    """A record that fails on its own: its ``ROW_ID`` and the error."""

    row: int
    exception: str
    message: str

    @classmethod
    def of(cls, row: int, error: BaseException) -> IsolatedFailure:
        text = str(error).strip().splitlines()
        return cls(row, class_name_of(type(error)), text[0] if text else "")


def with_row_ids(frame: DataFrame) -> DataFrame:
    """``frame`` pinned with a ``ROW_ID`` per record (stable: it is computed once)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return frame.withColumn(ROW_ID, F.monotonically_increasing_id()).localCheckpoint()


def united(parts: list[DataFrame]) -> DataFrame:
    """The parts (at least one, of the same columns) as one frame."""
    whole = parts[0]
    for part in parts[1:]:
        whole = whole.unionByName(part)
    return whole


def isolated(
    base: DataFrame, build: Callable[[DataFrame], DataFrame], first: BaseException
) -> tuple[list[DataFrame], list[IsolatedFailure]]:
    """The parts of ``base`` (``with_row_ids``) whose ``build`` went through, each pinned, and the
    records whose build fails alone, given that ``build`` of all of ``base`` failed with ``first``.
    Raises the first error that is no data error."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    ids = sorted(int(row[0]) for row in base.select(ROW_ID).collect())
    built: list[DataFrame] = []
    failures: list[IsolatedFailure] = []
    jobs = 0

    def passes(lo: int, hi: int) -> BaseException | None:
        """Builds records ``lo``..``hi`` (by index into ``ids``); the data error, if one."""
        nonlocal jobs
        jobs += 1
        part = base.where(F.col(ROW_ID).between(ids[lo], ids[hi - 1]))
        try:
            built.append(build(part).localCheckpoint())
        except Exception as e:
            if not is_data_error(e):
                raise
            return e
        return None

    def search(lo: int, hi: int, error: BaseException) -> None:
        """Records ``lo``..``hi``, which fail together with ``error``."""
        if hi - lo == 1:
            failures.append(IsolatedFailure.of(ids[lo], error))
            return
        middle = (lo + hi) // 2
        left = passes(lo, middle)
        if left is not None:
            search(lo, middle, left)
            right = passes(middle, hi)
            if right is not None:
                search(middle, hi, right)
        else:
            # The left half went through, so the right one holds what failed: no need to try it.
            search(middle, hi, error)

    if ids and first is not None:
        search(0, len(ids), first)
    log.info("searched %d records by halves in %d jobs: %d fail on their own", len(ids), jobs, len(failures))
    return built, failures
