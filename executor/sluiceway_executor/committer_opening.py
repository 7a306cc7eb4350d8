"""A task's offset committer, built and opened on a thread of its own while the runner starts the
task's pipeline: both take a round trip or more (Kafka for the committer, Spark for the pipeline),
side by side they cost the longer of the two."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from sluiceway_executor.offset_commits import CommitterFactory, OffsetCommitter
from sluiceway_executor.pipelines.spec import TaskSpec

__all__ = ["CommitterOpening", "Opened"]


@dataclass
class Opened:
    committer: OffsetCommitter | None  # None when the factory failed
    error: Exception | None
    seconds: float


class CommitterOpening:
    """A task's committer built and opened on a thread of its own (``wait`` gives the outcome).
    A committer whose ``open`` failed is still handed back, to be closed."""

    def __init__(
        self, factory: CommitterFactory, spec: TaskSpec, worker_config: Mapping[str, str], timeout: float
    ) -> None:
        self._opened = Opened(None, None, 0.0)
        self._thread = threading.Thread(
            target=self._open,
            args=(factory, spec, worker_config, timeout),
            name=f"open-{spec.name}",
            daemon=True,
        )
        self._thread.start()

    def _open(
        self, factory: CommitterFactory, spec: TaskSpec, worker_config: Mapping[str, str], timeout: float
    ) -> None:
        began = time.monotonic()
        try:
            self._opened.committer = factory(spec, worker_config)
            self._opened.committer.open(timeout)
        except Exception as exc:
            self._opened.error = exc
        self._opened.seconds = time.monotonic() - began

    def wait(self) -> Opened:
        self._thread.join()
        return self._opened
