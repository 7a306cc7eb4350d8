"""A span for every mutation this replica answers or forwards (sluiceway.common.tracing), placed
just inside authentication: on a follower the span covers the forwarding, whose call to the leader
carries the span's trace context (api/forwarding.py), so the leader's span of the same mutation is
its child and one trace shows both replicas. Reads are not traced: they are many and answered
where they arrive. While tracing is off this interceptor hands every handler on untouched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

from sluiceway.common import tracing
from sluiceway_server.api.errors import request_log_fields
from sluiceway_server.api.forwarding import FORWARDED_BY, MUTATION_REQUESTS
from sluiceway_server.api.wrapping import call_outcome, wrap_handler
from sluiceway_server.rpc_methods import MUTATIONS

__all__ = ["TracingInterceptor", "mutation_attributes"]

if TYPE_CHECKING:  # generic only in the stubs
    from opentelemetry.trace import Span

    MethodHandler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


def mutation_attributes(path: str, request: Any) -> dict[str, str | int | float | bool]:
    """The span attributes of a call to ``path``: the RPC after OpenTelemetry's conventions and the
    connector and task it is about. A call being forwarded arrives as bytes and is read here."""
    service, _, method = path.lstrip("/").rpartition("/")
    attributes: dict[str, str | int | float | bool] = {
        "rpc.system": "grpc",
        "rpc.service": service,
        "rpc.method": method,
    }
    if isinstance(request, bytes):
        try:
            request = MUTATION_REQUESTS[path].FromString(request)
        except Exception:  # the leader reports a request it cannot read; the span just lacks names
            return attributes
    for key, value in request_log_fields(request).items():
        name = tracing.ATTRIBUTE_CONNECTOR if key == "connector" else tracing.ATTRIBUTE_TASK
        attributes[name] = value if isinstance(value, (str, int)) else str(value)
    return attributes


class TracingInterceptor(grpc.aio.ServerInterceptor):
    """``replica``, this replica's member id, is recorded on each span; the server sets it once it
    knows its own address, after the interceptors had to be given."""

    def __init__(self) -> None:
        self.replica = ""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        handler = await continuation(details)
        path = str(details.method)
        if handler is None or path not in MUTATIONS or not tracing.tracing_on():
            return handler
        from opentelemetry.trace import SpanKind

        metadata = tuple(details.invocation_metadata or ())
        forwarded_by = next((str(v) for k, v in metadata if k == FORWARDED_BY), None)
        # Set when the call starts, read when it ends: intercept_service runs once per call.
        opened: list[tuple[Span, Any]] = []

        async def start(request: Any, context: Context) -> None:
            attributes = mutation_attributes(path, request)
            attributes["sluiceway.replica"] = self.replica
            if forwarded_by is not None:
                attributes["sluiceway.forwarded_by"] = forwarded_by
            span = tracing.start_span(
                path.lstrip("/"), kind=SpanKind.SERVER, attributes=attributes, metadata=metadata
            )
            if span is not None:
                scope = tracing.current(span)
                scope.__enter__()
                opened.append((span, scope))

        def end(request: Any, context: Context, error: BaseException | None) -> None:
            if not opened:
                return
            span, scope = opened.pop()
            scope.__exit__(None, None, None)
            code = call_outcome(context, error)
            span.set_attribute("rpc.grpc.status_code", grpc.StatusCode[code].value[0])
            tracing.end_span(span, None if code == "OK" else f"{code}: {context.details() or ''}".strip())

        return wrap_handler(handler, start, end)
