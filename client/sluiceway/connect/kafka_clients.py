"""Where a connector's Kafka clients connect and where its offsets live, from the worker config and
the connector's overrides. The control plane (offset reads, commits, KIP-875 changes) and the
executors (the pipelines' producers, consumers and admin clients) both use these, so they always
agree on the cluster, the consumer group and the offsets topic of a connector."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol

from sluiceway.connect.connector import ConnectException
from sluiceway.connect.worker_settings import worker_default

__all__ = [
    "OWN_OFFSETS_TOPIC_KEYS",
    "client_bootstrap_servers",
    "connect_first",
    "connection_settings",
    "kafka_client_config",
    "offset_commit_config",
    "own_offsets_topic",
    "sink_consumer_group",
    "source_offsets_topic",
    "task_transactional_id",
    "topic_name_problem",
]

# The connection settings: what any Kafka client needs to reach a cluster, whatever its role. Every
# role gets them from the worker config (as Kafka Connect passes security settings to its
# producers, consumers and admin clients).
_COMMON_EXACT = ("bootstrap.servers", "client.dns.lookup", "security.protocol")
_COMMON_PREFIXES = ("ssl.", "sasl.")
_ROLES = ("producer", "consumer", "admin")
log = logging.getLogger(__name__)

GROUP_ID_OVERRIDE = "consumer.override.group.id"
OFFSETS_TOPIC_CONFIG = "offsets.storage.topic"
# The worker's offsets topic, and its name when the worker config leaves it unset or empty.
WORKER_OFFSETS_TOPIC_CONFIG = "offset.storage.topic"
_DEFAULT_WORKER_OFFSETS_TOPIC = worker_default(WORKER_OFFSETS_TOPIC_CONFIG)


def kafka_client_config(
    worker_config: Mapping[str, str], role: str, connector_config: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Kafka client settings for ``role`` (producer, consumer or admin): the worker's common
    settings, then its ``{role}.*`` pass-through settings, then the connector's
    ``{role}.override.*`` ones (Kafka Connect's precedence)."""
    if role not in _ROLES:
        raise ValueError(f"unknown Kafka client role {role!r}")
    config = connection_settings(worker_config)
    prefix = f"{role}."
    override = f"{role}.override."
    config.update(
        {
            key[len(prefix) :]: value
            for key, value in worker_config.items()
            if key.startswith(prefix) and not key.startswith(override)
        }
    )
    if connector_config is not None:
        config.update(
            {
                key[len(override) :]: value
                for key, value in connector_config.items()
                if key.startswith(override)
            }
        )
    if not config.get("bootstrap.servers"):
        raise ConnectException(_NO_BOOTSTRAP)
    return config


_NO_BOOTSTRAP = "the worker config from the control plane has no bootstrap.servers"


def client_bootstrap_servers(
    worker_config: Mapping[str, str], role: str, connector_config: Mapping[str, str] | None = None
) -> str:
    """``kafka_client_config(...)["bootstrap.servers"]`` without building the whole config: three
    lookups in the same precedence. The leader asks it of every source connector on each
    rebalance, so its cost grows with the number of connectors."""
    if role not in _ROLES:
        raise ValueError(f"unknown Kafka client role {role!r}")
    value = worker_config.get("bootstrap.servers")
    value = worker_config.get(f"{role}.bootstrap.servers", value)
    if connector_config is not None:
        value = connector_config.get(f"{role}.override.bootstrap.servers", value)
    if not value:
        raise ConnectException(_NO_BOOTSTRAP)
    return value


def connection_settings(client_config: Mapping[str, str]) -> dict[str, str]:
    """The part of a client's settings that says how to reach its cluster (bootstrap servers, DNS
    lookup, security protocol, ``ssl.*`` and ``sasl.*``), without what only suits its role: e.g. an
    admin client or a consumer on the cluster a producer config points at."""
    return {
        key: value
        for key, value in client_config.items()
        if key in _COMMON_EXACT or key.startswith(_COMMON_PREFIXES)
    }


