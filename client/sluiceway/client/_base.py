"""Settings shared by the sync and asyncio clients: where the server is, default deadlines
and call metadata."""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any, Final, Protocol, TypeAlias

import grpc

from sluiceway.common.targets import LB_POLICY
from sluiceway.common.transport import AUTHORIZATION_KEY, TransportSecurity, own_connections

DEFAULT_TARGET: Final = "localhost:8083"
TARGET_ENV: Final = "SLUICEWAY_SERVER"
DEFAULT_TIMEOUT: Final = 30.0

Metadata: TypeAlias = Sequence[tuple[str, str | bytes]]
ChannelOptions: TypeAlias = Sequence[tuple[str, Any]]


class _Unset(enum.Enum):
    UNSET = "UNSET"


# Marks a per-call `timeout` that was not given (None already means "no deadline").
UNSET: Final = _Unset.UNSET
TimeoutArg: TypeAlias = float | _Unset | None


def resolve_target(target: str | None) -> str:
    """The explicit target, else $SLUICEWAY_SERVER, else localhost:8083: one address or a comma
    list of replicas (`sluiceway.common.targets.parse_targets` reads it)."""
    if target:
        return target
    return os.environ.get(TARGET_ENV) or DEFAULT_TARGET


def channel_options(options: ChannelOptions) -> list[tuple[str, Any]]:
    """`options` plus the client's own: connections kept to the channel (`own_connections`) and the
    load-balancing policy `LB_POLICY` (why it is pick_first: sluiceway.common.targets), unless
    `options` choose a policy themselves."""
    chosen = any(key in ("grpc.lb_policy_name", "grpc.service_config") for key, _ in options)
    return own_connections([*options, *([] if chosen else [("grpc.lb_policy_name", LB_POLICY)])])


def check_timeout(timeout: float | None) -> float | None:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be positive seconds or None, got {timeout!r}")
    return timeout


def call_timeout(timeout: TimeoutArg, default: float | None) -> float | None:
    """A call's overall deadline in seconds: its own `timeout` if given, else the client's."""
    if isinstance(timeout, _Unset):
        return default
    return check_timeout(timeout)


def call_metadata(metadata: Metadata) -> tuple[tuple[str, str | bytes], ...]:
    # gRPC rejects upper-case metadata keys at call time with a cryptic error; fail early.
    result = tuple((key, value) for key, value in metadata)
    for key, _ in result:
        if key != key.lower():
            raise ValueError(f"gRPC metadata keys must be lower case, got {key!r}")
    return result


def transport_settings(
    security: TransportSecurity | None,
    credentials: grpc.ChannelCredentials | None,
    metadata: Metadata,
) -> tuple[TransportSecurity, grpc.ChannelCredentials | None, tuple[tuple[str, str | bytes], ...]]:
    """The security in effect (`security`, else the SLUICEWAY_TLS* / SLUICEWAY_TOKEN* environment),
    the channel credentials (explicit `credentials` win over the environment's) and the metadata of
    every call: the token's authorization entry unless `metadata` carries its own, then `metadata`."""
    if credentials is not None and security is not None and security.uses_tls:
        raise ValueError("pass either credentials or a TLS security, not both")
    effective = security if security is not None else TransportSecurity.from_env()
    extra = call_metadata(metadata)
    channel_credentials = credentials if credentials is not None else effective.channel_credentials()
    own_authorization = any(key == AUTHORIZATION_KEY for key, _ in extra)
    token_entries = () if own_authorization else effective.metadata()
    return effective, channel_credentials, (*token_entries, *extra)


class PagedRequest(Protocol):
    """A List request (AIP-158): the client sets its token to fetch the next page."""

    page_token: str


class PagedResponse(Protocol):
    """A List response: an empty `next_page_token` marks the last page."""

    @property
    def next_page_token(self) -> str: ...
