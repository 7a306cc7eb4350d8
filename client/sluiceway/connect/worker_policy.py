"""What a worker lets connectors do, read from its worker keys: which topics are internal, where
plugin modules may come from, which local directories file connectors may use, and which Kafka
client settings a connector may override.

File connectors may use any path only on a worker whose API is for this machine alone: listening on
loopback, without authentication (`make run`). With `auth.tokens.file` set, or a listener other
hosts can reach, every path key is refused until `connector.allowed.paths` names the directories
it may use: callers are then not all the machine's owner, and a FileStream connector reads or writes
any file Spark can.

The control plane builds one from its worker config and applies it when it validates a connector
config; an executor builds one from the worker config it runs tasks with (the leader's, with its
own settings laid over it) and applies it again before and while a task runs. A key missing from
the mapping reads as its default (``sluiceway.connect.worker_settings``).
"""

from __future__ import annotations

import enum
import ipaddress
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from sluiceway.connect.config import ConfigDef, ConfigException, PathKind
from sluiceway.connect.worker_settings import worker_bool, worker_default

__all__ = [
    "CLIENT_OVERRIDE_PREFIXES",
    "KAFKA_INTERNAL_TOPICS",
    "STORAGE_TOPIC_KEYS",
    "OverridePolicy",
    "WorkerPolicy",
    "WorkerPolicyError",
    "exposure",
    "is_loopback_host",
    "path_errors",
]

PLUGIN_PATH_CONFIG: Final = "plugin.path"
ALLOWED_PATHS_CONFIG: Final = "connector.allowed.paths"
OVERRIDE_POLICY_CONFIG: Final = "connector.client.config.override.policy"
OVERRIDE_ALLOWLIST_CONFIG: Final = "connector.client.config.override.allowlist"
TOPIC_CREATION_ENABLE_CONFIG: Final = "topic.creation.enable"
HEARTBEAT_TOPIC_CONFIG: Final = "heartbeat.records.topic"
LISTENERS_CONFIG: Final = "listeners"
AUTH_TOKENS_FILE_CONFIG: Final = "auth.tokens.file"

# The worker's own topics, with their defaults.
STORAGE_TOPIC_KEYS: Final[Mapping[str, str]] = {
    key: worker_default(key)
    for key in (
        "config.storage.topic",
        "offset.storage.topic",
        "status.storage.topic",
        "cluster.storage.topic",
    )
}
# Kafka's own internal topics: every name starting with "__" is internal, these are the ones a
# topics.regex is tried against.
INTERNAL_TOPIC_PREFIX: Final = "__"
KAFKA_INTERNAL_TOPICS: Final = ("__consumer_offsets", "__transaction_state")
CLIENT_OVERRIDE_PREFIXES: Final = ("producer.override.", "consumer.override.", "admin.override.")

_SCHEME: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


class WorkerPolicyError(ValueError):
    """A worker key of the policy has a bad value; ``key`` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


class OverridePolicy(enum.Enum):
    """Kafka's connector.client.config.override.policy, less Principal, plus an allow-list."""

    ALL = "All"
    NONE = "None"
    ALLOWLIST = "Allowlist"


_DEFAULT_OVERRIDE_POLICY: Final = OverridePolicy(worker_default(OVERRIDE_POLICY_CONFIG))
_DEFAULT_TOPIC_CREATION: Final = worker_bool(
    TOPIC_CREATION_ENABLE_CONFIG, worker_default(TOPIC_CREATION_ENABLE_CONFIG)
)


