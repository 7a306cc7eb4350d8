"""Counts and times every gRPC call this replica answers: the outermost server interceptor, so
calls refused by authentication or answered by forwarding are counted too."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from sluiceway_server.api.wrapping import call_outcome, wrap_handler
from sluiceway_server.metrics import ControlPlaneMetrics

__all__ = ["MetricsInterceptor"]

if TYPE_CHECKING:  # generic only in the stubs
    MethodHandler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: ControlPlaneMetrics) -> None:
        self._metrics = metrics

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return handler
        service, _, method = str(details.method).lstrip("/").rpartition("/")
        handled = self._metrics.grpc_handled
        seconds = self._metrics.grpc_seconds.labels(service, method)
        # intercept_service runs once per call, so this is the call's own start time.
        began = [time.monotonic()]

        async def start(request: Any, context: Context) -> None:
            began[0] = time.monotonic()

        def end(request: Any, context: Context, error: BaseException | None) -> None:
            seconds.observe(time.monotonic() - began[0])
            handled.labels(service, method, call_outcome(context, error)).inc()

        return wrap_handler(handler, start, end)
