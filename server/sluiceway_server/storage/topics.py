"""Creation of the internal topics: created with the configured spec when missing, never altered when
they exist (as Kafka Connect's TopicAdmin does)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.cimpl import NewTopic

from sluiceway.common.retry import Deadline, RetryPolicy

log = logging.getLogger(__name__)

# Looking again for a topic's partitions until its metadata shows them, within the caller's timeout.
_METADATA_RETRY: Final = RetryPolicy(initial=0.05, maximum=0.05)


class TopicCreationError(RuntimeError):
    """A topic could not be created or did not become visible."""


@dataclass(frozen=True)
class TopicSpec:
    partitions: int
    replication_factor: int  # -1 = broker default
    configs: Mapping[str, str] = field(default_factory=dict)  # e.g. {"cleanup.policy": "compact"}

    def validate(self, name: str) -> None:
        """Tansu accepts anything; real Kafka would reject these, so reject them ourselves everywhere."""
        if self.partitions < 1:
            raise ValueError(f"topic {name!r}: partitions must be >= 1, got {self.partitions}")
        if self.replication_factor != -1 and self.replication_factor < 1:
            raise ValueError(
                f"topic {name!r}: replication factor must be -1 (broker default) or >= 1, "
                f"got {self.replication_factor}"
            )


def compacted(
    partitions: int, replication_factor: int = -1, configs: Mapping[str, str] | None = None
) -> TopicSpec:
    """A spec for an internal topic: user configs first, then cleanup.policy forced to compact
    (Kafka Connect's `.compacted()` after the user's topic settings)."""
    return TopicSpec(partitions, replication_factor, {**(configs or {}), "cleanup.policy": "compact"})


def topic_exists(admin: AdminClient, name: str, timeout: float) -> bool:
    # Ask for all topics: a metadata request naming the topic could auto-create it on brokers
    # with auto.create.topics.enable.
    metadata = admin.list_topics(timeout=max(timeout, 0.1))
    topic = metadata.topics.get(name)
    return topic is not None and topic.error is None


def ensure_topic(admin: AdminClient, name: str, spec: TopicSpec, timeout: float) -> bool:
    """Create `name` with `spec` unless it exists. True if this call created it; an existing topic is
    left as it is. Raises TopicCreationError when creation fails for another reason than the topic
    already existing (e.g. an authorization error or an invalid replication factor)."""
    spec.validate(name)
    deadline = Deadline(timeout)
    try:
        # Checking first lets a worker without CREATE permission start on topics an admin made.
        if topic_exists(admin, name, timeout):
            return False
    except KafkaException as exc:
        raise TopicCreationError(f"cannot list topics to look for {name!r}: {exc}") from exc
    new_topic = NewTopic(
        name,
        num_partitions=spec.partitions,
        replication_factor=spec.replication_factor,
        config=dict(spec.configs),
    )
    remaining = deadline.remaining(at_least=0.1)
    futures = admin.create_topics([new_topic], request_timeout=remaining, operation_timeout=remaining)
    try:
        futures[name].result(timeout=remaining)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise TopicCreationError(
            f"cannot create topic {name!r} (partitions={spec.partitions}, "
            f"replication.factor={spec.replication_factor}, configs={dict(spec.configs)}): {exc}"
        ) from exc
    except TimeoutError as exc:
        raise TopicCreationError(f"creating topic {name!r} timed out after {timeout:.1f}s") from exc
    log.info(
        "created topic %s (partitions=%d, replication.factor=%d)",
        name,
        spec.partitions,
        spec.replication_factor,
    )
    return True


def partition_count(admin: AdminClient, name: str, timeout: float) -> int:
    """The topic's partition count once its metadata is visible (a just-created topic can take a moment)."""
    retry = _METADATA_RETRY.start(Deadline(timeout))
    last_problem = "not in metadata"
    while True:
        try:
            metadata = admin.list_topics(timeout=min(retry.deadline.remaining(at_least=0.1), 5.0))
            topic = metadata.topics.get(name)
            if topic is None:
                last_problem = "not in metadata"
            elif topic.error is not None:
                last_problem = str(topic.error)
            elif topic.partitions:
                return len(topic.partitions)
            else:
                last_problem = "no partitions yet"
        except KafkaException as exc:
            last_problem = str(exc)
        if not retry.wait():
            raise TopicCreationError(f"topic {name!r} not usable after {timeout:.1f}s: {last_problem}")


def warn_if_not_compacted(admin: AdminClient, name: str, timeout: float) -> None:
    """Kafka Connect refuses to start on an internal topic that is not compact-only, because a
    delete policy would eventually drop live configs or offsets. We never change an existing topic,
    so we say so loudly instead. Best effort: brokers that cannot describe configs are not checked."""
    try:
        futures = admin.describe_configs([ConfigResource("topic", name)], request_timeout=timeout)
        for future in futures.values():
            entry = future.result(timeout=timeout).get("cleanup.policy")
            policy = entry.value if entry is not None else None
            if policy is not None and policy.replace(" ", "") != "compact":
                log.warning(
                    "internal topic %s has cleanup.policy=%s; it must be 'compact' or old records will be "
                    "deleted and state lost",
                    name,
                    policy,
                )
    except (KafkaException, TimeoutError) as exc:
        log.debug("cannot check cleanup.policy of %s: %s", name, exc)
