"""ConnectorService: translation only; the herder does the work."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import grpc
from google.protobuf import empty_pb2

from sluiceway.api.v1 import connectors_pb2, connectors_pb2_grpc
from sluiceway_server.api import convert
from sluiceway_server.api.deadline import call_timeout
from sluiceway_server.api.errors import abort, invalid_request, mapped
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.api.names import connector_name, format_connector, format_task, task_name
from sluiceway_server.api.paging import page_request, take, within_bytes
from sluiceway_server.api.task_progress import ProgressSource, with_progress
from sluiceway_server.errors import ServerError
from sluiceway_server.herder.deadlines import with_deadline
from sluiceway_server.herder.herder import Herder
from sluiceway_server.herder.views import InstanceStatusView
from sluiceway_server.model import TargetState

Context = grpc.aio.ServicerContext[Any, Any]
T = TypeVar("T")


class ConnectorServicer(connectors_pb2_grpc.ConnectorServiceServicer):
    """ConnectorService on the control plane: checks and translates each request, and leaves the work
    to the Herder.

    Owns no connector state (the Herder and its Kafka-backed stores hold it); only the
    `RequestIdCache` it is given and the deadline of calls that come without one
    (`request.timeout.ms`).

    Threading: every method is a coroutine on the control plane's event loop (grpc.aio), and does no
    blocking I/O itself.

    Guarantees: the Herder work of a call is limited by the caller's remaining time, less a small
    margin so that the caller receives this servicer's DEADLINE_EXCEEDED naming the stage that was
    running, or by the default deadline; a reconciliation the call started goes on after that (the
    Herder runs it in a task of its own). Mutations that carry a `request_id` go through the cache: a
    repeat with the same id and the same request gets the first call's answer, even while the first
    call still runs; the same id with a different request gets INVALID_ARGUMENT; a failed call is not
    remembered, so its retry runs again. The cache lives in this process only. Reads with
    `min_config_position` first wait until this process has applied the config log up to there.
    Herder errors become gRPC statuses with an `ErrorInfo`; any other exception is logged and answered
    INTERNAL. `WatchStatus` subscribes before it reads the current statuses, so no change falls
    between its initial events and the stream of changes; its queue is unbounded, so a slow reader
    loses nothing.
    """

    def __init__(
        self,
        herder: Herder,
        request_ids: RequestIdCache,
        default_timeout: float,
        progress: ProgressSource | None = None,
    ) -> None:
        self.herder = herder
        self.progress = progress
        self.request_ids = request_ids
        self.default_timeout = default_timeout

    def _timeout(self, context: Context) -> float:
        return call_timeout(context, self.default_timeout)

    async def _run(self, context: Context, work: Awaitable[T]) -> T:
        return await with_deadline(work, self._timeout(context))

    async def _catch_up(self, position: int, context: Context) -> None:
        if position < 0:
            raise invalid_request("min_config_position", "must not be negative")
        if position:
            await self._run(context, self.herder.wait_for_position(position, self._timeout(context)))

    @staticmethod
    def _checked_view(view: int, default: int) -> int:
        if view not in connectors_pb2.ConnectorView.values():
            raise invalid_request("view", f"unknown ConnectorView value {view}")
        return view or default

    async def _view(self, name: str, view: int, default: int) -> connectors_pb2.Connector:
        if view == connectors_pb2.CONNECTOR_VIEW_NAMES:
            return convert.connector(None, name=name)
        info = (
            await self.herder.connector_info(name)
            if view in (connectors_pb2.CONNECTOR_VIEW_INFO, connectors_pb2.CONNECTOR_VIEW_FULL)
            else None
        )
        status = (
            self.herder.connector_status(name)
            if view in (connectors_pb2.CONNECTOR_VIEW_STATUS, connectors_pb2.CONNECTOR_VIEW_FULL)
            else None
        )
        return convert.connector(info, status)

    @mapped
    async def CreateConnector(
        self, request: connectors_pb2.CreateConnectorRequest, context: Context
    ) -> connectors_pb2.Connector:
        if request.initial_state not in convert.INITIAL_STATES:
            raise invalid_request("initial_state", f"unknown value {request.initial_state}")

        async def call() -> connectors_pb2.Connector:
            info = await self._run(
                context,
                self.herder.create_connector(
                    request.connector_id,
                    dict(request.connector.config),
                    convert.INITIAL_STATES[request.initial_state],
                    request.validate_only,
                ),
            )
            return convert.connector(info)

        return await self.request_ids.run("CreateConnector", request, call)

    @mapped
    async def GetConnector(
        self, request: connectors_pb2.GetConnectorRequest, context: Context
    ) -> connectors_pb2.Connector:
        name = connector_name(request.name)
        view = self._checked_view(request.view, connectors_pb2.CONNECTOR_VIEW_INFO)
        await self._catch_up(request.min_config_position, context)
        return await self._run(context, self._view(name, view, connectors_pb2.CONNECTOR_VIEW_INFO))

    @mapped
    async def ListConnectors(
        self, request: connectors_pb2.ListConnectorsRequest, context: Context
    ) -> connectors_pb2.ListConnectorsResponse:
        view = self._checked_view(request.view, connectors_pb2.CONNECTOR_VIEW_NAMES)
        page = page_request(request.page_size, request.page_token, "connectors", view)
        await self._catch_up(request.min_config_position, context)
        names, next_token = take(self.herder.connector_names(), str, page, "connectors", view)

        async def read_page() -> list[tuple[str, connectors_pb2.Connector]]:
            read = []
            for name in names:
                try:
                    read.append((name, await self._view(name, view, connectors_pb2.CONNECTOR_VIEW_NAMES)))
                except ServerError:
                    continue  # deleted between listing and reading
            return read

        # One deadline for the page: a task and a timer per connector cost more than the reads.
        read = await self._run(context, read_page())
        items, next_token = within_bytes(
            [item for _, item in read], [name for name, _ in read], next_token, "connectors", view
        )
        return connectors_pb2.ListConnectorsResponse(connectors=items, next_page_token=next_token)

    @mapped
    async def ReplaceConnectorConfig(
        self, request: connectors_pb2.ReplaceConnectorConfigRequest, context: Context
    ) -> connectors_pb2.ReplaceConnectorConfigResponse:
        name = connector_name(request.name)

        async def call() -> connectors_pb2.ReplaceConnectorConfigResponse:
            info, created = await self._run(
                context, self.herder.replace_connector_config(name, dict(request.config), request.etag)
            )
            return connectors_pb2.ReplaceConnectorConfigResponse(
                connector=convert.connector(info), created=created
            )

        return await self.request_ids.run("ReplaceConnectorConfig", request, call)

    @mapped
    async def PatchConnectorConfig(
        self, request: connectors_pb2.PatchConnectorConfigRequest, context: Context
    ) -> connectors_pb2.Connector:
        name = connector_name(request.name)
        overlap = set(request.set) & set(request.remove)
        if overlap:
            raise invalid_request("remove", f"keys both set and removed: {', '.join(sorted(overlap))}")

        async def call() -> connectors_pb2.Connector:
            info = await self._run(
                context,
                self.herder.patch_connector_config(
                    name, dict(request.set), list(request.remove), request.etag
                ),
            )
            return convert.connector(info)

        return await self.request_ids.run("PatchConnectorConfig", request, call)

    @mapped
    async def DeleteConnector(
        self, request: connectors_pb2.DeleteConnectorRequest, context: Context
    ) -> connectors_pb2.DeleteConnectorResponse:
        name = connector_name(request.name)

        async def call() -> connectors_pb2.DeleteConnectorResponse:
            result = await self._run(
                context,
                self.herder.delete_connector(
                    name, request.etag, delete_offsets=request.delete_offsets, wait=request.wait
                ),
            )
            return connectors_pb2.DeleteConnectorResponse(deleted_callback=convert.deleted_callback(result))

        return await self.request_ids.run("DeleteConnector", request, call)

    async def _transition(
        self, method: str, request: Any, context: Context, target: Any
    ) -> connectors_pb2.Connector:
        name = connector_name(request.name)

        async def call() -> connectors_pb2.Connector:
            return convert.connector(await self._run(context, self.herder.set_target_state(name, target)))

        return await self.request_ids.run(method, request, call)

    @mapped
    async def PauseConnector(
        self, request: connectors_pb2.PauseConnectorRequest, context: Context
    ) -> connectors_pb2.Connector:
        return await self._transition("PauseConnector", request, context, TargetState.PAUSED)

    @mapped
    async def ResumeConnector(
        self, request: connectors_pb2.ResumeConnectorRequest, context: Context
    ) -> connectors_pb2.Connector:
        return await self._transition("ResumeConnector", request, context, TargetState.STARTED)

    @mapped
    async def StopConnector(
        self, request: connectors_pb2.StopConnectorRequest, context: Context
    ) -> connectors_pb2.Connector:
        return await self._transition("StopConnector", request, context, TargetState.STOPPED)

    @mapped
    async def RestartConnector(
        self, request: connectors_pb2.RestartConnectorRequest, context: Context
    ) -> connectors_pb2.ConnectorStatus:
        name = connector_name(request.name)

        async def call() -> connectors_pb2.ConnectorStatus:
            view = await self._run(
                context, self.herder.restart_connector(name, request.include_tasks, request.only_failed)
            )
            return convert.connector_status(view)

        return await self.request_ids.run("RestartConnector", request, call)

    @mapped
    async def ListTasks(
        self, request: connectors_pb2.ListTasksRequest, context: Context
    ) -> connectors_pb2.ListTasksResponse:
        name = connector_name(request.parent, "parent")
        page = page_request(request.page_size, request.page_token, "tasks", name)
        await self._catch_up(request.min_config_position, context)
        tasks = await self._run(context, self.herder.task_configs(name))
        chosen, next_token = take(tasks, lambda t: t.task, page, "tasks", name)
        items = [connectors_pb2.Task(name=format_task(name, t.task), config=dict(t.config)) for t in chosen]
        items, next_token = within_bytes(items, [t.task for t in chosen], next_token, "tasks", name)
        return connectors_pb2.ListTasksResponse(tasks=items, next_page_token=next_token)

    @mapped
    async def GetConnectorStatus(
        self, request: connectors_pb2.GetConnectorStatusRequest, context: Context
    ) -> connectors_pb2.ConnectorStatus:
        name = connector_name(request.name)
        status = convert.connector_status(self.herder.connector_status(name))
        if self.progress is not None:
            with_progress(status.tasks, await self.progress.of(name, context))
        return status

    @mapped
    async def GetTaskStatus(
        self, request: connectors_pb2.GetTaskStatusRequest, context: Context
    ) -> connectors_pb2.TaskStatus:
        connector, task = task_name(request.name)
        status = convert.task_status(self.herder.task_status(connector, task))
        if self.progress is not None:
            with_progress([status], await self.progress.of(connector, context))
        return status

    @mapped
    async def RestartTask(
        self, request: connectors_pb2.RestartTaskRequest, context: Context
    ) -> empty_pb2.Empty:
        connector, task = task_name(request.name)

        async def call() -> empty_pb2.Empty:
            await self._run(context, self.herder.restart_task(connector, task))
            return empty_pb2.Empty()

        return await self.request_ids.run("RestartTask", request, call)

    async def WatchStatus(
        self, request: connectors_pb2.WatchStatusRequest, context: Context
    ) -> AsyncIterator[connectors_pb2.StatusEvent]:
        try:
            only = connector_name(request.name) if request.name else None
        except ServerError as exc:
            await abort(context, exc)
        # Subscribe before reading the current state so no change falls in between.
        queue = self.herder.watchers.subscribe()
        try:
            if request.include_initial:
                names = [only] if only is not None else self.herder.connector_names()
                for name in names:
                    try:
                        status = self.herder.connector_status(name)
                    except ServerError as exc:
                        if only is not None:
                            await abort(context, exc)
                        continue
                    yield connectors_pb2.StatusEvent(
                        name=format_connector(name), status=convert.instance_status(status.connector)
                    )
                    for task in status.tasks:
                        yield connectors_pb2.StatusEvent(
                            name=format_task(name, task.task), status=convert.instance_status(task.status)
                        )
            while True:
                change = await queue.get()
                if only is not None and change.connector != only:
                    continue
                name = (
                    format_connector(change.connector)
                    if change.task is None
                    else format_task(change.connector, change.task)
                )
                if change.status is None:
                    yield connectors_pb2.StatusEvent(name=name, removed=True)
                    continue
                yield connectors_pb2.StatusEvent(
                    name=name, status=convert.instance_status(InstanceStatusView.of(change.status))
                )
        except asyncio.CancelledError:
            raise
        finally:
            self.herder.watchers.unsubscribe(queue)
