"""Counting a batch's records (and the bytes of their keys and values) inside the Spark job that
already reads or writes them: the count is an observed metric (`DataFrame.observe`), one aggregate
riding along that job, so no second read of the batch is ever made to count it.

Spark reports an observation after the first job that runs the observed plan. Pipelines place one
where the next job runs the batch whole (the write, or a checkpoint of the whole batch); when no
job ran it (the batch failed first, or a task never used its DataFrame), there is no count and the
caller falls back to what it knows (see ``BatchOutcome``). The worker's
``metrics.task.counts.enable=false`` turns every count off (``counts_enabled``): an `Observed` made
with ``enabled=False`` returns the DataFrame it watches unchanged and never has a count."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sluiceway.connect import ConnectException
from sluiceway.connect.config import ConfigException
from sluiceway.connect.worker_settings import METRICS_TASK_COUNTS_ENABLE_CONFIG, worker_bool

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation

__all__ = ["Observed", "Tally", "counts_enabled"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tally:
    """Records counted, and the bytes of their keys and values (None when they are not bytes or
    strings: typed rows have no wire size)."""

    records: int
    bytes: int | None = None


def counts_enabled(worker_config: Mapping[str, str]) -> bool:
    """The worker's ``metrics.task.counts.enable`` (true when unset); ConnectException when it is
    neither true nor false."""
    raw = worker_config.get(METRICS_TASK_COUNTS_ENABLE_CONFIG, "true")
    try:
        return worker_bool(METRICS_TASK_COUNTS_ENABLE_CONFIG, raw)
    except ConfigException as e:
        raise ConnectException(f"the worker config is not usable: {e}") from e


class Observed:
    """One count of one DataFrame: `watch` it, let a job run it, then read `tally`. ``sized``: the
    DataFrame has Kafka's `key` and `value` columns (bytes or text), whose sizes are summed too.
    ``enabled=False``: counting is off, so nothing is added to the plan and there is no tally."""

    def __init__(self, what: str, *, sized: bool = False, enabled: bool = True) -> None:
        self._sized = sized
        self._observation: Observation | None = None
        if enabled:
            from pyspark.sql import Observation

            # Unique per batch: Spark keys observations by name within a session.
            self._observation = Observation(f"sluiceway-{what}-{uuid.uuid4().hex[:16]}")

    def watch(self, frame: DataFrame) -> DataFrame:
        """``frame`` with the count attached; the caller uses what this returns in its place. No
        call to Spark: the columns are taken as the constructor was told, not looked up."""
        if self._observation is None:
            return frame
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        aggregates = [F.count(F.lit(1)).alias("records")]
        if self._sized:
            key, value = (F.coalesce(F.octet_length(F.col(name)), F.lit(0)) for name in ("key", "value"))
            aggregates.append(F.coalesce(F.sum(key + value), F.lit(0)).cast("long").alias("bytes"))
        return _observed(frame, self._observation, aggregates)

    def tally(self) -> Tally | None:
        """The count, once a job has run the watched DataFrame; None before, and when counting is off."""
        if self._observation is None:
            return None
        try:
            result = self._observation.get
        except Exception:  # PySpark says "no observation yet" with an assertion error of its own
            log.debug("no observed count (the watched batch was not run)", exc_info=True)
            return None
        records = result.get("records")
        if records is None:
            return None
        size = result.get("bytes") if self._sized else None
        return Tally(int(records), None if size is None else int(size))


def _observed(frame: DataFrame, observation: Observation, aggregates: list[Column]) -> DataFrame:
    """``frame.observe(observation, *aggregates)`` without the check Spark Connect's client makes
    first, that ``frame`` is not a stream: an analysis of the whole plan on the server (for a JDBC
    read, a database connection) on every batch, 0.03 to 0.05 s here; a batch is never a stream.
    The plan built is the one ``observe`` builds; with another client (classic PySpark, or a
    version whose parts are named differently) ``observe`` itself is used."""
    try:
        from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
        from pyspark.sql.connect.observation import Observation as ConnectObservation
        from pyspark.sql.connect.plan import CollectMetrics
    except ImportError:
        return frame.observe(observation, *aggregates)
    if (
        not isinstance(frame, ConnectDataFrame)
        or not isinstance(observation, ConnectObservation)
        or getattr(observation, "_result", ()) is not None
    ):
        return frame.observe(observation, *aggregates)
    # What Observation._on does besides the check: mark the observation as placed in a plan.
    observation._result = {}
    observed = ConnectDataFrame(CollectMetrics(frame._plan, observation, aggregates), frame._session)
    # As observe does: the observed frame's columns are the frame's.
    observed._cached_schema = frame._cached_schema
    return observed
