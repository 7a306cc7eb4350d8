"""A small real HTTP client for the REST API tests (http.client over a socket, as curl would go)."""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Http:
    """Calls one REST listener; `token` goes out as a bearer token, `context` is the TLS client side."""

    base: str
    token: str | None = None
    context: ssl.SSLContext | None = None
    timeout: float = 60.0

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None) -> Answer:
        parts = urlsplit(self.base)
        connection: http.client.HTTPConnection
        if parts.scheme == "https":
            connection = http.client.HTTPSConnection(
                parts.hostname or "", parts.port, timeout=self.timeout, context=self.context
            )
        else:
            connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=self.timeout)
        headers = {"Accept": "application/json"}
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            text = response.read()
            parsed = json.loads(text) if text else None
            return Answer(response.status, parsed, {k.lower(): v for k, v in response.getheaders()})
        finally:
            connection.close()

    def get(self, path: str) -> Answer:
        return self.request("GET", path)

    def post(self, path: str, body: Any = None) -> Answer:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any = None) -> Answer:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any = None) -> Answer:
        return self.request("PATCH", path, body)

    def delete(self, path: str) -> Answer:
        return self.request("DELETE", path)
