"""Pages of List calls (AIP-158): page sizes and opaque page tokens.

A page holds at most `page_size` items (`take`); ListConnectors and ListTasks also end a page
before PAGE_BYTES bytes (`within_bytes`), whichever comes first. ListPlugins pages are bounded by
count alone: a plugin's entry is small. A
token records where the previous page ended and a digest of the request's other fields, so a
token is only good for a request that asks for the same thing again (another parent, view or
filter with an old token is INVALID_ARGUMENT, not a silently wrong page).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message

from sluiceway_server.api.errors import invalid_request

T = TypeVar("T")
K = TypeVar("K", str, int)
M = TypeVar("M", bound=Message)

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# A page also ends before it would pass this many bytes, well within the 4 MiB that gRPC clients
# accept by default: connectors and task configs of up to 256 KiB each add up fast.
PAGE_BYTES = 3 * 1024 * 1024


@dataclass(frozen=True)
class Page:
    """Where a page starts (after `after`, exclusive; None for the first page) and how long it is."""

    after: str | int | None
    size: int


def page_request(page_size: int, page_token: str, *query: object) -> Page:
    """Checks `page_size` and decodes `page_token` for a request whose other fields are `query`."""
    if page_size < 0:
        raise invalid_request("page_size", "must not be negative")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    if not page_token:
        return Page(None, size)
    try:
        data = json.loads(base64.urlsafe_b64decode(page_token.encode()).decode())
        after, digest = data["after"], data["query"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise invalid_request("page_token", "not a page token this API returned") from None
    if digest != _digest(query) or not isinstance(after, str | int) or isinstance(after, bool):
        raise invalid_request("page_token", "the token belongs to a request for other results")
    return Page(after, size)


def take(items: Sequence[T], key: Callable[[T], K], page: Page, *query: object) -> tuple[list[T], str]:
    """The page of `items` (sorted by `key`) and the token for the next one ("" at the end)."""
    remaining = [item for item in items if page.after is None or key(item) > page.after]  # type: ignore[operator]
    chosen, rest = remaining[: page.size], remaining[page.size :]
    if not rest:
        return chosen, ""
    return chosen, token_after(key(chosen[-1]), *query)


def token_after(last: str | int, *query: object) -> str:
    """The token of the page that starts after the item whose key is `last`."""
    token = json.dumps({"after": last, "query": _digest(query)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(token.encode()).decode()


def within_bytes(
    items: Sequence[M], keys: Sequence[K], next_token: str, *query: object, budget: int = PAGE_BYTES
) -> tuple[list[M], str]:
    """A page of response `items` (their keys in `keys`) cut to `budget` bytes, and its next-page
    token: the one it had if nothing was cut. At least one item stays, so a page always moves on
    (every single item is far smaller than a response may be)."""
    total = 0
    for count, item in enumerate(items):
        # Each item is a length-delimited field of the response: its tag and length cost a few bytes.
        total += item.ByteSize() + 8
        if total > budget and count > 0:
            return list(items[:count]), token_after(keys[count - 1], *query)
    return list(items), next_token


def _digest(query: Sequence[object]) -> str:
    return hashlib.sha256(json.dumps([str(part) for part in query]).encode()).hexdigest()[:16]
