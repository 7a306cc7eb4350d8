"""An OTLP/gRPC trace collector of the tests' own: it keeps every span it is sent, so a test can
see what Sluiceway's processes traced, over the same wire protocol a real collector speaks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from sluiceway_server.embedded import free_port


def _plain(value: common_pb2.AnyValue) -> object:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector got it, with its process's resource attributes."""

    service: str
    instance: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, object]
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    start_ns: int
    end_ns: int


class _Collector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.lock = threading.Lock()

    def Export(  # noqa: N802 - the generated servicer's name
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _plain(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name", "")),
                            instance=str(resource.get("service.instance.id", "")),
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            attributes={a.key: _plain(a.value) for a in span.attributes},
                            status_code=span.status.code,
                            status_message=span.status.message,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        with self.lock:
            self.spans.extend(received)
        return trace_service_pb2.ExportTraceServiceResponse()


@dataclass
class OtlpReceiver:
    endpoint: str
    _collector: _Collector

    def spans(self) -> list[ReceivedSpan]:
        with self._collector.lock:
            return list(self._collector.spans)

    def wait_for(
        self, matching: Callable[[ReceivedSpan], bool], what: str, timeout: float = 60.0
    ) -> list[ReceivedSpan]:
        """The spans that match, once there is at least one (AssertionError after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [span for span in self.spans() if matching(span)]
            if found:
                return found
            if time.monotonic() > deadline:
                names = sorted({(s.service, s.name) for s in self.spans()})
                raise AssertionError(f"no span of {what} within {timeout}s; received: {names}")
            time.sleep(0.2)


@contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A collector on a free loopback port, at ``http://127.0.0.1:PORT`` (plain gRPC)."""
    collector = _Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)  # type: ignore[no-untyped-call]
    port = free_port()
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield OtlpReceiver(f"http://127.0.0.1:{port}", collector)
    finally:
        server.stop(grace=None)
