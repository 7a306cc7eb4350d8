"""The asyncio Sluiceway client (grpc.aio): the same methods as `SluicewayClient`, as coroutines.

This is the one hand-written client: client/generate_sync.py derives the blocking
`SluicewayClient` (_sync.py) from it. Change the methods here, then run that script.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Self, TypeVar

import grpc

from sluiceway.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    connectors_pb2,
    connectors_pb2_grpc,
    offsets_pb2,
    offsets_pb2_grpc,
    plugins_pb2,
    plugins_pb2_grpc,
    topics_pb2,
    topics_pb2_grpc,
)
from sluiceway.client import _requests
from sluiceway.client._base import (
    DEFAULT_TIMEOUT,
    UNSET,
    ChannelOptions,
    Metadata,
    PagedRequest,
    PagedResponse,
    TimeoutArg,
    call_timeout,
    channel_options,
    check_timeout,
    resolve_target,
    transport_settings,
)
from sluiceway.client._objects import (
    Connector,
    ConnectorPage,
    ConnectorStatus,
    StatusEvent,
    Task,
    TaskStatus,
)
from sluiceway.client._replicas import Replica, Replicas
from sluiceway.client._requests import ConfigMapping, InitialStateLike, OffsetLike, ViewLike
from sluiceway.client._retry import AsyncStreamCall, Retrier, RetryPolicy
from sluiceway.common.targets import parse_targets
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import from_rpc_error

__all__ = ["AsyncSluicewayClient"]

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")
_PageReq = TypeVar("_PageReq", bound=PagedRequest)
_PageResp = TypeVar("_PageResp", bound=PagedResponse)


class _Stubs:
    """One replica's channel and the service stubs bound to it."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel
        self.connectors = connectors_pb2_grpc.ConnectorServiceStub(channel)
        self.plugins = plugins_pb2_grpc.PluginServiceStub(channel)
        self.offsets = offsets_pb2_grpc.OffsetServiceStub(channel)
        self.topics = topics_pb2_grpc.TopicServiceStub(channel)
        self.cluster = cluster_pb2_grpc.ClusterServiceStub(channel)


