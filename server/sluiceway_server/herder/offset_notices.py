"""The notice a create answer carries when offsets committed under the connector's name are in
Kafka already (an earlier connector of that name left them): its tasks resume from them, as in
Kafka Connect, which surprises whoever meant to start afresh, so the answer says so and names the
commands that drop them.

The look-up is cheap and bounded: a source connector's offsets come from what this process has
read of the offsets topics already (the worker's, and the connector's own one when it is open), a
sink connector's from one Admin API call limited to `LOOKUP_TIMEOUT_S`. A look-up that fails or
runs out of time gives no notice and never fails the create.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Final

from sluiceway_server.herder.views import Notice
from sluiceway_server.model import ConnectorType
from sluiceway_server.storage import ConnectorOffsetStorage

__all__ = ["COMMITTED_OFFSETS_EXIST", "LOOKUP_TIMEOUT_S", "committed_offsets_notices"]

log = logging.getLogger(__name__)

COMMITTED_OFFSETS_EXIST: Final = "COMMITTED_OFFSETS_EXIST"
# How long a sink's consumer group look-up may take before the create goes on without a notice.
LOOKUP_TIMEOUT_S: Final = 2.0


async def committed_offsets_notices(
    storage: ConnectorOffsetStorage,
    name: str,
    config: Mapping[str, str],
    kind: ConnectorType,
    *,
    validate_only: bool,
    timeout: float = LOOKUP_TIMEOUT_S,
) -> tuple[Notice, ...]:
    """A COMMITTED_OFFSETS_EXIST notice when offsets committed under `name` exist for a connector
    of this `kind` and `config`; nothing when there are none, the kind is unknown or the look-up
    fails."""
    try:
        where = await _committed(storage, name, config, kind, timeout)
    except Exception as exc:  # a notice is a courtesy: the create goes on without it
        log.info("not checking for offsets committed under the name %s: %s", name, exc)
        return ()
    if where is None:
        return ()
    return (Notice(COMMITTED_OFFSETS_EXIST, _message(name, where, validate_only=validate_only)),)


async def _committed(
    storage: ConnectorOffsetStorage,
    name: str,
    config: Mapping[str, str],
    kind: ConnectorType,
    timeout: float,
) -> str | None:
    """Where committed offsets of `name` are, in words, or None when there are none."""
    if kind is ConnectorType.SOURCE:
        pairs, topics = storage.known_source_offsets(name, config)
        if not pairs:
            return None
        return f"{_count(len(pairs), 'source partition')} in offsets topic {topics}"
    if kind is ConnectorType.SINK:
        group = storage.consumer_group(name, config)
        committed = await asyncio.wait_for(storage.read_sink(name, config, timeout), timeout + 0.5)
        if not committed:
            return None
        return f"consumer group {group} has offsets for {_count(len(committed), 'partition')}"
    return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _message(name: str, where: str, *, validate_only: bool) -> str:
    if validate_only:
        return (
            f"Offsets committed under the name {name} exist already ({where}): a connector created "
            "under this name resumes from them instead of starting afresh, as in Kafka Connect. To "
            f"start afresh, create it with --initial-state stopped, then run `sluiceway offsets reset "
            f"{name}` and `sluiceway connectors resume {name}`."
        )
    return (
        f"Connector {name} resumes from offsets committed under this name before ({where}), as in "
        f"Kafka Connect. To start afresh instead, run `sluiceway connectors delete {name} "
        f"--delete-offsets` and create it again, or `sluiceway connectors stop {name}`, then "
        f"`sluiceway offsets reset {name}` and `sluiceway connectors resume {name}`."
    )
