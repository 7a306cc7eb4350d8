"""The `/metrics` endpoint (Prometheus' text format) of a control plane or an executor, on the
address its `metrics.listeners` setting names: `http://HOST:PORT`, port 0 for any free port.
prometheus-client serves it from a thread of its own, so a scrape never waits for the process's
event loop or task threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from sluiceway.common.listeners import listener_url, split_listener

__all__ = ["MetricsEndpoint", "MetricsListenerError", "parse_metrics_listener"]


class MetricsListenerError(ValueError):
    """`metrics.listeners` is not `http://HOST:PORT`."""


def parse_metrics_listener(text: str) -> tuple[str, int] | None:
    """(host, port) of the first listener in `text`; None when it is empty (metrics are off)."""
    first = next((entry.strip() for entry in text.split(",") if entry.strip()), "")
    if not first:
        return None
    scheme, host, port = split_listener(first)
    if scheme and scheme != "http":
        raise MetricsListenerError(f"metrics are served over http only, got {first!r}")
    if not scheme or not port.isdigit() or int(port) > 65535:
        raise MetricsListenerError(f"expected http://HOST:PORT (port 0: any free port), got {first!r}")
    return host, int(port)


@dataclass
class MetricsEndpoint:
    """A running `/metrics` server; `url` holds the port it got."""

    server: WSGIServer
    thread: threading.Thread
    host: str

    @classmethod
    def start(cls, host: str, port: int, registry: CollectorRegistry) -> MetricsEndpoint:
        server, thread = start_http_server(port, addr=host, registry=registry)
        return cls(server, thread, host)

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    @property
    def url(self) -> str:
        return f"{listener_url('http', self.host, self.port)}/metrics"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
