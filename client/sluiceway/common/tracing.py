"""Traces of the work Sluiceway does (OpenTelemetry), sent to an OTLP/gRPC collector.

Tracing is off until a process calls :func:`start_tracing` with an endpoint (the worker key
``tracing.otlp.endpoint``, else OpenTelemetry's own ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_ENDPOINT``). While it is off every helper here returns at once and the
OpenTelemetry SDK is not even imported, so a process that does not trace pays nothing for it.

The control plane makes a span of each mutation it answers or forwards (``api/tracing.py``); the
trace context travels to the leader in the W3C ``traceparent`` metadata, so a forwarded call is one
trace over both replicas. Executors make a span of each batch that did work (``batch_traces.py``).
Attribute names follow OpenTelemetry's conventions where one exists (``rpc.*``), ours otherwise
(``sluiceway.*``)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, SpanKind, Tracer

__all__ = [
    "ATTRIBUTE_BATCH",
    "ATTRIBUTE_CONNECTOR",
    "ATTRIBUTE_TASK",
    "TracingEndpointError",
    "current",
    "end_span",
    "inject_context",
    "now_ns",
    "otlp_endpoint",
    "start_span",
    "start_tracing",
    "stop_tracing",
    "tracing_on",
    "validate_endpoint",
]

log = logging.getLogger(__name__)

ATTRIBUTE_CONNECTOR: Final = "sluiceway.connector"
ATTRIBUTE_TASK: Final = "sluiceway.task"
ATTRIBUTE_BATCH: Final = "sluiceway.batch.id"
# The metadata keys of W3C trace context, which carry a trace from one process to the next.
TRACE_CONTEXT_KEYS: Final = frozenset({"traceparent", "tracestate"})
# How long a stopping process waits for its last spans to reach the collector.
_FLUSH_MILLIS: Final = 3000

_ENVIRONMENT_KEYS: Final = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

_provider: TracerProvider | None = None
_tracer: Tracer | None = None


class TracingEndpointError(ValueError):
    """The OTLP endpoint is not an http:// or https:// address with a host."""


def validate_endpoint(endpoint: str) -> str:
    """``endpoint`` trimmed, when it names a collector: ``http://host:port`` (plain) or
    ``https://host:port`` (TLS with the system's roots). Empty stays empty (tracing off)."""
    endpoint = endpoint.strip()
    if not endpoint:
        return ""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise TracingEndpointError(
            f"expected http://host:port or https://host:port of an OTLP/gRPC collector, got {endpoint!r}"
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError:
        raise TracingEndpointError(f"the port of {endpoint!r} is not a number") from None
    return endpoint


def otlp_endpoint(configured: str, environ: Mapping[str, str]) -> str:
    """The collector to send spans to: the worker key's value, else OpenTelemetry's variables."""
    if configured.strip():
        return validate_endpoint(configured)
    for key in _ENVIRONMENT_KEYS:
        if environ.get(key, "").strip():
            try:
                return validate_endpoint(environ[key])
            except TracingEndpointError as exc:
                raise TracingEndpointError(f"{key}: {exc}") from None
    return ""


def start_tracing(endpoint: str, *, service: str, instance: str, version: str) -> None:
    """Sends this process's spans to ``endpoint`` from now on (a batch of spans at a time, from a
    thread of the SDK's own, so a slow or absent collector never holds up the work traced).
    ``service``, ``instance`` and ``version`` name the process in the collector (``service.name``,
    ``service.instance.id``, ``service.version``). Calling it again replaces the earlier exporter."""
    global _provider, _tracer
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    endpoint = validate_endpoint(endpoint)
    if not endpoint:
        raise TracingEndpointError("an OTLP endpoint is needed to trace")
    stop_tracing()
    resource = Resource.create(
        {"service.name": service, "service.instance.id": instance, "service.version": version}
    )
    provider = TracerProvider(resource=resource)
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=urlsplit(endpoint).scheme == "http")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _provider, _tracer = provider, provider.get_tracer("sluiceway", version)
    log.info("tracing: spans go to %s as %s %s", endpoint, service, instance)


def stop_tracing() -> None:
    """Sends the spans still waiting (for a few seconds at most) and turns tracing off."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, None
    if provider is None:
        return
    try:
        provider.force_flush(_FLUSH_MILLIS)
        provider.shutdown()
    except Exception:  # a collector gone away must not fail the process's stop
        log.warning("tracing: the last spans could not be sent", exc_info=True)


def tracing_on() -> bool:
    return _tracer is not None


def _parent(metadata: Iterable[tuple[str, Any]] | None) -> Context | None:
    """The trace context a caller sent in ``traceparent`` (None when it sent none)."""
    carrier = {key: str(value) for key, value in metadata or () if key in TRACE_CONTEXT_KEYS}
    if not carrier:
        return None
    from opentelemetry.propagate import extract

    return extract(carrier)


def start_span(
    name: str,
    *,
    kind: SpanKind | None = None,
    attributes: Mapping[str, str | int | float | bool] | None = None,
    metadata: Iterable[tuple[str, Any]] | None = None,
    start_ns: int | None = None,
) -> Span | None:
    """A started span (None while tracing is off), the child of the trace context in ``metadata``
    when a caller sent one. The caller ends it; :func:`current` makes it the parent of what follows."""
    tracer = _tracer
    if tracer is None:
        return None
    from opentelemetry.trace import SpanKind

    return tracer.start_span(
        name,
        context=_parent(metadata),
        kind=SpanKind.INTERNAL if kind is None else kind,
        attributes=dict(attributes or {}),
        start_time=start_ns,
    )


def current(span: Span | None) -> AbstractContextManager[object]:
    """Makes ``span`` the current one (the parent of spans started and contexts injected inside)."""
    if span is None:
        return contextlib.nullcontext()
    from opentelemetry.trace import use_span

    return use_span(span, end_on_exit=False)


def inject_context() -> tuple[tuple[str, str], ...]:
    """The current span's trace context as gRPC metadata, for the next process to continue the trace
    (empty while tracing is off or no span is current)."""
    if _tracer is None:
        return ()
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return tuple(carrier.items())


def end_span(span: Span, error: str | None = None, end_ns: int | None = None) -> None:
    """Ends ``span``; with ``error`` it is marked failed with that description."""
    from opentelemetry.trace import Status, StatusCode

    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end(end_time=end_ns)


def now_ns() -> int:
    """The wall clock in nanoseconds, as span times are given."""
    return time.time_ns()