def sink_consumer_group(connector: str, connector_config: Mapping[str, str]) -> str:
    """The consumer group holding a sink connector's offsets: ``consumer.override.group.id`` or
    ``connect-{connector}`` (Kafka Connect's)."""
    return (connector_config.get(GROUP_ID_OVERRIDE) or "").strip() or f"connect-{connector}"


# The keys of a connector's config that ``own_offsets_topic`` reads.
OWN_OFFSETS_TOPIC_KEYS = (OFFSETS_TOPIC_CONFIG, "producer.override.bootstrap.servers")


def own_offsets_topic(worker_config: Mapping[str, str], connector_config: Mapping[str, str]) -> str | None:
    """The offsets topic of a source connector's own, on the cluster its producer writes to, or None
    when its offsets live only in the worker's offsets topic.

    As in Kafka Connect: the connector's ``offsets.storage.topic`` when set; else, when its producer
    writes to another cluster than the worker's (a different ``bootstrap.servers``), the worker's
    offsets topic name on that cluster. Reads merge the worker's topic with this one, this one
    winning."""
    topic = (connector_config.get(OFFSETS_TOPIC_CONFIG) or "").strip()
    if topic:
        return topic
    if client_bootstrap_servers(worker_config, "producer", connector_config) != worker_config.get(
        "bootstrap.servers"
    ):
        return worker_config.get(WORKER_OFFSETS_TOPIC_CONFIG) or _DEFAULT_WORKER_OFFSETS_TOPIC
    return None


def source_offsets_topic(worker_config: Mapping[str, str], connector_config: Mapping[str, str]) -> str:
    """Where a source task commits its offsets: the connector's own offsets topic, else the
    worker's."""
    own = own_offsets_topic(worker_config, connector_config)
    return own or worker_config.get(WORKER_OFFSETS_TOPIC_CONFIG) or _DEFAULT_WORKER_OFFSETS_TOPIC


def offset_commit_config(
    worker_config: Mapping[str, str], connector_config: Mapping[str, str], *, source: bool
) -> dict[str, str]:
    """Settings of the transactional producer a task commits its offsets with, on the cluster that
    holds them: a source task's offsets topic (the connector's producer cluster when it has a topic
    of its own, else the worker's), a sink task's consumer group (the connector's admin cluster).
    Executors commit with it; the control plane fences a task's id on the same cluster."""
    if not source:
        return connection_settings(kafka_client_config(worker_config, "admin", connector_config))
    if own_offsets_topic(worker_config, connector_config) is not None:
        return kafka_client_config(worker_config, "producer", connector_config)
    return kafka_client_config(worker_config, "producer")


def task_transactional_id(group_id: str, connector: str, task: int) -> str:
    """The transactional id of a task's offset commits, `{group.id}-{connector}-{task}` (the id
    Kafka Connect gives a task's producer): a new holder fences every earlier one."""
    return f"{group_id}-{connector}-{task}"


_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, or None when it is legal (Kafka's rules:
    1 to 249 characters from ASCII letters, digits, '.', '_' and '-', and not '.' or '..')."""
    if not name:
        return "must not be empty"
    if name in (".", ".."):
        return "must not be '.' or '..'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"must be at most {MAX_TOPIC_NAME_LENGTH} characters"
    bad = sorted(set(name) - _TOPIC_CHARS)
    if bad:
        return f"may hold only ASCII letters, digits, '.', '_' and '-', not {''.join(bad)!r}"
    return None


class _AnswersMetadata(Protocol):
    # confluent-kafka's Producer, Consumer and AdminClient.
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object: ...


def connect_first(client: _AnswersMetadata, timeout: float) -> None:
    """Has a new librdkafka client fetch the cluster's metadata, and with it connect to a broker,
    before its first real request. A transactional producer whose ``init_transactions`` comes first
    can find no broker to ask for its producer id and wait for librdkafka's retry timer, 0.5 s (one
    new producer in nine did against the embedded broker, none of 80 after this). A failure here is
    only logged: the request that follows reports its own."""
    from confluent_kafka import KafkaException

    try:
        client.list_topics(timeout=max(timeout, 0.1))
    except KafkaException as exc:
        log.debug("fetching metadata before the first request failed: %s", exc)
