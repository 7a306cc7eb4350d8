"""KIP-158 at run time: a source task's topics are created, when missing, before it writes to them.

A `TopicCreator` belongs to one source task. It is active when the worker's `topic.creation.enable`
is true (the default) and the connector sets `topic.creation.*` keys; otherwise `ensure` does
nothing and the topics are whatever the cluster makes of a write to them. When active, `ensure` is
called with the topics of a batch before the batch is written: every topic the task has not met
yet is looked up with one DescribeTopics request, and the missing ones are created with one
CreateTopics request, each with the settings of its topic creation group
(`sluiceway.connect.topic_creation_config`). A topic that exists, or that someone else creates in
the meantime, is taken as it is: its partitions and settings are never changed. The topics met are
remembered, so later batches ask Kafka nothing about them.

A cluster may not let the task's producer look topics up or create them, or may not have the
calls at all. Then, as KIP-158 lets a task rely on the broker's own creation, the task logs one
warning per topic, naming the permission it lacked or the call the broker lacks, counts the topic
as met and goes on: the broker may create the topic when the records arrive, or the write fails
with the broker's error. Any other failure (an illegal name, a refused setting, no answer in time)
raises ConnectException, which fails the task before any record is written to the topic.

The same machinery serves topics the framework itself writes to for a task, such as KIP-910's
heartbeat topic: a creator made with ``always=`` a group is active whatever the connector's
``topic.creation.*`` keys and the worker's switch say, and creates every missing topic with that
group's settings.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Final, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from sluiceway.common.kafka_errors import transient_exception
from sluiceway.common.retry import Deadline, RetryPolicy
from sluiceway.connect import ConfigException, ConfigType, ConnectException
from sluiceway.connect.config import parse_type
from sluiceway.connect.kafka_clients import connection_settings, kafka_client_config, topic_name_problem
from sluiceway.connect.topic_creation_config import (
    TOPIC_CREATION_ENABLE_CONFIG,
    TopicCreationGroup,
    group_for_topic,
    topic_creation_groups,
    uses_topic_creation,
)
from sluiceway.connect.worker_settings import worker_default

__all__ = ["TopicAdmin", "TopicCreator", "refusal", "topic_creation_enabled"]

log = logging.getLogger(__name__)

# How long one ensure() may spend on Kafka, lookups and creations together.
DEFAULT_TIMEOUT_S: Final = 30.0
# Looking up or creating a topic again after an error that passes by itself, within ensure()'s
# timeout.
_RETRY: Final = RetryPolicy(initial=0.2, maximum=0.2, transient=transient_exception)
_HINT: Final = (
    "Create the topic yourself or change the connector's topic.creation.* settings, then restart the task."
)


# Besides the two authorization failures, the answers after which the task goes on without
# checking or creating the topic: the broker does not have the call (librdkafka finds that out
# itself, _UNSUPPORTED_FEATURE; a broker sent a request it cannot parse answers INVALID_REQUEST).
_NOT_SUPPORTED: Final = frozenset(
    {KafkaError.UNSUPPORTED_VERSION, KafkaError._UNSUPPORTED_FEATURE, KafkaError.INVALID_REQUEST}
)
_DESCRIBE: Final = "Describe"
_CREATE: Final = "Create"
_CALLS: Final = {_DESCRIBE: "DescribeTopics", _CREATE: "CreateTopics"}


class TopicAdmin(Protocol):
    """The two Admin API calls a TopicCreator makes (confluent_kafka's AdminClient has them)."""

    def describe_topics(self, topics: TopicCollection, **kwargs: Any) -> dict[str, Future[Any]]: ...

    def create_topics(self, new_topics: list[NewTopic], **kwargs: Any) -> dict[str, Future[Any]]: ...


def refusal(operation: str, topic: str, exc: BaseException) -> str | None:
    """Why the cluster would not let ``operation`` ("Describe" or "Create") be done on ``topic``,
    when the answer is one the task goes on after (a missing permission, a call the broker does
    not support); None for every other failure, which fails the task."""
    error = _error_of(exc)
    if error is None:
        return None
    code = error.code()
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        # Kafka also lets a principal create any topic with Create on the cluster.
        where = f"on topic {topic!r}" + (" or on the cluster" if operation == _CREATE else "")
    elif code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        where = "on the cluster" + (f" or on topic {topic!r}" if operation == _CREATE else "")
    elif code in _NOT_SUPPORTED:
        return f"the broker does not support {_CALLS.get(operation, operation)} ({error.name()})"
    else:
        return None
    return f"the producer's principal needs {operation} {where} ({error.name()})"


def topic_creation_enabled(worker_config: Mapping[str, str]) -> bool:
    """The worker's ``topic.creation.enable``; its default (true) when the control plane sent no value."""
    raw = worker_config.get(TOPIC_CREATION_ENABLE_CONFIG, worker_default(TOPIC_CREATION_ENABLE_CONFIG))
    try:
        enabled: bool = parse_type(TOPIC_CREATION_ENABLE_CONFIG, raw, ConfigType.BOOLEAN)
    except ConfigException as e:
        raise ConnectException(f"the worker config from the control plane is not usable: {e}") from e
    return enabled


def _error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


class TopicCreator:
    """Makes sure a source task's topics exist before it writes to them (see the module doc).

    The admin client is made on first need, on the cluster the task's producer writes to: its
    ``bootstrap.servers`` and security settings after the connector's ``producer.override.*``. As
    in Kafka Connect, a source connector's topics are created where its records go, which need not
    be the worker's own cluster.

    ``always``, ``label`` and ``hint`` serve topics of the framework's own (see the module doc): the
    one group every topic is created with, how messages name its settings instead of "topic
    creation group NAME", and what a failure message advises. ``admin`` replaces the admin client
    the creator would make.
    """

    def __init__(
        self,
        worker_config: Mapping[str, str],
        connector_config: Mapping[str, str],
        *,
        task: str = "",
        timeout: float = DEFAULT_TIMEOUT_S,
        always: TopicCreationGroup | None = None,
        label: str = "",
        hint: str = _HINT,
        admin: TopicAdmin | None = None,
    ) -> None:
        self._task = task or "the task"
        self._timeout = timeout
        self._label = label
        self._hint = hint
        # Given by tests that need answers a test broker never gives; else made on first need.
        self._admin: TopicAdmin | None = admin
        self._known: set[str] = set()
        self._groups: tuple[TopicCreationGroup, ...] = ()
        self._admin_config: dict[str, str] = {}
        if always is not None:
            self.active = True
            self._groups = (always,)
        else:
            self.active = topic_creation_enabled(worker_config) and uses_topic_creation(connector_config)
            if not self.active:
                return
            try:
                self._groups = topic_creation_groups(connector_config)
            except ConfigException as e:
                raise ConnectException(f"the connector's topic creation settings are not valid: {e}") from e
        self._admin_config = connection_settings(
            kafka_client_config(worker_config, "producer", connector_config)
        )

    @property
    def groups(self) -> tuple[TopicCreationGroup, ...]:
        """The connector's topic creation groups, in the order they are tried (default last)."""
        return self._groups

    def group_for(self, topic: str) -> TopicCreationGroup:
        return group_for_topic(self._groups, topic)

    def ensure(self, topics: Iterable[str]) -> None:
        """Returns once every topic of ``topics`` exists, creating the missing ones; does nothing
        when topic creation is not active for this task. A topic the cluster will not let the task
        look up or create, for lack of permission or of the call, is warned about once and left to
        the write. Raises ConnectException naming the topic, its group and the reason when a topic
        can neither be found nor created for any other reason."""
        if not self.active:
            return
        pending = sorted(set(topics) - self._known)
        if not pending:
            return
        for topic in pending:
            problem = topic_name_problem(topic)
            if problem is not None:
                raise self._failure(
                    topic,
                    f"the name is not a legal Kafka topic name: it {problem}",
                    # A framework topic's name comes from a setting; its own hint says which.
                    None
                    if self._label
                    else "Have the connector send its records to a topic with a legal name, then restart "
                    "the task.",
                )
        deadline = Deadline(self._timeout)
        missing = self._missing(pending, deadline)
        self._known.update(topic for topic in pending if topic not in missing)
        if missing:
            self._create(missing, deadline)
            self._known.update(missing)

    # ------------------------------------------------------------------ Kafka

    def _client(self) -> TopicAdmin:
        if self._admin is None:
            self._admin = AdminClient(dict(self._admin_config))
        return self._admin

    def _go_on(self, operation: str, topic: str, why: str) -> None:
        """Warns that ``topic`` is left to the write; the caller counts it as met, so once per task."""
        group = self.group_for(topic)
        log.warning(
            "%s: topic %r is written to without being %s first: %s. The broker may create it when "
            "the records arrive (without the settings of the %s: %s), else the write fails with "
            "the broker's error.",
            self._task,
            topic,
            "looked up" if operation == _DESCRIBE else "created",
            why,
            self._settings_name(group),
            group.describe(),
        )

    def _missing(self, topics: list[str], deadline: Deadline) -> list[str]:
        """The topics of ``topics`` the cluster does not have. DescribeTopics names them without
        ever creating one (a metadata request naming a topic may have the broker create it). A topic
        the broker will not describe to the task is warned about and not counted as missing: without
        Describe the principal has no Write on it either (Kafka's Write implies Describe), so the
        write's own error says more than a creation attempt would."""
        missing: list[str] = []
        retry = _RETRY.start(deadline)
        ask = list(topics)
        while ask:
            try:
                futures: dict[str, Future[Any]] = self._client().describe_topics(
                    TopicCollection(ask), request_timeout=deadline.remaining(at_least=0.1)
                )
            except KafkaException as exc:
                if self._went_on(_DESCRIBE, ask, exc):
                    return missing
                raise self._failure(ask[0], f"could not look it up: {exc}") from exc
            again: dict[str, BaseException] = {}
            for topic in ask:
                try:
                    futures[topic].result(timeout=deadline.remaining(at_least=0.1) + 1.0)
                except (KafkaException, TimeoutError) as exc:
                    error = _error_of(exc)
                    if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        missing.append(topic)
                    elif self._went_on(_DESCRIBE, [topic], exc):
                        continue
                    elif _RETRY.transient(exc):
                        again[topic] = exc
                    else:
                        raise self._failure(topic, f"could not look it up: {exc}") from exc
            if again and not retry.wait():
                first, cause = next(iter(again.items()))
                raise self._failure(first, f"could not look it up: {cause}") from cause
            ask = list(again)
        return missing

    def _create(self, topics: list[str], deadline: Deadline) -> None:
        """Creates ``topics`` with the settings of their groups; one that exists by now is fine, and
        so is one the broker will not create for the task (warned about)."""
        retry = _RETRY.start(deadline)
        ask = list(topics)
        while ask:
            groups = {topic: self.group_for(topic) for topic in ask}
            new_topics = [
                NewTopic(
                    topic,
                    num_partitions=group.partitions,
                    replication_factor=group.replication_factor,
                    config=dict(group.configs),
                )
                for topic, group in groups.items()
            ]
            remaining = deadline.remaining(at_least=0.1)
            try:
                futures: dict[str, Future[Any]] = self._client().create_topics(
                    new_topics, request_timeout=remaining, operation_timeout=remaining
                )
            except KafkaException as exc:
                if self._went_on(_CREATE, ask, exc):
                    return
                raise self._failure(ask[0], f"the broker did not create it: {exc}") from exc
            again: dict[str, BaseException] = {}
            for topic, group in groups.items():
                try:
                    futures[topic].result(timeout=deadline.remaining(at_least=0.1) + 1.0)
                except (KafkaException, TimeoutError) as exc:
                    error = _error_of(exc)
                    if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                        log.info(
                            "%s: topic %s appeared before it could be created; used as it is",
                            self._task,
                            topic,
                        )
                    elif self._went_on(_CREATE, [topic], exc):
                        continue
                    elif _RETRY.transient(exc):
                        again[topic] = exc
                    else:
                        raise self._failure(topic, f"the broker did not create it: {exc}") from exc
                else:
                    log.info(
                        "%s: created topic %s with the settings of the %s (%s)",
                        self._task,
                        topic,
                        self._settings_name(group),
                        group.describe(),
                    )
            if again and not retry.wait():
                first, cause = next(iter(again.items()))
                raise self._failure(first, f"the broker did not create it: {cause}") from cause
            ask = list(again)

    def _went_on(self, operation: str, topics: list[str], exc: BaseException) -> bool:
        """Whether ``exc`` is a refusal the task goes on after; if so each of ``topics`` is warned
        about (once: ensure() then counts them as met)."""
        for topic in topics:
            why = refusal(operation, topic, exc)
            if why is None:
                return False
            self._go_on(operation, topic, why)
        return True

    def _settings_name(self, group: TopicCreationGroup) -> str:
        return self._label or f"topic creation group {group.name!r}"

    def _failure(self, topic: str, why: str, hint: str | None = None) -> ConnectException:
        group = self.group_for(topic)
        return ConnectException(
            f"{self._task} cannot write to topic {topic!r} before making sure it exists "
            f"({self._settings_name(group)}: {group.describe()}): {why}. {hint or self._hint}"
        )
