"""Connectors: Kafka Connect's Connector, SourceConnector and SinkConnector, in Python."""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sluiceway.connect.config import ConfigDef, ConfigValue
from sluiceway.connect.records import TopicPartition
from sluiceway.connect.task import Task

__all__ = [
    "ConnectException",
    "Connector",
    "ConnectorContext",
    "ExactlyOnceSupport",
    "RetriableException",
    "SinkConnector",
    "SourceConnector",
    "TopicPartition",
]


class ConnectException(Exception):  # noqa: N818 - Kafka's name
    """A connector or task failure (Kafka's ConnectException); its message is shown to users."""


class RetriableException(ConnectException):
    """A failure that may succeed when the same operation is retried (e.g. a sink's ``put``)."""


class ConnectorContext(Protocol):
    """What the framework gives a connector (Kafka's ConnectorContext)."""

    def request_task_reconfiguration(self) -> None:
        """Asks the framework to call ``task_configs`` again (e.g. the source's tables changed)."""

    def raise_error(self, error: BaseException) -> None:
        """Fails the connector with ``error`` from a background thread of the connector."""


class ExactlyOnceSupport(enum.Enum):
    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector(abc.ABC):
    """Configures and divides the work of copying data between Kafka and another system.

    Instances are created with no arguments; ``validate``, ``config`` and ``alter_offsets`` may be
    called on an instance that was never started.
    """

    _context: ConnectorContext | None = None

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
        """The definition of the connector's own keys (the framework's are added by the runtime)."""

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """Validates the connector's own keys; override to add checks across keys."""
        return self.config().validate(props)

    def deleted(self) -> None:  # noqa: B027 - an optional hook, no-op by default (KIP-883)
        """KIP-883: called after ``stop`` only when the connector is deleted; keep it idempotent."""


class SourceConnector(Connector):
    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
    ) -> bool:
        """KIP-875: called before offsets are altered or reset (a None offset is a reset).

        Return True when the connector has checked or applied the change; raise to refuse it.
        The default returns False: the connector does not know about offset changes.
        """
        return False

    def exactly_once_support(self, connector_config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether the connector can provide exactly-once delivery with this config; None = unknown."""
        return None


class SinkConnector(Connector):
    TOPICS_CONFIG = "topics"
    TOPICS_REGEX_CONFIG = "topics.regex"

    def alter_offsets(
        self,
        connector_config: Mapping[str, str],
        offsets: Mapping[TopicPartition, int | None],
    ) -> bool:
        """KIP-875: called before the consumer-group offsets are altered or reset (None = reset).

        Return True when the connector has checked or applied the change; raise to refuse it.
        """
        return False
