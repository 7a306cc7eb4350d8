"""Listener addresses as the worker settings write them (`rest.listeners`, `metrics.listeners`):
`SCHEME://HOST:PORT`, an IPv6 host in brackets, an empty host meaning every interface."""

from __future__ import annotations

__all__ = ["listener_url", "split_listener"]


def split_listener(entry: str) -> tuple[str, str, str]:
    """The lower-case scheme ("" without `://`), the host (IPv6 without its brackets, `0.0.0.0`
    when empty) and the port as written ("" without a colon). The callers check the parts."""
    scheme, sep, address = entry.strip().partition("://")
    if not sep:
        return "", "0.0.0.0", ""
    host, colon, port = address.rpartition(":")
    return scheme.lower(), host.strip("[]") or "0.0.0.0", port if colon else ""


def listener_url(scheme: str, host: str, port: int) -> str:
    """`scheme://host:port`, an IPv6 host in brackets."""
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"