def _directories(props: Mapping[str, str], key: str) -> tuple[str, ...]:
    """A comma-separated list of absolute directories, normalised, in order, without repeats."""
    found: dict[str, None] = {}
    for raw in props.get(key, "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        if "\x00" in entry or not os.path.isabs(entry):
            raise WorkerPolicyError(key, f"expected absolute directories, got {entry!r}")
        found[os.path.normpath(entry)] = None
    return tuple(found)


def is_loopback_host(host: str) -> bool:
    """Whether a listener or peer host (`localhost`, `127.0.0.1`, `[::1]`) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure(props: Mapping[str, str]) -> str | None:
    """Why the worker's API is open to more than this machine's owner, for messages: authentication
    is on, or a listener (any of `listeners`, as written) is off loopback; None when neither."""
    if props.get(AUTH_TOKENS_FILE_CONFIG, "").strip():
        return f"authentication is on ({AUTH_TOKENS_FILE_CONFIG})"
    for entry in props.get(LISTENERS_CONFIG, worker_default(LISTENERS_CONFIG)).split(","):
        address = entry.strip().split("://", 1)[-1]
        # An empty host binds every interface, as WorkerConfig.listen_address reads it.
        if address and not is_loopback_host(address.rpartition(":")[0]):
            return f"the API listens on {address}, which other hosts can reach ({LISTENERS_CONFIG})"
    return None


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class WorkerPolicy:
    """The rules one worker applies to connectors (see the module doc). The defaults are those of a
    worker config that sets none of the keys."""

    storage_topics: frozenset[str] = frozenset(STORAGE_TOPIC_KEYS.values())
    plugin_path: tuple[str, ...] = ()
    allowed_paths: tuple[str, ...] = ()
    override_policy: OverridePolicy = _DEFAULT_OVERRIDE_POLICY
    override_allowlist: frozenset[str] = field(default_factory=frozenset)
    topic_creation: bool = _DEFAULT_TOPIC_CREATION
    # Why path keys need allowed_paths on this worker (see ``exposure``); None: any path while
    # allowed_paths is empty.
    exposed: str | None = None

    @classmethod
    def from_worker_config(cls, props: Mapping[str, str]) -> WorkerPolicy:
        """The policy of a worker config; WorkerPolicyError names the first bad key."""
        storage = frozenset(
            (props.get(key) or "").strip() or default for key, default in STORAGE_TOPIC_KEYS.items()
        )
        raw_policy = props.get(OVERRIDE_POLICY_CONFIG, "").strip() or _DEFAULT_OVERRIDE_POLICY.value
        policy = next((p for p in OverridePolicy if p.value.lower() == raw_policy.lower()), None)
        if policy is None:
            raise WorkerPolicyError(
                OVERRIDE_POLICY_CONFIG, f"expected All, None or Allowlist, got {raw_policy!r}"
            )
        allowlist = frozenset(
            k.strip() for k in props.get(OVERRIDE_ALLOWLIST_CONFIG, "").split(",") if k.strip()
        )
        raw_creation = props.get(TOPIC_CREATION_ENABLE_CONFIG)
        try:
            topic_creation = (
                _DEFAULT_TOPIC_CREATION
                if raw_creation is None
                else worker_bool(TOPIC_CREATION_ENABLE_CONFIG, raw_creation)
            )
        except ConfigException as exc:
            raise WorkerPolicyError(TOPIC_CREATION_ENABLE_CONFIG, exc.detail) from None
        built = cls(
            storage_topics=storage,
            plugin_path=_directories(props, PLUGIN_PATH_CONFIG),
            allowed_paths=_directories(props, ALLOWED_PATHS_CONFIG),
            override_policy=policy,
            override_allowlist=allowlist,
            topic_creation=topic_creation,
            exposed=exposure(props),
        )
        heartbeat_topic = props.get(HEARTBEAT_TOPIC_CONFIG, worker_default(HEARTBEAT_TOPIC_CONFIG)).strip()
        if not heartbeat_topic:
            # Connectors that leave theirs empty use this one (KIP-910): it cannot be empty itself.
            raise WorkerPolicyError(HEARTBEAT_TOPIC_CONFIG, "must not be empty")
        if built.is_internal_topic(heartbeat_topic):
            raise WorkerPolicyError(HEARTBEAT_TOPIC_CONFIG, f"{heartbeat_topic} is an internal topic")
        return built

    # ------------------------------------------------------------------ internal topics

    def is_internal_topic(self, topic: str) -> bool:
        """Whether ``topic`` is one of the worker's own topics or one of Kafka's (``__*``)."""
        name = topic.strip()
        return name in self.storage_topics or name.startswith(INTERNAL_TOPIC_PREFIX)

    def internal_topics(self) -> list[str]:
        """The internal topics known by name: the worker's, then Kafka's own."""
        return [*sorted(self.storage_topics), *KAFKA_INTERNAL_TOPICS]

    def internal_topics_matching(self, pattern: re.Pattern[str]) -> list[str]:
        """The internal topics known by name that ``pattern`` matches whole (as topics.regex)."""
        return [topic for topic in self.internal_topics() if pattern.fullmatch(topic)]

    def internal_topic_problem(self, topic: str) -> str | None:
        if not self.is_internal_topic(topic):
            return None
        return f"{topic.strip()} is an internal topic of the worker or of Kafka; connectors may not use it"

    # ------------------------------------------------------------------ client overrides

    def override_problem(self, key: str) -> str | None:
        """Why the connector key ``key`` (a client override such as ``producer.override.linger.ms``)
        is refused, or None (also for keys that are no client override)."""
        prefix = next((p for p in CLIENT_OVERRIDE_PREFIXES if key.startswith(p)), None)
        if prefix is None or self.override_policy is OverridePolicy.ALL:
            return None
        client_key = key[len(prefix) :]
        if self.override_policy is OverridePolicy.NONE:
            return f"client config overrides are refused by {OVERRIDE_POLICY_CONFIG}=None"
        if client_key in self.override_allowlist:
            return None
        return (
            f"{client_key} is not in {OVERRIDE_ALLOWLIST_CONFIG}, so {OVERRIDE_POLICY_CONFIG}=Allowlist "
            "refuses overriding it"
        )

    # ------------------------------------------------------------------ local paths

    @property
    def confines_paths(self) -> bool:
        """Whether path keys are checked at all: allowed paths are set, or the worker is exposed."""
        return bool(self.allowed_paths) or self.exposed is not None

    def path_problem(self, value: str, kind: PathKind = PathKind.FILE) -> str | None:
        """Why the path ``value`` of a key of ``kind`` is outside connector.allowed.paths, or None.

        With no allowed paths every value passes, unless the worker is exposed (``exposed``): then
        every value is refused, with the setting to set. Otherwise the value must be an absolute path
        (for URI keys also a ``file:`` URI, whose path is percent-decoded) that stays inside one of
        the directories both as written with ``..`` resolved and with symbolic links resolved on this
        machine; any other URI scheme names a store that no local directory confines.
        """
        raw = value.strip()
        if not self.allowed_paths:
            if self.exposed is None:
                return None
            return (
                f"{raw} is refused: {self.exposed}, so connectors may only use the directories "
                f"{ALLOWED_PATHS_CONFIG} names, and it names none; set {ALLOWED_PATHS_CONFIG} in the "
                "worker config to the directories file connectors may use"
            )
        allowed = ", ".join(self.allowed_paths)
        candidates = [raw]
        if kind is PathKind.URI and _SCHEME.match(raw):
            parts = urllib.parse.urlsplit(raw)
            if parts.scheme.lower() != "file":
                return (
                    f"{raw} is not a local path: with {ALLOWED_PATHS_CONFIG} set, only paths under "
                    f"{allowed} are allowed"
                )
            if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
                return f"{raw} is not a local file URI (file:///path)"
            candidates = [parts.path, urllib.parse.unquote(parts.path)]
        for path in candidates:
            if "\x00" in path or not os.path.isabs(path):
                return f"{raw} is not an absolute path, which {ALLOWED_PATHS_CONFIG} requires"
            lexical, real = os.path.normpath(path), os.path.realpath(path)
            if not any(
                _inside(lexical, d) and _inside(real, os.path.realpath(d)) for d in self.allowed_paths
            ):
                return f"{raw} is outside the directories {ALLOWED_PATHS_CONFIG} allows ({allowed})"
        return None


def path_errors(
    definition: ConfigDef, configs: Iterable[Mapping[str, str]], policy: WorkerPolicy
) -> dict[str, str]:
    """Key → why its value is refused, for every key that ``definition`` declares a path
    (``path_kind``) and whose value in one of ``configs`` lies outside connector.allowed.paths.
    Blank values are left to the key's own validation."""
    problems: dict[str, str] = {}
    for name, key in definition.keys().items():
        if key.path_kind is None:
            continue
        for config in configs:
            value = config.get(name)
            if value is None or not value.strip():
                continue
            problem = policy.path_problem(value, key.path_kind)
            if problem is not None:
                problems.setdefault(name, problem)
    return problems
