"""Worker configuration: Kafka Connect's worker keys, from a properties file, `SLUICEWAY_*`
environment variables and command-line overrides (later sources win)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sluiceway.connect.config import ConfigException
from sluiceway.connect.config_providers import check_config_providers
from sluiceway.connect.restart_config import WORKER_RESTART_DEFAULTS, check_worker_restart_config
from sluiceway.connect.worker_policy import WorkerPolicy, WorkerPolicyError
from sluiceway.properties import PropertiesSyntaxError, env_overrides, load_properties

# Keys a worker understands, with their defaults (Kafka Connect's names where it has one).
DEFAULTS: dict[str, str] = {
    "bootstrap.servers": "localhost:9092",
    "group.id": "sluiceway-cluster",
    "config.storage.topic": "connect-configs",
    "config.storage.replication.factor": "3",
    "offset.storage.topic": "connect-offsets",
    "offset.storage.replication.factor": "3",
    "offset.storage.partitions": "25",
    "status.storage.topic": "connect-status",
    "status.storage.replication.factor": "3",
    "status.storage.partitions": "5",
    # Ours: the one-partition topic the replicas' group is subscribed to, which also holds the
    # leader's announcement and the members' records.
    "cluster.storage.topic": "connect-cluster",
    "cluster.storage.replication.factor": "3",
    # A replica that sends the group no heartbeat for this long leaves it; if it led, another
    # replica takes over (Kafka Connect's default).
    "session.timeout.ms": "10000",
    # Loopback by default: a listener on another interface is a deliberate choice, and without
    # authentication the server warns loudly about it.
    "listeners": "127.0.0.1:8083",
    "advertised.listeners": "",
    # TLS of the gRPC listener (PEM files). A certificate and key switch the listener to TLS;
    # tls.client.auth=required makes every caller present a certificate issued by the CA in
    # tls.client.ca.file (mTLS). tls.ca.file is what this replica trusts when it calls another
    # replica (empty: the system's trust store); it presents its own certificate to them.
    "tls.certificate.file": "",
    "tls.key.file": "",
    "tls.client.ca.file": "",
    "tls.client.auth": "none",
    "tls.ca.file": "",
    # Authentication: a tokens file (one `role token principal` per line) turns it on for every
    # call but health checks; with mTLS, a client certificate whose subject is listed with token
    # `-` authenticates as that principal. replica.auth.token is the token this replica sends when
    # it calls another replica (its entry needs the role `replica`); with mTLS its certificate
    # may serve instead.
    "auth.tokens.file": "",
    "replica.auth.token": "",
    # Where the audit log (one JSON line per mutation) goes besides the logger sluiceway.audit.
    "audit.log.file": "",
    # Whether server reflection also lists the internal ExecutorService.
    "reflection.internal.enable": "false",
    # Directories of connector modules that a dotted connector.class may name, besides the
    # plugins installed under the sluiceway.connectors entry points.
    "plugin.path": "",
    # Directories that file-based connectors may read and write under. Empty: anywhere while the
    # API is loopback-only without authentication; with auth.tokens.file or a listener other hosts
    # reach, file connectors are refused until this names their directories.
    "connector.allowed.paths": "",
    # Which producer.override.*, consumer.override.* and admin.override.* keys a connector may set:
    # All, None or Allowlist (the keys in connector.client.config.override.allowlist).
    "connector.client.config.override.policy": "All",
    "connector.client.config.override.allowlist": "",
    # Config providers resolving ${provider:path:key} references where a config is used: env and
    # file (empty: none, and a reference is refused).
    "config.providers": "",
    # KIP-558: whether the topics each connector's tasks use are recorded in the status topic and
    # readable through TopicService (false: nothing recorded, reads and resets PERMISSION_DENIED).
    "topic.tracking.enable": "true",
    # KIP-558: whether TopicService may reset a connector's set of active topics.
    "topic.tracking.allow.reset": "true",
    # KIP-158: whether a source connector that sets topic.creation.* has those keys validated and
    # its tasks create the topics they write to when missing (false: the keys are ignored).
    "topic.creation.enable": "true",
    # KIP-910: how often source tasks are asked for heartbeat records (0: never), and the topic
    # they go to (never empty); a connector's own heartbeat.* keys win unless empty. Executors read
    # them from Welcome.
    "heartbeat.interval.ms": "0",
    "heartbeat.records.topic": "connect-heartbeats",
    # Automatic restarts of tasks that fail by their own error (sluiceway.connect.restart_config);
    # executors read them from Welcome, and a connector's own task.restart.* keys win.
    **WORKER_RESTART_DEFAULTS,
    # How long the control plane lets a connector's start, task_configs or stop run.
    "plugin.callback.timeout.ms": "30000",
    # The deadline of API calls that arrive without one (90 s, as Kafka Connect's REST timeout).
    "request.timeout.ms": "90000",
    # How long start-up waits for Kafka before giving up.
    "startup.timeout.ms": "60000",
    # Not read by executors yet: they take their endpoint from `sluiceway executor --spark-remote`.
    "spark.remote": "sc://localhost:15002",
    # Executors send a heartbeat this often; one silent for the session timeout is declared dead.
    "executor.heartbeat.interval.ms": "3000",
    "executor.session.timeout.ms": "10000",
}

PASSTHROUGH_PREFIXES = ("producer.", "consumer.", "admin.")


class WorkerConfigError(ValueError):
    """A worker setting is missing or malformed; `key` names it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def _env_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """SLUICEWAY_BOOTSTRAP_SERVERS → bootstrap.servers; SLUICEWAY_PRODUCER_LINGER_MS → producer.linger.ms.
    Only known keys and pass-through prefixes, so unrelated variables (SLUICEWAY_SERVER) are ignored."""
    return env_overrides(env, DEFAULTS, PASSTHROUGH_PREFIXES)