class AsyncSluicewayClient:
    """The asyncio twin of `SluicewayClient`: a typed, retrying client of the control plane.

    `target` is `host:port`, or the replicas of one control plane as `host1:port,host2:port,...`
    (IPv6 as `[address]:port`); it defaults to $SLUICEWAY_SERVER, else `localhost:8083`. Calls go
    to one replica and move on to the next when it fails (`sluiceway.common.targets`); a host name
    that resolves to several addresses is one gRPC channel over all of them, pick_first.
    `timeout` is the overall deadline of each call in seconds, retries included (None: no
    deadline); every method also takes its own `timeout`. Failures raise `SluicewayError`
    subclasses (`sluiceway.errors`). Mutations take an optional `request_id`; without one
    each call gets a fresh id that all its retries share, so a retry never acts twice.

    Create it inside a running event loop (gRPC binds the channel to it) and use it as an
    async context manager, or await `close()`.
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        metadata: Metadata = (),
        options: ChannelOptions = (),
        retrier: Retrier | None = None,
        security: TransportSecurity | None = None,
    ) -> None:
        """`security` gives TLS, mutual TLS and a bearer token (`sluiceway.common.transport`); without
        it the SLUICEWAY_TLS, SLUICEWAY_TLS_CA, SLUICEWAY_TLS_CERT, SLUICEWAY_TLS_KEY,
        SLUICEWAY_TOKEN and SLUICEWAY_TOKEN_FILE environment variables apply. `credentials`
        instead sets the channel's TLS credentials directly (e.g. `grpc.ssl_channel_credentials()`);
        `metadata` is sent with every call, after the token's `authorization` entry (its own
        `authorization` entry replaces the token's); `options` are gRPC channel arguments.
        `retrier` replaces the one built from `retry`, e.g. to inject a clock and sleep in tests."""
        self.target = resolve_target(target)
        self.timeout = check_timeout(timeout)
        if retry is not None and retrier is not None:
            raise ValueError("pass either retry or retrier, not both")
        self._retrier = retrier if retrier is not None else Retrier(retry)
        self.security, channel_credentials, call_entries = transport_settings(security, credentials, metadata)
        self._metadata = call_entries or None
        self._credentials = channel_credentials
        self._options = channel_options(options)
        self._replicas = Replicas(parse_targets(self.target), self._open)
        # The first replica's channel now, as with a single address; the others when first needed.
        self._replicas.current()

    def _open(self, address: str) -> _Stubs:
        if self._credentials is not None:
            # The channel's authority is `address`, so TLS checks this replica's own host name.
            return _Stubs(grpc.aio.secure_channel(address, self._credentials, options=self._options))
        return _Stubs(grpc.aio.insecure_channel(address, options=self._options))

    @property
    def retry_policy(self) -> RetryPolicy:
        return self._retrier.policy

    @property
    def replica_address(self) -> str:
        """The address calls go to now: the first given, until a failure moves the client on."""
        return self._replicas.current().address

    async def close(self, grace: float | None = None) -> None:
        """Closes the channels; `grace` seconds let calls in flight finish (None cancels them)."""
        for stubs in self._replicas.opened():
            await stubs.channel.close(grace)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSluicewayClient(target={self.target!r})"

    async def _unary(
        self,
        method: Callable[[_Stubs], grpc.aio.UnaryUnaryMultiCallable[_Req, _Resp]],
        request: _Req,
        timeout: TimeoutArg,
    ) -> _Resp:
        # The same request object, and so the same request_id, goes out on every attempt, to
        # whichever replica is in use when the attempt starts.
        async def invoke(attempt_timeout: float | None) -> _Resp:
            replica = self._replicas.current()
            try:
                return await method(replica.stubs)(request, timeout=attempt_timeout, metadata=self._metadata)
            except grpc.RpcError as exc:
                self._replicas.failed(replica, from_rpc_error(exc).code)
                raise

        return await self._retrier.call_async(call_timeout(timeout, self.timeout), invoke)

    async def _pages(
        self,
        method: Callable[[_Stubs], grpc.aio.UnaryUnaryMultiCallable[_PageReq, _PageResp]],
        request: _PageReq,
        timeout: TimeoutArg,
    ) -> AsyncIterator[_PageResp]:
        """Every page of a List call, fetched as the iteration advances (`timeout` per page)."""
        while True:
            page = await self._unary(method, request, timeout)
            yield page
            if not page.next_page_token:
                return
            request.page_token = page.next_page_token

    # --- connectors ---------------------------------------------------------------------

    async def create_connector(
        self,
        name: str,
        config: ConfigMapping,
        *,
        initial_state: InitialStateLike = "RUNNING",
        validate_only: bool = False,
        request_id: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> Connector:
        """Creates connector `name` (KIP-980 `initial_state`: RUNNING, PAUSED or STOPPED).
        With `validate_only` the server checks everything and writes nothing."""
        request = _requests.create_connector(name, config, initial_state, validate_only, request_id)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.CreateConnector, request, timeout)
        )

    async def get_connector(
        self,
        name: str,
        *,
        view: ViewLike = "INFO",
        min_config_position: int = 0,
        timeout: TimeoutArg = UNSET,
    ) -> Connector:
        """The connector in `view` NAMES, INFO (config, type, tasks, target state), STATUS or
        FULL. `min_config_position` (a mutation's `config_position`) reads your own write."""
        request = _requests.get_connector(name, view, min_config_position)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.GetConnector, request, timeout)
        )

    async def list_connectors_page(
        self,
        *,
        view: ViewLike = "NAMES",
        page_size: int = 0,
        page_token: str = "",
        min_config_position: int = 0,
        timeout: TimeoutArg = UNSET,
    ) -> ConnectorPage:
        """One page of connectors, sorted by name; pass `next_page_token` on for the next."""
        request = _requests.list_connectors(view, page_size, page_token, min_config_position)
        return ConnectorPage.from_proto(
            await self._unary(lambda stubs: stubs.connectors.ListConnectors, request, timeout)
        )

    def list_connectors(
        self,
        *,
        view: ViewLike = "NAMES",
        page_size: int = 0,
        min_config_position: int = 0,
        timeout: TimeoutArg = UNSET,
    ) -> AsyncIterator[Connector]:
        """Every connector, as an async iterator fetching pages as it advances (`timeout` applies to
        each page's call)."""
        request = _requests.list_connectors(view, page_size, "", min_config_position)
        return self._iter_connectors(request, timeout)

    async def _iter_connectors(
        self, request: connectors_pb2.ListConnectorsRequest, timeout: TimeoutArg
    ) -> AsyncIterator[Connector]:
        async for page in self._pages(lambda stubs: stubs.connectors.ListConnectors, request, timeout):
            for connector in page.connectors:
                yield Connector.from_proto(connector)

    async def replace_connector_config(
        self,
        name: str,
        config: ConfigMapping,
        *,
        request_id: str | None = None,
        etag: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> tuple[Connector, bool]:
        """Creates or replaces the whole config; returns the connector and whether it was
        created. With `etag` (from a read), it fails with AbortedError if the connector changed."""
        request = _requests.replace_connector_config(name, config, request_id, etag)
        response = await self._unary(lambda stubs: stubs.connectors.ReplaceConnectorConfig, request, timeout)
        return Connector.from_proto(response.connector), response.created

    async def patch_connector_config(
        self,
        name: str,
        set: ConfigMapping | None = None,
        remove: Iterable[str] = (),
        *,
        request_id: str | None = None,
        etag: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> Connector:
        """Sets the keys in `set` and removes those in `remove` (Kafka Connect's null). With
        `etag` (from a read), it fails with AbortedError if the connector changed."""
        request = _requests.patch_connector_config(name, set, remove, request_id, etag)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.PatchConnectorConfig, request, timeout)
        )

    async def delete_connector(
        self,
        name: str,
        *,
        delete_offsets: bool = False,
        wait: bool = False,
        request_id: str | None = None,
        etag: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> connectors_pb2.DeleteConnectorResponse:
        """Deletes the connector. With `etag` (from a read), it fails with AbortedError if the
        connector changed. `delete_offsets` stops it, resets its offsets, then deletes it; `wait`
        returns only once its tasks have left the executors and its deleted() callback (KIP-883)
        has ended, and the answer's `deleted_callback` says how that went."""
        request = _requests.delete_connector(name, delete_offsets, wait, request_id, etag)
        return await self._unary(lambda stubs: stubs.connectors.DeleteConnector, request, timeout)

    async def pause_connector(
        self, name: str, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> Connector:
        request = _requests.pause_connector(name, request_id)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.PauseConnector, request, timeout)
        )

    async def resume_connector(
        self, name: str, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> Connector:
        request = _requests.resume_connector(name, request_id)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.ResumeConnector, request, timeout)
        )

    async def stop_connector(
        self, name: str, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> Connector:
        """KIP-875: shuts the connector and its tasks down, keeping its config."""
        request = _requests.stop_connector(name, request_id)
        return Connector.from_proto(
            await self._unary(lambda stubs: stubs.connectors.StopConnector, request, timeout)
        )

    async def restart_connector(
        self,
        name: str,
        *,
        include_tasks: bool = False,
        only_failed: bool = False,
        request_id: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> ConnectorStatus:
        """KIP-745 restart; returns the status with the restarting instances as RESTARTING."""
        request = _requests.restart_connector(name, include_tasks, only_failed, request_id)
        return ConnectorStatus.from_proto(
            await self._unary(lambda stubs: stubs.connectors.RestartConnector, request, timeout)
        )

    async def list_tasks(
        self, name: str, *, min_config_position: int = 0, timeout: TimeoutArg = UNSET
    ) -> list[Task]:
        """Every task config of the connector, in task order (all pages)."""
        request = _requests.list_tasks(name, min_config_position)
        return [
            Task.from_proto(task)
            async for page in self._pages(lambda stubs: stubs.connectors.ListTasks, request, timeout)
            for task in page.tasks
        ]

    async def connector_status(self, name: str, *, timeout: TimeoutArg = UNSET) -> ConnectorStatus:
        request = _requests.connector_status(name)
        return ConnectorStatus.from_proto(
            await self._unary(lambda stubs: stubs.connectors.GetConnectorStatus, request, timeout)
        )

    async def task_status(self, name: str, task: int, *, timeout: TimeoutArg = UNSET) -> TaskStatus:
        request = _requests.task_status(name, task)
        return TaskStatus.from_proto(
            await self._unary(lambda stubs: stubs.connectors.GetTaskStatus, request, timeout)
        )

    async def restart_task(
        self, name: str, task: int, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> None:
        request = _requests.restart_task(name, task, request_id)
        await self._unary(lambda stubs: stubs.connectors.RestartTask, request, timeout)

    def watch_status(
        self, name: str | None = None, *, include_initial: bool = True, timeout: float | None = None
    ) -> AsyncIterator[StatusEvent]:
        """Status changes of one connector (or all) as an async iterator. The stream is
        opened on first iteration and retried until its first event; it has no deadline
        unless `timeout` is given. Stop iterating and `aclose()` the iterator to cancel it."""
        request = _requests.watch_status(name, include_initial)
        check_timeout(timeout)

        # The retrier opens the stream again only after a retryable failure (UNAVAILABLE by default) of the
        # last attempt: the replica that attempt used is then left for the next one.
        used: list[Replica[_Stubs]] = []

        def open_call(attempt_timeout: float | None) -> AsyncStreamCall:
            if used:
                self._replicas.failed(used[-1], grpc.StatusCode.UNAVAILABLE)
            used[:] = [self._replicas.current()]
            return used[0].stubs.connectors.WatchStatus(
                request, timeout=attempt_timeout, metadata=self._metadata
            )

        return _status_events(self._retrier.stream_async(timeout, open_call, connectors_pb2.StatusEvent))

    # --- plugins ------------------------------------------------------------------------

    async def list_plugins(
        self, *, include_all_types: bool = False, timeout: TimeoutArg = UNSET
    ) -> list[plugins_pb2.Plugin]:
        """Installed connector plugins, sorted by class name (all pages); with
        `include_all_types`, the transforms and predicates too."""
        request = _requests.list_plugins(include_all_types)
        return [
            plugin
            async for page in self._pages(lambda stubs: stubs.plugins.ListPlugins, request, timeout)
            for plugin in page.plugins
        ]

    async def plugin_config(
        self, plugin: str, *, timeout: TimeoutArg = UNSET
    ) -> plugins_pb2.PluginConfigDefinition:
        """The config definition of a plugin, by class path or alias."""
        request = _requests.plugin_config(plugin)
        return await self._unary(lambda stubs: stubs.plugins.GetPluginConfigDefinition, request, timeout)

    async def validate_config(
        self, config: ConfigMapping, plugin: str | None = None, *, timeout: TimeoutArg = UNSET
    ) -> plugins_pb2.ValidateConnectorConfigResponse:
        """Per-field validation; an invalid config is a successful call with `error_count`.
        Without `plugin` the config's `connector.class` names it."""
        request = _requests.validate_config(config, plugin)
        return await self._unary(lambda stubs: stubs.plugins.ValidateConnectorConfig, request, timeout)

    # --- offsets ------------------------------------------------------------------------

    async def get_offsets(self, name: str, *, timeout: TimeoutArg = UNSET) -> offsets_pb2.ConnectorOffsets:
        request = _requests.get_offsets(name)
        return await self._unary(lambda stubs: stubs.offsets.GetConnectorOffsets, request, timeout)

    async def alter_offsets(
        self,
        name: str,
        offsets: Iterable[OffsetLike],
        *,
        request_id: str | None = None,
        timeout: TimeoutArg = UNSET,
    ) -> offsets_pb2.AlterConnectorOffsetsResponse:
        """KIP-875 alter (connector must be STOPPED): each item is a PartitionOffset or
        `{"partition": {...}, "offset": {...} | None}`; a None offset resets that partition."""
        request = _requests.alter_offsets(name, offsets, request_id)
        return await self._unary(lambda stubs: stubs.offsets.AlterConnectorOffsets, request, timeout)

    async def reset_offsets(
        self, name: str, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> offsets_pb2.ResetConnectorOffsetsResponse:
        request = _requests.reset_offsets(name, request_id)
        return await self._unary(lambda stubs: stubs.offsets.ResetConnectorOffsets, request, timeout)

    # --- topics and cluster -------------------------------------------------------------

    async def active_topics(self, name: str, *, timeout: TimeoutArg = UNSET) -> topics_pb2.ActiveTopics:
        """KIP-558: the topics the connector has used since the last reset."""
        request = _requests.active_topics(name)
        return await self._unary(lambda stubs: stubs.topics.GetActiveTopics, request, timeout)

    async def reset_active_topics(
        self, name: str, *, request_id: str | None = None, timeout: TimeoutArg = UNSET
    ) -> topics_pb2.ResetActiveTopicsResponse:
        """KIP-558: empties the connector's set; succeeds again for a deleted connector."""
        request = _requests.reset_active_topics(name, request_id)
        return await self._unary(lambda stubs: stubs.topics.ResetActiveTopics, request, timeout)

    async def server_info(self, *, timeout: TimeoutArg = UNSET) -> cluster_pb2.ServerInfo:
        return await self._unary(lambda stubs: stubs.cluster.GetServerInfo, _requests.server_info(), timeout)


async def _status_events(
    events: AsyncGenerator[connectors_pb2.StatusEvent, None],
) -> AsyncIterator[StatusEvent]:
    """The stream's events as client objects; closing this iterator cancels the stream."""
    try:
        async for event in events:
            yield StatusEvent.from_proto(event)
    finally:
        await events.aclose()
