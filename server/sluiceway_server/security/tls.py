"""The listener's TLS, from the worker's tls.* keys: server credentials for gRPC, and what a replica
presents when it calls another replica."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from sluiceway_server.config import WorkerConfig, WorkerConfigError

__all__ = ["ListenerTls", "listener_tls"]


def _read(config: WorkerConfig, key: str) -> bytes:
    path = config.get(key).strip()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise WorkerConfigError(key, f"cannot read {path}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class ListenerTls:
    """PEM bytes of the listener's certificate chain and key, and of the client CA when client
    certificates are required."""

    certificate: bytes
    key: bytes
    client_ca: bytes | None
    client_auth: str  # none or required

    def server_credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials(
            [(self.key, self.certificate)],
            root_certificates=self.client_ca,
            require_client_auth=self.client_auth == "required",
        )


def listener_tls(config: WorkerConfig) -> ListenerTls | None:
    """The listener's TLS, or None for a plaintext listener (no certificate configured). Files are
    read here, once: a missing or unreadable file fails start-up naming its key."""
    if not config.get("tls.certificate.file").strip():
        return None
    client_auth = config.get("tls.client.auth").strip().lower()
    return ListenerTls(
        certificate=_read(config, "tls.certificate.file"),
        key=_read(config, "tls.key.file"),
        client_ca=_read(config, "tls.client.ca.file") if client_auth != "none" else None,
        client_auth=client_auth,
    )