@dataclass(frozen=True)
class WorkerConfig:
    """The control plane's settings, as Kafka Connect worker keys.

    Owns `props`: every key it was given, known or not. `load` builds it from the built-in `DEFAULTS`,
    then a properties file, then `SLUICEWAY_*` environment variables, then explicit overrides, later
    sources winning; keys this module does not know are kept and passed on unchecked, and the
    `producer.`, `consumer.` and `admin.` ones reach the Kafka clients through `prefixed`.

    Threading: immutable once built (a frozen dataclass whose mapping nothing changes after `load`),
    so any thread or coroutine may read it.

    Guarantees: an instance returned by `load` has passed `validate`: the required keys are not empty,
    the numeric keys are integers in their ranges, the boolean keys are `true` or `false`, the
    executor session timeout exceeds the heartbeat interval, and `listeners` reads as host:port, so
    the typed getters do not raise for those keys. A key missing from `props` reads as its default.
    The pass-through client settings are not checked here; that is left to the Kafka clients that
    receive them.
    """

    props: Mapping[str, str]

    @classmethod
    def load(
        cls,
        file: Path | None = None,
        overrides: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> WorkerConfig:
        props = dict(DEFAULTS)
        if file is not None:
            try:
                props.update(load_properties(file))
            except OSError as exc:
                raise WorkerConfigError("config", f"cannot read {file}: {exc}") from exc
            except PropertiesSyntaxError as exc:
                raise WorkerConfigError("config", f"{file}: {exc}") from exc
        props.update(_env_overrides(os.environ if env is None else env))
        props.update(overrides or {})
        config = cls(props)
        config.validate()
        return config

    def validate(self) -> None:
        for key in (
            "bootstrap.servers",
            "group.id",
            "config.storage.topic",
            "offset.storage.topic",
            "status.storage.topic",
            "cluster.storage.topic",
            "listeners",
        ):
            if not self.get(key).strip():
                raise WorkerConfigError(key, "must not be empty")
        for key in (
            "config.storage.replication.factor",
            "offset.storage.replication.factor",
            "status.storage.replication.factor",
            "cluster.storage.replication.factor",
        ):
            value = self.get_int(key)
            if value == 0 or value < -1:
                raise WorkerConfigError(key, "must be -1 (broker default) or at least 1")
        for key in ("offset.storage.partitions", "status.storage.partitions"):
            if self.get_int(key) < 1:
                raise WorkerConfigError(key, "must be at least 1")
        for key in (
            "plugin.callback.timeout.ms",
            "request.timeout.ms",
            "startup.timeout.ms",
            "executor.heartbeat.interval.ms",
            "executor.session.timeout.ms",
            "session.timeout.ms",
        ):
            if self.get_int(key) <= 0:
                raise WorkerConfigError(key, "must be positive")
        if self.get_int("executor.session.timeout.ms") <= self.get_int("executor.heartbeat.interval.ms"):
            raise WorkerConfigError(
                "executor.session.timeout.ms", "must exceed executor.heartbeat.interval.ms"
            )
        if self.get_int("heartbeat.interval.ms") < 0:
            raise WorkerConfigError("heartbeat.interval.ms", "must not be negative")
        if not self.get("heartbeat.records.topic").strip():
            # A connector's empty heartbeat.records.topic means this one (KIP-910), so it needs a value.
            raise WorkerConfigError(
                "heartbeat.records.topic",
                "must not be empty: it is the topic of every connector that does not name its own "
                "(remove the setting for the default, connect-heartbeats)",
            )
        for key in ("topic.tracking.enable", "topic.tracking.allow.reset", "topic.creation.enable"):
            self.get_bool(key)
        try:
            check_worker_restart_config(self.props)
        except ConfigException as exc:
            raise WorkerConfigError(exc.name or "task.restart.enable", exc.detail) from None
        self.listen_address()
        self._validate_security()
        check_config_providers(self.props, WorkerConfigError)  # config.providers and its parameters
        # The worker's rules for connectors (WorkerPolicy): plugin.path, connector.allowed.paths, the
        # client override policy, and a heartbeat topic that is not internal.
        try:
            WorkerPolicy.from_worker_config(self.props)
        except WorkerPolicyError as exc:
            raise WorkerConfigError(exc.key, exc.message) from None

    def _validate_security(self) -> None:
        client_auth = self.get("tls.client.auth").strip().lower()
        if client_auth not in ("none", "required"):
            raise WorkerConfigError("tls.client.auth", f"expected none or required, got {client_auth!r}")
        has_certificate = bool(self.get("tls.certificate.file").strip())
        if has_certificate != bool(self.get("tls.key.file").strip()):
            raise WorkerConfigError(
                "tls.key.file" if has_certificate else "tls.certificate.file",
                "tls.certificate.file and tls.key.file go together",
            )
        if client_auth == "required" and not has_certificate:
            raise WorkerConfigError("tls.client.auth", "client certificates need a TLS listener")
        if client_auth == "required" and not self.get("tls.client.ca.file").strip():
            raise WorkerConfigError("tls.client.ca.file", "tls.client.auth=required needs the client CA")
        self.get_bool("reflection.internal.enable")

    def get(self, key: str) -> str:
        return self.props.get(key, DEFAULTS.get(key, ""))

    def get_int(self, key: str) -> int:
        raw = self.get(key)
        try:
            return int(raw.strip())
        except ValueError:
            raise WorkerConfigError(key, f"expected an integer, got {raw!r}") from None

    def get_bool(self, key: str) -> bool:
        raw = self.get(key).strip().lower()
        if raw not in ("true", "false"):
            raise WorkerConfigError(key, f"expected true or false, got {raw!r}")
        return raw == "true"

    def seconds(self, key: str) -> float:
        return self.get_int(key) / 1000.0

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Kafka client settings passed through, e.g. `producer.linger.ms` → `linger.ms`."""
        return {k[len(prefix) :]: v for k, v in self.props.items() if k.startswith(prefix)}

    def listen_address(self) -> str:
        """The first listener as host:port (a scheme like `grpc://` is accepted and dropped)."""
        first = self.get("listeners").split(",")[0].strip()
        first = first.split("://", 1)[-1]
        host, sep, port = first.rpartition(":")
        if not sep or not port.isdigit():
            raise WorkerConfigError("listeners", f"expected host:port, got {first!r}")
        return f"{host or '0.0.0.0'}:{port}"

    def advertised_address(self, bound_port: int | None = None) -> str:
        """Where others reach this replica; defaults to this host's name and the bound port."""
        advertised = self.get("advertised.listeners").split(",")[0].strip().split("://", 1)[-1]
        if advertised:
            return advertised
        host, _, port = self.listen_address().rpartition(":")
        if host in ("0.0.0.0", "::", "[::]", ""):
            host = socket.gethostname()
        return f"{host}:{bound_port or port}"
