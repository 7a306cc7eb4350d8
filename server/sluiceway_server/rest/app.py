"""The HTTP side of the REST API: the aiohttp application with the routes of rest/routes.py, Kafka
Connect's error bodies for every failure (unknown paths and methods included), what the caller
presented (Authorization header, client certificate), and the listeners of `rest.listeners`."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Middleware

from sluiceway.errors import SluicewayError
from sluiceway_server.config import RestListener, WorkerConfig
from sluiceway_server.metrics import ControlPlaneMetrics
from sluiceway_server.rest.errors import RestError, error_response
from sluiceway_server.rest.gateway import Caller, GrpcGateway
from sluiceway_server.rest.handlers import Exchange, HealthSource
from sluiceway_server.rest.kafka_json import BodyError
from sluiceway_server.rest.openapi import openapi_document
from sluiceway_server.rest.routes import ROUTES, Route
from sluiceway_server.security.certificates import peer_certificate_identity
from sluiceway_server.security.setup import is_loopback_host

__all__ = ["RestServer", "build_app"]

log = logging.getLogger(__name__)

_GATEWAY: Final = web.AppKey("gateway", GrpcGateway)
_HEALTH: Final = web.AppKey("health", object)


def _tls_context(config: WorkerConfig) -> ssl.SSLContext:
    """The HTTPS listeners' TLS: the replica's own certificate, and client certificates checked
    against tls.client.ca.file when tls.client.auth is required, as on the gRPC listener."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(config.get("tls.certificate.file").strip(), config.get("tls.key.file").strip())
    if config.get("tls.client.auth").strip().lower() == "required":
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(config.get("tls.client.ca.file").strip())
    return context


def _caller(request: web.Request) -> Caller:
    peer = request.remote or ""
    subject: str | None = None
    uris: tuple[str, ...] = ()
    transport = request.transport
    certificate = transport.get_extra_info("peercert") if transport is not None else None
    if certificate:
        subject, found = peer_certificate_identity(certificate)
        uris = tuple(found)
    return Caller(
        peer=f"http:{peer}",
        authorization=request.headers.get("Authorization"),
        cert_subject=subject,
        cert_uris=uris,
    )


def _handler_for(
    route: Route, openapi: Callable[[], dict[str, Any]]
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        health: Any = request.app[_HEALTH]
        exchange = Exchange(request, request.app[_GATEWAY], _caller(request), health, openapi)
        return await route.handler(exchange)

    return handle


@web.middleware
async def _kafka_errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every failure as Kafka Connect's error body."""
    try:
        return await handler(request)
    except (SluicewayError, RestError) as failure:
        return error_response(failure)
    except BodyError as exc:
        return error_response(RestError(400, str(exc)))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(RestError(exc.status, f"HTTP {exc.status} {exc.reason}"))
    except Exception:
        log.exception("REST %s %s failed", request.method, request.path)
        return error_response(RestError(500, "The control plane failed to answer; its log has the details"))


def _measured(metrics: ControlPlaneMetrics) -> Middleware:
    """Counts and times each request by its route's template (`/connectors/{connector}`), so the
    series do not grow with connector names; requests no route matched count as `unmatched`."""

    @web.middleware
    async def measure(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        began = time.monotonic()
        response = await handler(request)
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else "unmatched"
        metrics.rest_handled.labels(request.method, route, str(response.status)).inc()
        metrics.rest_seconds.labels(request.method, route).observe(time.monotonic() - began)
        return response

    return measure


def build_app(
    gateway: GrpcGateway, health: HealthSource | None, metrics: ControlPlaneMetrics | None = None
) -> web.Application:
    middlewares: list[Middleware] = [_kafka_errors]
    if metrics is not None:
        middlewares.insert(0, _measured(metrics))  # outermost: it sees the status of every answer
    app = web.Application(middlewares=middlewares, client_max_size=8 * 1024 * 1024)
    app[_GATEWAY] = gateway
    app[_HEALTH] = health
    for route in ROUTES:
        app.router.add_route(route.method, route.path, _handler_for(route, openapi_document))
    return app


class RestServer:
    """The REST listeners of one replica, on its event loop."""

    def __init__(
        self,
        config: WorkerConfig,
        gateway: GrpcGateway,
        health: HealthSource | None,
        metrics: ControlPlaneMetrics | None = None,
    ) -> None:
        self._config = config
        self._gateway = gateway
        self._runner = web.AppRunner(build_app(gateway, health, metrics), access_log=None)
        self.urls: list[str] = []

    async def start(self, listeners: Sequence[RestListener]) -> None:
        await self._runner.setup()
        for listener in listeners:
            context = _tls_context(self._config) if listener.scheme == "https" else None
            site = web.TCPSite(
                self._runner, listener.host, listener.port, ssl_context=context, reuse_address=True
            )
            await site.start()
            self.urls.append(listener.url)
            if listener.scheme == "http" and not is_loopback_host(listener.host):
                log.warning(
                    "The REST API listens on %s without TLS: bearer tokens and connector configs cross "
                    "the network in clear. Use an https:// listener.",
                    listener.url,
                )
        log.info("REST API serving", extra={"rest_listeners": ",".join(self.urls)})

    async def stop(self) -> None:
        await self._runner.cleanup()
        await self._gateway.close()
