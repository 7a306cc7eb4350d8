"""Warming a new Spark Connect session up before the first pipeline needs it.

On a Spark Connect server that has not run our jobs yet, the first source batch took 14 s and the
first sink batch 10 s (measured on the 2-core test machine): Spark starts its Python workers, they
import pyspark and our data sources, and the JVM compiles the code of its first plans. A pipeline
created right after `sluiceway dev` or a Spark Connect restart waited for all of it before its first
record. So as soon as an executor has a new session and knows the worker config, it runs the two
shapes every pipeline runs, each on no records, on a thread of its own:

- a source batch: generated rows written through ``sluiceway-kafka`` (the producer it opens is
  pooled by the Python worker with the settings a connector without overrides uses, so that
  connector's first write does not wait for a producer id either);
- a sink batch: a read of no offset ranges through ``sluiceway-kafka``, with the sink's casts.

Neither touches a topic: the write has no rows, the read no ranges. Tasks assigned meanwhile do not
wait for it; a failure is logged and changes nothing.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from sluiceway.connect.kafka_clients import kafka_client_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sluiceway_executor.spark_sessions import SparkSessions

__all__ = ["UNWRITTEN_TOPIC", "SparkWarmUp", "warm_up"]

log = logging.getLogger(__name__)

_FORMAT: Final = "sluiceway-kafka"
# Named in the warm-up's write, which has no rows: no record and no metadata request reach it.
UNWRITTEN_TOPIC: Final = "__sluiceway-warm-up"


def warm_up(spark: SparkSession, worker_config: Mapping[str, str]) -> None:
    """Runs a source batch's job and a sink batch's job on ``spark``, each on no records."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    from sluiceway_executor.datagen_records import datagen_frame

    producer = kafka_client_config(worker_config, "producer")
    consumer = kafka_client_config(worker_config, "consumer")
    bootstrap = producer.pop("bootstrap.servers")
    consumer.pop("bootstrap.servers")
    # A predicate Spark cannot decide while planning, so the write task does run, on no rows.
    generated = datagen_frame(spark, 0, 0, 1, 100, 0).where(F.col("seq") < 0).select("key", "value")
    (
        generated.write.format(_FORMAT)
        .mode("append")
        .option("bootstrap.servers", bootstrap)
        .option("producer.config", json.dumps(producer))
        .option("topic", UNWRITTEN_TOPIC)
        .save()
    )
    (
        spark.read.format(_FORMAT)
        .option("bootstrap.servers", bootstrap)
        .option("ranges", "[]")
        .option("consumer.config", json.dumps(consumer))
        .load()
        .selectExpr(
            "topic", "partition", "offset", "timestamp", "CAST(key AS STRING)", "CAST(value AS STRING)"
        )
        .write.format("noop")
        .mode("overwrite")
        .save()
    )


class SparkWarmUp:
    """Warms each session of ``sessions`` once, as soon as a worker config is known (``configure``)
    and whenever a new session replaces a lost one (``session_built``)."""

    def __init__(
        self,
        sessions: SparkSessions,
        stop: threading.Event,
        run: Callable[[SparkSession, Mapping[str, str]], None] = warm_up,
    ) -> None:
        self._sessions = sessions
        self._stop = stop
        self._run = run
        self._lock = threading.Lock()
        self._worker_config: Mapping[str, str] | None = None
        self._warmed = 0  # the last session generation warmed (or tried)
        self._thread: threading.Thread | None = None

    def configure(self, worker_config: Mapping[str, str]) -> None:
        """The worker config from the leader's welcome: warms the current session if it is not yet."""
        with self._lock:
            self._worker_config = dict(worker_config)
        self._start()

    def session_built(self) -> None:
        self._start()

    def wait(self, timeout: float) -> bool:
        """Whether the warm-up under way (if any) ended within ``timeout`` seconds."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    @property
    def warmed_generation(self) -> int:
        with self._lock:
            return self._warmed

    def _start(self) -> None:
        with self._lock:
            busy = self._thread is not None and self._thread.is_alive()
            due = self._worker_config is not None and self._sessions.generation > self._warmed
            if busy or not due or self._stop.is_set():
                return
            self._thread = threading.Thread(target=self._warm, name="spark-warm-up", daemon=True)
            self._thread.start()

    def _warm(self) -> None:
        generation = self._sessions.generation
        with self._lock:
            config = self._worker_config
        assert config is not None
        started = time.monotonic()
        try:
            self._run(self._sessions.current(), config)
        except Exception as exc:
            # Only the first pipeline's speed depends on it; the pipelines report their own failures.
            log.info("warming Spark Connect session %d up failed (%s); pipelines start cold", generation, exc)
        else:
            log.info("Spark Connect session %d warmed up in %.1fs", generation, time.monotonic() - started)
        with self._lock:
            self._warmed = max(self._warmed, generation)
            self._thread = None
        # A session built while this one warmed (Spark Connect restarted meanwhile) gets its turn.
        self._start()
