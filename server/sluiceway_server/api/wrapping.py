"""Wrapping a gRPC method handler of any of the four kinds with a coroutine that runs before it and
a function called when it ends, as the server interceptors (api/auth.py, api/metrics.py) need."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc

__all__ = ["call_outcome", "wrap_handler"]

if TYPE_CHECKING:  # generic only in the stubs
    MethodHandler: TypeAlias = grpc.RpcMethodHandler[Any, Any]
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


def wrap_handler(
    handler: MethodHandler, before: Callable[[Any, Context], Awaitable[None]], after: Callable[..., None]
) -> MethodHandler:
    """`handler` with `before(request, context)` awaited first and `after(request, context, error)`
    called when it ends (error None when it returned or its stream ended). Streaming requests pass
    None as the request."""
    if handler.unary_unary is not None:
        inner_uu: Any = handler.unary_unary

        async def unary_unary(request: Any, context: Context) -> Any:
            await before(request, context)
            try:
                response = await inner_uu(request, context)
            except BaseException as exc:
                after(request, context, exc)
                raise
            after(request, context, None)
            return response

        return grpc.unary_unary_rpc_method_handler(
            unary_unary, handler.request_deserializer, handler.response_serializer
        )
    if handler.unary_stream is not None:
        inner_us: Any = handler.unary_stream

        async def unary_stream(request: Any, context: Context) -> AsyncIterator[Any]:
            await before(request, context)
            try:
                async for item in inner_us(request, context):
                    yield item
            except BaseException as exc:
                after(request, context, exc)
                raise
            after(request, context, None)

        return grpc.unary_stream_rpc_method_handler(
            unary_stream, handler.request_deserializer, handler.response_serializer
        )
    if handler.stream_stream is not None:
        inner_ss: Any = handler.stream_stream

        async def stream_stream(requests: Any, context: Context) -> AsyncIterator[Any]:
            await before(None, context)
            try:
                async for item in inner_ss(requests, context):
                    yield item
            except BaseException as exc:
                after(None, context, exc)
                raise
            after(None, context, None)

        return grpc.stream_stream_rpc_method_handler(
            stream_stream, handler.request_deserializer, handler.response_serializer
        )
    inner_su: Any = handler.stream_unary
    assert inner_su is not None

    async def stream_unary(requests: Any, context: Context) -> Any:
        await before(None, context)
        try:
            response = await inner_su(requests, context)
        except BaseException as exc:
            after(None, context, exc)
            raise
        after(None, context, None)
        return response

    return grpc.stream_unary_rpc_method_handler(
        stream_unary, handler.request_deserializer, handler.response_serializer
    )


def call_outcome(context: Context, error: BaseException | None) -> str:
    """How a call ended, as a gRPC code name, for `after` callbacks: the code the handler set, else
    OK when it returned, CANCELLED when it was cancelled, UNKNOWN when it raised."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if error is None:
        return "OK"
    return "CANCELLED" if isinstance(error, asyncio.CancelledError) else "UNKNOWN"
