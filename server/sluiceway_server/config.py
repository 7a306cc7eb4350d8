"""Worker configuration: Kafka Connect's worker keys, from a properties file, `SLUICEWAY_*`
environment variables and command-line overrides (later sources win)."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sluiceway.common.listeners import listener_url, split_listener
from sluiceway.common.metrics_endpoint import MetricsListenerError, parse_metrics_listener
from sluiceway.common.properties import PropertiesSyntaxError, env_overrides, load_properties
from sluiceway.common.tracing import TracingEndpointError, validate_endpoint
from sluiceway.connect.config import ConfigException
from sluiceway.connect.config_providers import check_config_providers
from sluiceway.connect.restart_config import check_worker_restart_config
from sluiceway.connect.worker_policy import WorkerPolicy, WorkerPolicyError
from sluiceway.connect.worker_settings import (
    WORKER_PASSTHROUGH_PREFIXES,
    check_worker_settings,
    worker_bool,
    worker_defaults,
    worker_int,
)

# Keys a worker understands, with their defaults as config text (Kafka Connect's names where it has
# one); each is declared, with its type, checks and documentation, in sluiceway.connect.worker_settings.
DEFAULTS: Final[Mapping[str, str]] = worker_defaults()

PASSTHROUGH_PREFIXES: Final = WORKER_PASSTHROUGH_PREFIXES


@dataclass(frozen=True)
class RestListener:
    """One entry of `rest.listeners`: `http://host:port` or `https://host:port`."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return listener_url(self.scheme, self.host, self.port)


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
        try:
            # The task.restart.* keys first, read as executors read them (Kafka's parsing), so that
            # their errors read the same at start-up and when a task runs.
            check_worker_restart_config(self.props)
            # Every declared key's type and validator (worker_settings).
            check_worker_settings(self.props)
        except ConfigException as exc:
            raise WorkerConfigError(exc.name or "config", exc.detail) from None
        if self.get_int("executor.session.timeout.ms") <= self.get_int("executor.heartbeat.interval.ms"):
            raise WorkerConfigError(
                "executor.session.timeout.ms", "must exceed executor.heartbeat.interval.ms"
            )
        self.listen_address()
        self.rest_listeners()
        try:
            parse_metrics_listener(self.get("metrics.listeners"))
        except MetricsListenerError as exc:
            raise WorkerConfigError("metrics.listeners", str(exc)) from None
        try:
            validate_endpoint(self.get("tracing.otlp.endpoint"))
        except TracingEndpointError as exc:
            raise WorkerConfigError("tracing.otlp.endpoint", str(exc)) from None
        self._validate_security()
        check_config_providers(self.props, WorkerConfigError)  # config.providers and its parameters
        # The worker's rules for connectors (WorkerPolicy): plugin.path, connector.allowed.paths, the
        # client override policy, and a heartbeat topic that is not internal.
        try:
            WorkerPolicy.from_worker_config(self.props)
        except WorkerPolicyError as exc:
            raise WorkerConfigError(exc.key, exc.message) from None

    def _validate_security(self) -> None:
        """The TLS keys that go together; each key's own value was checked with the others."""
        client_auth = self.get("tls.client.auth").strip().lower()
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

    def get(self, key: str) -> str:
        return self.props.get(key, DEFAULTS.get(key, ""))

    def get_int(self, key: str) -> int:
        try:
            return worker_int(key, self.get(key))
        except ConfigException as exc:
            raise WorkerConfigError(key, exc.detail) from None

    def get_bool(self, key: str) -> bool:
        try:
            return worker_bool(key, self.get(key))
        except ConfigException as exc:
            raise WorkerConfigError(key, exc.detail) from None

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

    def rest_listeners(self) -> list[RestListener]:
        """The REST API's listeners (Kafka Connect's REST API, rest/); none when rest.listeners is
        empty, which leaves it off."""
        listeners = []
        for entry in (e.strip() for e in self.get("rest.listeners").split(",")):
            if not entry:
                continue
            scheme, host, port = split_listener(entry)
            if scheme not in ("http", "https") or not port.isdigit():
                raise WorkerConfigError(
                    "rest.listeners", f"expected http://host:port or https://host:port, got {entry!r}"
                )
            if scheme == "https" and not self.get("tls.certificate.file").strip():
                raise WorkerConfigError(
                    "rest.listeners", f"{entry} needs tls.certificate.file and tls.key.file"
                )
            listeners.append(RestListener(scheme, host, int(port)))
        return listeners

    def advertised_address(self, bound_port: int | None = None) -> str:
        """Where others reach this replica; defaults to this host's name and the bound port."""
        advertised = self.get("advertised.listeners").split(",")[0].strip().split("://", 1)[-1]
        if advertised:
            return advertised
        host, _, port = self.listen_address().rpartition(":")
        if host in ("0.0.0.0", "::", "[::]", ""):
            host = socket.gethostname()
        return f"{host}:{bound_port or port}"
