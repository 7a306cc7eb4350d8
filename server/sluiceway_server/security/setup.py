"""A replica's security settings from its worker config: the tokens file, how it reaches the other
replicas, the warning for a listener that anyone on the network can use, and the notice that file
connectors are refused until connector.allowed.paths is set on such a replica."""

from __future__ import annotations

import logging
from pathlib import Path

from sluiceway.common.transport import TransportSecurity
from sluiceway.connect.worker_policy import ALLOWED_PATHS_CONFIG, WorkerPolicy, is_loopback_host
from sluiceway_server.config import WorkerConfig, WorkerConfigError
from sluiceway_server.security.principals import TokensFile, TokensFileError
from sluiceway_server.security.tls import ListenerTls

__all__ = [
    "is_loopback_host",
    "note_confined_paths",
    "replica_transport",
    "tokens_file",
    "warn_if_exposed",
]

log = logging.getLogger("sluiceway_server.security")


def tokens_file(config: WorkerConfig) -> TokensFile | None:
    """The parsed auth.tokens.file, or None when authentication is off."""
    path = config.get("auth.tokens.file").strip()
    if not path:
        return None
    try:
        return TokensFile.load(Path(path))
    except TokensFileError as exc:
        raise WorkerConfigError("auth.tokens.file", str(exc)) from exc


def replica_transport(config: WorkerConfig, tls: ListenerTls | None) -> TransportSecurity:
    """How this replica calls another: over TLS when its own listener uses TLS (the others are
    configured alike), trusting tls.ca.file, presenting its listener certificate (for replicas that
    require client certificates) and sending replica.auth.token when set."""
    token = config.get("replica.auth.token").strip() or None
    if tls is None:
        return TransportSecurity(token=token)
    return TransportSecurity(
        tls=True,
        ca_file=config.get("tls.ca.file").strip() or None,
        cert_file=config.get("tls.certificate.file").strip(),
        key_file=config.get("tls.key.file").strip(),
        token=token,
    )


def warn_if_exposed(config: WorkerConfig, authenticated: bool, encrypted: bool) -> None:
    """Logs a warning for every way the listener is open to others: no authentication on an
    address other hosts reach, or tokens sent in clear over such an address."""
    host = config.listen_address().rpartition(":")[0]
    if is_loopback_host(host):
        return
    if not authenticated:
        log.warning(
            "*** The control plane listens on %s WITHOUT AUTHENTICATION: anyone who reaches this "
            "address can create, change and delete connectors. Set auth.tokens.file (and TLS), or "
            "listen on 127.0.0.1 only. ***",
            config.listen_address(),
        )
    elif not encrypted:
        log.warning(
            "The control plane listens on %s without TLS: bearer tokens cross the network in clear. "
            "Set tls.certificate.file and tls.key.file.",
            config.listen_address(),
        )


def note_confined_paths(policy: WorkerPolicy) -> None:
    """Logs a warning when file connectors will be refused for want of connector.allowed.paths
    (the replica is exposed and names no directory), so the operator learns it before a user does."""
    if policy.exposed is None or policy.allowed_paths:
        return
    log.warning(
        "Connectors with path keys (FileStreamSource, FileStreamSink, SparkFileSink) are refused: %s "
        "and %s is empty. Set %s to the directories they may use.",
        policy.exposed,
        ALLOWED_PATHS_CONFIG,
        ALLOWED_PATHS_CONFIG,
    )
