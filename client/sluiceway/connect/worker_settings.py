"""The worker's settings, each declared once as a ConfigDef key: type, default, documentation,
validator, importance and group. The control plane's defaults and checks, the key sets both processes
read from the environment, and the settings tables of docs/CONFIGURATION.md are derived from these
declarations.
Checks that involve several keys stay with their owner: WorkerConfig (executor timeouts, TLS files
that go together) and WorkerPolicy (directories, the override policy, internal topics), which
executors apply too. The ``task.restart.*`` keys are declared in ``restart_config`` and taken whole.

Two definitions share them:

- ``WORKER_CONFIG_DEF``: the keys the control plane (``sluiceway server``) knows. Its defaults as
  config text are ``worker_defaults()``; it takes ``SLUICEWAY_<KEY>`` environment variables for its
  keys and for the ``WORKER_PASSTHROUGH_PREFIXES`` families only; ``check_worker_settings`` checks
  every key's value, in declaration order, in the control plane's words (``expected an integer``).
- ``EXECUTOR_CONFIG_DEF``: the keys an executor (``sluiceway executor``) takes from ``SLUICEWAY_<KEY>``
  variables for its own config, besides the ``EXECUTOR_PASSTHROUGH_PREFIXES`` families: the worker
  keys that matter where tasks run, and a few the control plane only passes on to executors. An
  executor's own config holds only what it sets (it is laid over the control plane's), so these
  defaults are documentation there.

Both are built once, at import, and shared: read them, never add keys to them. The key sets differ on
purpose, so that an unrelated variable never turns into a setting (``SLUICEWAY_SERVER`` is the
client's, ``SLUICEWAY_TOKEN`` the executor's credential).

The documentation strings are written for the settings table of docs/CONFIGURATION.md, which
``client/generate_settings_doc.py`` makes from them (a unit test keeps it current), so they may use
Markdown: ``code`` spans and links to other documents in docs/.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Final

from sluiceway.connect.config import (
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConfigType,
    ConfigValidator,
    Importance,
    Password,
    convert_to_string,
)
from sluiceway.connect.framework_config import HEARTBEAT_INTERVAL_MS_CONFIG, HEARTBEAT_RECORDS_TOPIC_CONFIG
from sluiceway.connect.restart_config import WORKER_RESTART_CONFIG_DEF
from sluiceway.connect.topic_creation_config import TOPIC_CREATION_ENABLE_CONFIG

__all__ = [
    "EXECUTOR_CONFIG_DEF",
    "EXECUTOR_PASSTHROUGH_PREFIXES",
    "METRICS_TASK_COUNTS_ENABLE_CONFIG",
    "PASSTHROUGH_DOC",
    "WORKER_CONFIG_DEF",
    "WORKER_PASSTHROUGH_PREFIXES",
    "check_worker_settings",
    "worker_bool",
    "worker_default",
    "worker_defaults",
    "worker_int",
]

# Key families passed on whole, without a declaration of each key: the control plane takes these
# from SLUICEWAY_* variables, and hands them (less the prefix) to its Kafka clients.
WORKER_PASSTHROUGH_PREFIXES: Final = ("producer.", "consumer.", "admin.")
PASSTHROUGH_DOC: Final = (
    "passed without the prefix to the Kafka clients (in the control plane, `admin.*` also reaches the "
    "internal topics' producer and consumer)"
)
# The families an executor takes from SLUICEWAY_* variables: its Kafka clients' settings, the config
# providers' parameters and the worker converters' settings.
EXECUTOR_PASSTHROUGH_PREFIXES: Final = (
    *WORKER_PASSTHROUGH_PREFIXES,
    "ssl.",
    "sasl.",
    "config.providers.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
)

# Whether an executor counts each batch's records and bytes inside the batch's own Spark job.
METRICS_TASK_COUNTS_ENABLE_CONFIG: Final = "metrics.task.counts.enable"

_INTEGER_TYPES: Final = frozenset({ConfigType.SHORT, ConfigType.INT, ConfigType.LONG})


def worker_int(name: str, raw: str) -> int:
    """A worker value read as a whole number (surrounding whitespace ignored); ConfigException names
    the key otherwise."""
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigException(name, reason=f"expected an integer, got {raw!r}") from None


def worker_bool(name: str, raw: str) -> bool:
    """A worker value read as ``true`` or ``false`` in any case; ConfigException names the key
    otherwise."""
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ConfigException(name, reason=f"expected true or false, got {text!r}")
    return text == "true"


class _Rule(ConfigValidator):
    """A check of one parsed worker value: ``passes`` says whether it is accepted, ``reason`` (text,
    or text made from the value) why not, ``description`` what is accepted."""

    def __init__(
        self, passes: Callable[[Any], bool], reason: str | Callable[[Any], str], description: str
    ) -> None:
        self.passes = passes
        self.reason = reason
        self.description = description

    def __call__(self, name: str, value: Any) -> None:
        if not self.passes(value):
            reason = self.reason(value) if callable(self.reason) else self.reason
            raise ConfigException(name, reason=reason)

    def describe(self) -> str:
        return self.description


_NOT_EMPTY: Final = _Rule(lambda value: bool(str(value).strip()), "must not be empty", "not empty")
_POSITIVE: Final = _Rule(lambda value: value > 0, "must be positive", "[1,...]")
_NOT_NEGATIVE: Final = _Rule(lambda value: value >= 0, "must not be negative", "[0,...]")
_AT_LEAST_ONE: Final = _Rule(lambda value: value >= 1, "must be at least 1", "[1,...]")
_REPLICATION_FACTOR: Final = _Rule(
    lambda value: value == -1 or value >= 1,
    "must be -1 (broker default) or at least 1",
    "-1 (broker default), or 1 and up",
)
_CLIENT_AUTH: Final = _Rule(
    lambda value: str(value).lower() in ("none", "required"),
    lambda value: f"expected none or required, got {str(value).lower()!r}",
    "none or required, any case",
)
_HEARTBEAT_TOPIC_DEFAULT: Final = "connect-heartbeats"
# A connector's empty heartbeat.records.topic means the worker's (KIP-910), so the worker needs one.
_HEARTBEAT_TOPIC: Final = _Rule(
    lambda value: bool(str(value).strip()),
    "must not be empty: it is the topic of every connector that does not name its own "
    f"(remove the setting for the default, {_HEARTBEAT_TOPIC_DEFAULT})",
    "not empty",
)


class _Readers(enum.Flag):
    """Which definitions a declaration goes into."""

    CONTROL_PLANE = enum.auto()
    EXECUTOR = enum.auto()
    BOTH = CONTROL_PLANE | EXECUTOR


_BOTH, _CONTROL_PLANE, _EXECUTOR = _Readers.BOTH, _Readers.CONTROL_PLANE, _Readers.EXECUTOR
_STRING, _LIST, _CLASS, _PASSWORD = ConfigType.STRING, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD
_BOOLEAN, _SHORT, _INT, _LONG = ConfigType.BOOLEAN, ConfigType.SHORT, ConfigType.INT, ConfigType.LONG
_HIGH, _MEDIUM, _LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW

# The keys by group, in the order of the settings table. Each: name, type, default, importance,
# validator, and which definitions take it. The restart keys come whole from restart_config, between
# the heartbeat keys and security.
_Row = tuple[str, ConfigType, Any, Importance, ConfigValidator | None, _Readers]
_GROUPS: Final[Mapping[str, tuple[_Row, ...]]] = {
    "Kafka": (
        ("bootstrap.servers", _STRING, "localhost:9092", _HIGH, _NOT_EMPTY, _BOTH),
        ("group.id", _STRING, "sluiceway-cluster", _HIGH, _NOT_EMPTY, _CONTROL_PLANE),
    ),
    "Internal topics": (
        ("config.storage.topic", _STRING, "connect-configs", _HIGH, _NOT_EMPTY, _BOTH),
        ("config.storage.replication.factor", _SHORT, 3, _LOW, _REPLICATION_FACTOR, _CONTROL_PLANE),
        ("offset.storage.topic", _STRING, "connect-offsets", _HIGH, _NOT_EMPTY, _BOTH),
        ("offset.storage.replication.factor", _SHORT, 3, _LOW, _REPLICATION_FACTOR, _CONTROL_PLANE),
        ("offset.storage.partitions", _INT, 25, _LOW, _AT_LEAST_ONE, _CONTROL_PLANE),
        ("status.storage.topic", _STRING, "connect-status", _HIGH, _NOT_EMPTY, _BOTH),
        ("status.storage.replication.factor", _SHORT, 3, _LOW, _REPLICATION_FACTOR, _CONTROL_PLANE),
        ("status.storage.partitions", _INT, 5, _LOW, _AT_LEAST_ONE, _CONTROL_PLANE),
        ("cluster.storage.topic", _STRING, "connect-cluster", _HIGH, _NOT_EMPTY, _BOTH),
        ("cluster.storage.replication.factor", _SHORT, 3, _LOW, _REPLICATION_FACTOR, _CONTROL_PLANE),
    ),
    "Control plane": (
        ("session.timeout.ms", _INT, 10000, _HIGH, _POSITIVE, _CONTROL_PLANE),
        ("listeners", _STRING, "127.0.0.1:8083", _HIGH, _NOT_EMPTY, _CONTROL_PLANE),
        ("advertised.listeners", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("rest.listeners", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("metrics.listeners", _STRING, "", _MEDIUM, None, _BOTH),
        ("tracing.otlp.endpoint", _STRING, "", _LOW, None, _BOTH),
        (METRICS_TASK_COUNTS_ENABLE_CONFIG, _BOOLEAN, "true", _LOW, None, _BOTH),
        ("executor.heartbeat.interval.ms", _INT, 3000, _MEDIUM, _POSITIVE, _CONTROL_PLANE),
        ("executor.session.timeout.ms", _INT, 10000, _MEDIUM, _POSITIVE, _CONTROL_PLANE),
        ("plugin.callback.timeout.ms", _INT, 30000, _LOW, _POSITIVE, _CONTROL_PLANE),
        ("request.timeout.ms", _INT, 90000, _LOW, _POSITIVE, _CONTROL_PLANE),
        ("startup.timeout.ms", _INT, 60000, _LOW, _POSITIVE, _CONTROL_PLANE),
        ("readiness.kafka.check.interval.ms", _INT, 2000, _LOW, _POSITIVE, _CONTROL_PLANE),
        ("readiness.kafka.unreachable.ms", _INT, 6000, _LOW, _POSITIVE, _CONTROL_PLANE),
        ("shutdown.drain.ms", _INT, 0, _LOW, _NOT_NEGATIVE, _CONTROL_PLANE),
        ("spark.remote", _STRING, "sc://localhost:15002", _LOW, None, _CONTROL_PLANE),
    ),
    "Connectors": (
        ("topic.tracking.enable", _BOOLEAN, "true", _LOW, None, _BOTH),
        ("topic.tracking.allow.reset", _BOOLEAN, "true", _LOW, None, _CONTROL_PLANE),
        (TOPIC_CREATION_ENABLE_CONFIG, _BOOLEAN, "true", _LOW, None, _BOTH),
        ("plugin.path", _LIST, "", _LOW, None, _BOTH),
        ("connector.allowed.paths", _LIST, "", _MEDIUM, None, _BOTH),
        ("connector.client.config.override.policy", _STRING, "All", _MEDIUM, None, _BOTH),
        ("connector.client.config.override.allowlist", _LIST, "", _LOW, None, _BOTH),
        ("config.providers", _LIST, "", _LOW, None, _BOTH),
    ),
    "Heartbeats": (
        (HEARTBEAT_INTERVAL_MS_CONFIG, _LONG, 0, _LOW, _NOT_NEGATIVE, _BOTH),
        (HEARTBEAT_RECORDS_TOPIC_CONFIG, _STRING, _HEARTBEAT_TOPIC_DEFAULT, _LOW, _HEARTBEAT_TOPIC, _BOTH),
    ),
    "Security": (
        ("tls.certificate.file", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("tls.key.file", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("tls.client.auth", _STRING, "none", _MEDIUM, _CLIENT_AUTH, _CONTROL_PLANE),
        ("tls.client.ca.file", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("tls.ca.file", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("auth.tokens.file", _STRING, "", _MEDIUM, None, _CONTROL_PLANE),
        ("replica.auth.token", _PASSWORD, "", _MEDIUM, None, _CONTROL_PLANE),
        ("audit.log.file", _STRING, "", _LOW, None, _CONTROL_PLANE),
        ("reflection.internal.enable", _BOOLEAN, "false", _LOW, None, _CONTROL_PLANE),
    ),
    # The control plane reads none of these from SLUICEWAY_* variables; from its file or --set they
    # reach the executors with the rest of its config.
    "Passed on to executors": (
        ("security.protocol", _STRING, None, _MEDIUM, None, _EXECUTOR),
        ("client.dns.lookup", _STRING, None, _LOW, None, _EXECUTOR),
        ("key.converter", _CLASS, None, _LOW, None, _EXECUTOR),
        ("value.converter", _CLASS, None, _LOW, None, _EXECUTOR),
        ("header.converter", _CLASS, None, _LOW, None, _EXECUTOR),
    ),
}


def _replication_factor_doc(topic: str) -> str:
    return f"replication factor of the {topic} topic when it is created; `-1`: the broker's default"


_DOCS: Final[Mapping[str, str]] = {
    "bootstrap.servers": "the Kafka cluster holding the data and the internal topics",
    "group.id": (
        "the control-plane cluster: replicas with the same `group.id` (and internal topics) elect one "
        "leader; also the prefix of the transactional ids "
        "(`{group.id}-leader`, `{group.id}-{connector}-{task}`)"
    ),
    "config.storage.topic": (
        "connector configs, task configs, target states, restart requests (created with 1 partition)"
    ),
    "config.storage.replication.factor": _replication_factor_doc("config"),
    "offset.storage.topic": "source offsets",
    "offset.storage.replication.factor": _replication_factor_doc("offsets"),
    "offset.storage.partitions": "partitions of the offsets topic when it is created",
    "status.storage.topic": "connector and task statuses, active topics",
    "status.storage.replication.factor": _replication_factor_doc("status"),
    "status.storage.partitions": "partitions of the status topic when it is created",
    "cluster.storage.topic": (
        "ours: the replicas' shared record of the cluster (created with 1 partition): the leader's "
        "announcement, from which the replicas elect the next leader, and the members' records"
    ),
    "cluster.storage.replication.factor": _replication_factor_doc("cluster"),
    "session.timeout.ms": (
        "a leader whose member record (refreshed every third of this) has not been read for this "
        "long is taken for gone, and another replica takes over; a leader whose address refuses "
        "connections, or that stopped cleanly, is replaced without this wait"
    ),
    "listeners": "gRPC listen address (the first of a comma-separated list); this host only unless changed",
    "advertised.listeners": (
        "the address other replicas, executors and `cluster info` use for this replica, and its id "
        "(also the `worker_id` of the connector statuses it writes); empty: this host's name and the "
        "port it bound"
    ),
    "metrics.listeners": (
        "Prometheus metrics on `/metrics`: `http://host:port` (port 0: any free port, written in the "
        "log); empty: off. An executor takes it from its own config or `SLUICEWAY_METRICS_LISTENERS` "
        "only, never from the control plane's, and shows the address it got in `cluster info`"
    ),
    METRICS_TASK_COUNTS_ENABLE_CONFIG: (
        "whether executors count each batch's records, and the bytes of their keys and values, inside "
        "the Spark job that moves the batch (an aggregate riding along it, `DataFrame.observe`); "
        "`false` leaves that aggregate out of the plan. What is known without it is still counted: a "
        "sink's records read, and its rate in the status, come from the offset ranges of its batches "
        "(a compacted topic's gaps and transaction markers count too), its records written are those "
        "less the records skipped, and its bytes read stay at 0; a record-level source task "
        "(FileStreamSource) counts from the summary it makes of each batch anyway, without the bytes "
        "written when it has transforms or `errors.tolerance=all`; a DataFrame-level source task "
        "(DataGenSource, JdbcSource) counts nothing, so its records and bytes counters and its rate "
        "stay at 0. An executor's own value (`--config`, `SLUICEWAY_METRICS_TASK_COUNTS_ENABLE`) wins "
        "over the control plane's"
    ),
    "tracing.otlp.endpoint": (
        "OpenTelemetry traces: the OTLP/gRPC collector to send spans to, `http://host:4317` (plain) or "
        "`https://host:4317` (TLS); empty: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or "
        "`OTEL_EXPORTER_OTLP_ENDPOINT` when set, else off. The control plane traces each mutation (a "
        "forwarded one as one trace over both replicas), an executor each batch that did work"
    ),
    "rest.listeners": (
        "Kafka Connect's REST API: `http://host:port` or `https://host:port` (TLS from the tls.* keys), "
        "comma-separated; empty: off. Same calls, roles and audit as the gRPC API"
    ),
    "executor.heartbeat.interval.ms": "how often executors send a heartbeat",
    "executor.session.timeout.ms": (
        "an executor silent (or disconnected) this long is dropped, its tasks fenced and given to "
        "others; a new leader waits up to this long for the executors that ran tasks. Must exceed "
        "`executor.heartbeat.interval.ms`"
    ),
    "plugin.callback.timeout.ms": (
        "how long plugin code may run: a connector's `start`, `task_configs` or `stop` (past it the "
        "connector fails), and validation or a config definition the API asks for (past it the call "
        "answers DEADLINE_EXCEEDED, reason PLUGIN_TIMEOUT)"
    ),
    "request.timeout.ms": "deadline of API calls that come without one",
    "startup.timeout.ms": "how long start-up waits for Kafka and the internal topics",
    "readiness.kafka.check.interval.ms": (
        "how often the replica asks Kafka for its metadata to decide readiness (the health service "
        '`""`), each ask waiting up to this long'
    ),
    "readiness.kafka.unreachable.ms": (
        "how long Kafka may go unanswered before the replica reports itself not ready (NOT_SERVING); "
        "it is ready again at the next answer"
    ),
    "shutdown.drain.ms": (
        "on SIGTERM, how long the replica keeps answering calls, reporting not ready but alive, before "
        "it stops taking new ones: give it a little more than the readiness probe period of the "
        "orchestrator or mesh in front of it"
    ),
    "spark.remote": "accepted; no effect: executors take `--spark-remote`",
    "topic.tracking.enable": (
        "record in the status topic the topics each task writes or reads (KIP-558); `false`: nothing "
        "is recorded and `topics get`/`reset` answer PERMISSION_DENIED"
    ),
    "topic.tracking.allow.reset": (
        "whether `topics reset` is allowed (`false`: PERMISSION_DENIED, reason TOPIC_TRACKING_RESET_DISABLED)"
    ),
    TOPIC_CREATION_ENABLE_CONFIG: (
        "whether source connectors that set `topic.creation.*` get those keys validated and their "
        "topics created (KIP-158); `false`: the keys are ignored and the broker's auto-creation, if "
        "on, decides (keys no group reads are refused on every worker, see below)"
    ),
    "plugin.path": (
        "comma-separated absolute directories of Python connector modules or packages: a dotted "
        "`connector.class` (or task class) that is not an installed plugin is loaded only from there, "
        "and nothing else is ever imported; a name that clashes with another module is refused. "
        "Executors need the same directories (Spark workers too, for record-level tasks)"
    ),
    "connector.allowed.paths": (
        "comma-separated absolute directories that path keys of connectors (FileStream's `file`, "
        "SparkFileSink's `path`) must stay inside, `..` and symlinks resolved; SparkFileSink also "
        "takes `file:` URIs and no other scheme while this is set. Empty: anywhere while every "
        "listener is on loopback and `auth.tokens.file` is empty (`make run`); otherwise such "
        "connectors are refused until this names their directories"
    ),
    "connector.client.config.override.policy": (
        "which `producer.override.*`, `consumer.override.*`, `admin.override.*` keys a connector may "
        "set: `All`, `None`, or `Allowlist` (the client keys in "
        "`connector.client.config.override.allowlist`)"
    ),
    "connector.client.config.override.allowlist": (
        "with the policy `Allowlist`: the Kafka client keys, comma-separated and without the "
        "`producer.override.` (or consumer, or admin) prefix, that connectors may override"
    ),
    "config.providers": (
        "config providers that resolve references in connector configs: `env`, `file`, or both "
        "(comma-separated); empty: none, and a reference is refused. Settings "
        "`config.providers.env.param.allowlist.pattern` (default `.*`, must match the whole variable "
        "name) and `config.providers.file.param.allowed.paths` (absolute directories; empty: "
        "anywhere), in the file or with `--set`"
    ),
    HEARTBEAT_INTERVAL_MS_CONFIG: (
        "how often source tasks that implement `produce_heartbeat_records` are asked for heartbeat "
        "records (KIP-910); `0`: never. A connector's own `heartbeat.interval.ms` wins unless empty. "
        "Must not be empty here"
    ),
    HEARTBEAT_RECORDS_TOPIC_CONFIG: (
        "where heartbeat records go; created when missing (the broker's default partitions and "
        "replication factor) on the cluster the task's producer writes to. A connector's own "
        "`heartbeat.records.topic` wins unless empty. Must not be empty here: the control plane does "
        "not start, and an executor's own config is refused"
    ),
    "tls.certificate.file": "PEM certificate chain of the listener; with `tls.key.file`, it serves TLS",
    "tls.key.file": "PEM private key of `tls.certificate.file`; the two are set together or not at all",
    "tls.client.auth": (
        "`required`: every caller presents a certificate issued by `tls.client.ca.file` (mTLS), which "
        "needs a TLS listener"
    ),
    "tls.client.ca.file": "PEM CA bundle client certificates must chain to",
    "tls.ca.file": "what this replica trusts when it calls another replica (empty: the system's trust store)",
    "auth.tokens.file": (
        "turns authentication on: `role token principal` per line (see [Securing a deployment](SECURITY.md))"
    ),
    "replica.auth.token": "the token this replica sends to the others (its entry has the role `replica`)",
    "audit.log.file": "a file for the audit log's JSON lines, besides the logger `sluiceway.audit`",
    "reflection.internal.enable": "whether server reflection also lists the internal `ExecutorService`",
    "security.protocol": (
        "how connectors' Kafka clients talk to the brokers (`PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or "
        "`SASL_SSL`), with the `ssl.*` and `sasl.*` keys; unset: Kafka's default, `PLAINTEXT`"
    ),
    "client.dns.lookup": "how connectors' Kafka clients resolve broker names (Kafka's `client.dns.lookup`)",
    "key.converter": (
        "the key converter of every connector that names none: `JsonConverter`, `StringConverter` or "
        "`ByteArrayConverter`, set up with `key.converter.*` keys; unset: `StringConverter`"
    ),
    "value.converter": (
        "the value converter of every connector that names none, set up with `value.converter.*` "
        "keys; unset: `JsonConverter` without the schema envelope"
    ),
    "header.converter": "accepted; no effect: Sluiceway applies no header converter",
}


def _build() -> tuple[ConfigDef, ConfigDef]:
    worker, executor = ConfigDef(), ConfigDef()

    def add(readers: _Readers, key: ConfigKey) -> None:
        if _Readers.CONTROL_PLANE in readers:
            worker.define_key(key)
        if _Readers.EXECUTOR in readers:
            executor.define_key(key)

    for group, rows in _GROUPS.items():
        for order, (name, kind, default, importance, validator, readers) in enumerate(rows, start=1):
            definition = ConfigDef().define(
                name, kind, default, validator, importance, _DOCS[name], group, order
            )
            add(readers, definition.keys()[name])
        if group == "Heartbeats":
            for key in WORKER_RESTART_CONFIG_DEF.keys().values():
                add(_BOTH, key)
    return worker, executor


# The control plane's keys, and the keys an executor takes from SLUICEWAY_* variables (see the
# module doc). Read only.
WORKER_CONFIG_DEF, EXECUTOR_CONFIG_DEF = _build()


def _default_text(key: ConfigKey) -> str:
    if isinstance(key.default, Password):
        return key.default.value
    return convert_to_string(key.default, key.type) or ""


_DEFAULTS: Final[Mapping[str, str]] = {
    name: _default_text(key) for name, key in WORKER_CONFIG_DEF.keys().items()
}


def worker_defaults() -> dict[str, str]:
    """Every key the control plane knows, with its default as config text (empty when it has none)."""
    return dict(_DEFAULTS)


def worker_default(name: str) -> str:
    """The default of one of the control plane's keys, as config text; KeyError for another key."""
    return _DEFAULTS[name]


def _parse(key: ConfigKey, raw: str) -> Any:
    if key.type is ConfigType.BOOLEAN:
        return worker_bool(key.name, raw)
    if key.type in _INTEGER_TYPES:
        return worker_int(key.name, raw)
    return raw.strip()


def check_worker_settings(props: Mapping[str, str]) -> None:
    """Checks the value of every key of WORKER_CONFIG_DEF in ``props`` (a missing key has its default),
    in declaration order: booleans and integers must read as such, and each value must pass the key's
    validator. Raises ConfigException naming the first bad key. Keys ``props`` holds besides these
    are not looked at."""
    for name, key in WORKER_CONFIG_DEF.keys().items():
        value = _parse(key, props.get(name, _DEFAULTS[name]))
        if key.validator is not None:
            key.validator(name, value)
