"""The Kafka client settings of a task's producers, consumers and admin clients, from the worker
config and the connector's overrides."""

from __future__ import annotations

from collections.abc import Mapping

from sluiceway.connect import ConnectException

__all__ = ["kafka_client_config"]

# Kafka client settings every client role gets from the worker config (as Kafka Connect passes
# security settings to its producers, consumers and admin clients).
_COMMON_EXACT = ("bootstrap.servers", "client.dns.lookup", "security.protocol")
_COMMON_PREFIXES = ("ssl.", "sasl.")
_ROLES = ("producer", "consumer", "admin")


def kafka_client_config(
    worker_config: Mapping[str, str], role: str, connector_config: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Kafka client settings for ``role`` (producer, consumer or admin): the worker's common
    settings, then its ``{role}.*`` pass-through settings, then the connector's
    ``{role}.override.*`` ones (Kafka Connect's precedence)."""
    if role not in _ROLES:
        raise ValueError(f"unknown Kafka client role {role!r}")
    config = {
        key: value
        for key, value in worker_config.items()
        if key in _COMMON_EXACT or key.startswith(_COMMON_PREFIXES)
    }
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
        raise ConnectException("the worker config from the control plane has no bootstrap.servers")
    return config
