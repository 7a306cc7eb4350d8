"""The connector classes plugins subclass: Python counterparts of Kafka Connect's Connector,
SourceConnector and SinkConnector. The control plane runs connectors; executors run their tasks."""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from sluiceway.connect.config import ConfigDef, ConfigValue
from sluiceway.connect.records import TopicPartition
from sluiceway.connect.task import Task

__all__ = [
    "ConnectException",
    "Connector",
    "ConnectorContext",
    "DataException",
    "ExactlyOnceSupport",
    "RetriableException",
    "SinkConnector",
    "SourceConnector",
    "TopicPartition",
]


class ConnectException(Exception):  # noqa: N818 - Kafka's name
    """Raised by a connector or task that cannot go on (Kafka's ConnectException); users see its message."""


class DataException(ConnectException):
    """A record's data cannot be handled: a converter or transform cannot read or change it, or a
    value does not fit its schema, or a schema is not well formed (Kafka's DataException). With
    errors.tolerance=all such a record is skipped; the dead-letter headers name this class."""


class RetriableException(ConnectException):
    """A failure that may succeed when the same operation is retried (e.g. a sink's ``put``)."""


class ConnectorContext(Protocol):
    """The control plane's handle for a connector object (Kafka's ConnectorContext)."""

    def config(self) -> Mapping[str, str]:
        """The connector's config as the plugin gets it (references resolved): what ``start`` got,
        or, on an object that was never started (see ``Connector.deleted``), its last config."""

    def request_task_reconfiguration(self) -> None:
        """Asks the control plane to call ``task_configs`` again (e.g. the source's tables changed)."""

    def raise_error(self, error: BaseException) -> None:
        """Fails the connector with ``error`` from a background thread of the connector."""


class ExactlyOnceSupport(enum.Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector(abc.ABC):
    """Runs in the control plane: turns its config into task configs that split the copying between
    Kafka and another system; executors run the tasks.

    Instances are created with no arguments; ``validate``, ``config`` and ``alter_offsets`` may be
    called on an instance that was never started, and so may ``deleted`` (after ``initialize``).
    """

    _context: ConnectorContext | None = None
    # More names ``connector.class`` may give for this plugin, besides its class path and its class
    # name with and without ``Connector`` (e.g. the class of the Kafka connector it stands in for, or a
    # class path it had before). An alias two plugins declare resolves to neither.
    ALIASES: ClassVar[tuple[str, ...]] = ()

    def initialize(self, context: ConnectorContext) -> None:
        self._context = context

    @property
    def context(self) -> ConnectorContext:
        if self._context is None:
            raise RuntimeError(f"{type(self).__name__} has not been initialized")
        return self._context

    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    def start(self, props: Mapping[str, str]) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @abc.abstractmethod
    def task_class(self) -> type[Task]: ...

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` task configurations."""

    @abc.abstractmethod
    def config(self) -> ConfigDef:
        """The definition of the connector's own keys; Sluiceway adds the keys every connector has."""

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """Validates the connector's own keys; override to add checks across keys."""
        return self.config().validate(props)

    def deleted(self) -> None:  # noqa: B027 - an optional hook, no-op by default (KIP-883)
        """KIP-883: the connector was deleted; clean up what it made outside Kafka (tables, triggers,
        accounts). Does nothing unless overridden.

        Called only when the connector is deleted (never on stop, pause, restart or a config
        change), and ``start()`` is never called just so that ``deleted()`` can run:

        - if the connector was running here, its own object gets ``stop()`` and then ``deleted()``;
        - otherwise (stopped, paused, failed, or the control plane that ran it is gone) a new
          object is made and initialized, never started, and gets ``deleted()`` alone.

        So read what to clean up from ``self.context.config()``, which holds the connector's last
        config in both cases, rather than from state kept by ``start()``. It is limited by
        ``plugin.callback.timeout.ms``; raising or overrunning is logged and reported to a delete
        call that waits, and never undoes the deletion. If the control plane dies while it runs,
        the next one calls it again on a new object: keep it idempotent.
        """


class SourceConnector(Connector):
    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        """KIP-875 hook, called on a fresh instance before the offsets of this connector are altered or
        reset (a None offset is a reset): return True once the change is checked or applied, raise
        to refuse it (NotImplementedError: offset changes are not supported). The default, False,
        says the connector takes no part in offset changes.
        """
        return False

    def exactly_once_support(self, connector_config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether this config allows exactly-once delivery; None when the connector cannot tell.

        Not called yet: Sluiceway delivers source records at least once whatever this returns.
        """
        return None


class SinkConnector(Connector):
    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
    ) -> bool:
        """KIP-875 hook, called on a fresh instance before this sink's consumer-group offsets are
        altered or reset (None = reset): return True once the change is checked or applied, raise to
        refuse it (NotImplementedError: offset changes are not supported).
        """
        return False
