"""ExecutorService.Attach: one bidi stream per executor; the coordinator does the work."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from sluiceway.api.v1 import executor_pb2, executor_pb2_grpc
from sluiceway.common.limits import MAX_EXECUTOR_ID_LENGTH
from sluiceway.errors import Reason
from sluiceway_server.api.errors import abort, invalid_request
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.errors import LimitExceededError, ServerError, UnavailableError
from sluiceway_server.herder.fields import has_hidden_characters
from sluiceway_server.security.principals import ANONYMOUS, current_principal

log = logging.getLogger(__name__)


class ExecutorServicer(executor_pb2_grpc.ExecutorServiceServicer):
    """ExecutorService on the control plane: the `Attach` stream of each executor
    (docs/ARCHITECTURE.md §6). The protocol itself is the ExecutorCoordinator's; this class moves
    messages between the stream and the coordinator.

    Owns, for each open stream, one reader task (`executor-ID`) that hands the executor's messages to
    the coordinator; the member, its tasks and its outbox belong to the coordinator.

    Threading: coroutines on the control plane's event loop. The gRPC handler sends what the
    coordinator puts in the member's outbox; the reader task handles the incoming messages one at a
    time, in the order they arrive.

    Guarantees: the first message must be a Hello with an executor id, or the stream ends with
    INVALID_ARGUMENT. The executor runs as the principal the authentication interceptor admitted
    (api/auth.py: only the `executor` role may attach), and an executor id held by one principal
    is refused to another (PERMISSION_DENIED). On a replica that does not lead the stream ends
    UNAVAILABLE, with reason NOT_LEADER and the leader's address in the ErrorInfo metadata
    `leader_address` when a leader is known (else NO_LEADER); an attach the coordinator refuses
    (for example while the control plane shuts down) ends it with the coordinator's error. However
    the stream ends (the executor closes it, the connection breaks, the coordinator closes the
    outbox, or handling a message raises, which is logged), the reader task is cancelled and the
    coordinator is told the member disconnected: it keeps the member's tasks until the executor
    attaches again or its session times out (a member the coordinator already released or replaced
    is left as it is).
    """

    def __init__(
        self,
        coordinator: Callable[[], ExecutorCoordinator | None],
        leader_address: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._coordinator = coordinator
        self._leader_address = leader_address

    def _not_leading(self) -> UnavailableError:
        """Executors attach to the leader only: tell this one where the leader is, if known."""
        address = self._leader_address()
        if address is None:
            return UnavailableError(
                "No leader is known; the control-plane cluster is electing one. Attach again shortly",
                reason=Reason.NO_LEADER,
            )
        return UnavailableError(
            f"This replica does not lead; attach to the leader at {address}",
            reason=Reason.NOT_LEADER,
            metadata={"leader_address": address},
        )

    async def Attach(
        self,
        request_iterator: AsyncIterator[executor_pb2.ExecutorMessage],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[executor_pb2.ControllerMessage]:
        try:
            first = await anext(aiter(request_iterator))
        except StopAsyncIteration:
            return
        if first.WhichOneof("kind") != "hello" or not first.hello.executor_id:
            await abort(
                context, invalid_request("hello", "the first message must be a Hello with an executor_id")
            )
        hello = first.hello
        for field, value in (
            ("executor_id", hello.executor_id),
            ("host", hello.host),
            ("spark_remote", hello.spark_remote),
            ("metrics_url", hello.metrics_url),
        ):
            # They go into logs, statuses and GetServerInfo as they are.
            if len(value) > MAX_EXECUTOR_ID_LENGTH:
                await abort(
                    context,
                    LimitExceededError(
                        "max.executor.id.length",
                        MAX_EXECUTOR_ID_LENGTH,
                        len(value),
                        f"hello.{field}",
                        "the length",
                    ),
                )
            if has_hidden_characters(value) or value != value.strip():
                await abort(
                    context,
                    invalid_request(
                        f"hello.{field}",
                        "must have no control, format or separator characters and no surrounding spaces",
                    ),
                )
        coordinator = self._coordinator()
        if coordinator is None:
            await abort(context, self._not_leading())
        caller = current_principal.get()
        try:
            member = await coordinator.attach(first.hello, "" if caller is ANONYMOUS else caller.name)
        except ServerError as exc:
            await abort(context, exc)

        async def read() -> None:
            try:
                async for message in request_iterator:
                    await coordinator.handle(member, message)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                pass
            except Exception:
                log.exception("handling messages of executor %s failed", member.id)
            finally:
                coordinator.disconnect(member, "stream closed")

        reader = asyncio.get_running_loop().create_task(read(), name=f"executor-{member.id}")
        try:
            while True:
                message = await member.outbox.get()
                if message is None:
                    return
                yield message
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            coordinator.disconnect(member, "stream ended")
