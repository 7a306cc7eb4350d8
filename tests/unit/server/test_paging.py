"""Page sizes and opaque page tokens of the List calls (AIP-158)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway_server.api.paging import MAX_PAGE_SIZE, page_request, take, within_bytes
from sluiceway_server.errors import InvalidArgumentError


def _all_pages(items: list[str], size: int, *query: object) -> list[list[str]]:
    pages, token = [], ""
    while True:
        chosen, token = take(items, str, page_request(size, token, *query), *query)
        pages.append(chosen)
        if not token:
            return pages


@given(st.lists(st.text(min_size=1), unique=True), st.integers(min_value=1, max_value=7))
def test_pages_cover_every_item_once_in_order(items: list[str], size: int) -> None:
    ordered = sorted(items)
    pages = _all_pages(ordered, size, "connectors", 1)
    assert [item for page in pages for item in page] == ordered
    assert all(len(page) <= size for page in pages)


def test_integer_keys_and_the_default_and_maximum_sizes() -> None:
    tasks = list(range(250))
    first, token = take(tasks, lambda t: t, page_request(0, "", "tasks", "c"), "tasks", "c")
    assert first == list(range(100))
    second, token = take(tasks, lambda t: t, page_request(0, token, "tasks", "c"), "tasks", "c")
    assert second == list(range(100, 200))
    assert page_request(10**6, "", "tasks", "c").size == MAX_PAGE_SIZE


def test_a_token_is_good_only_for_the_same_request() -> None:
    _, token = take(["a", "b", "c"], str, page_request(1, "", "tasks", "one"), "tasks", "one")
    assert token
    with pytest.raises(InvalidArgumentError) as refused:
        page_request(1, token, "tasks", "other")
    assert [v.field for v in refused.value.violations] == ["page_token"]


@pytest.mark.parametrize("token", ["not base64!", "e30=", "bm90IGpzb24=", "WzEsMl0="])
def test_tokens_we_did_not_issue_are_refused(token: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        page_request(1, token, "connectors", 1)
    assert refused.value.reason == "INVALID_REQUEST"
    assert [v.field for v in refused.value.violations] == ["page_token"]


def test_negative_page_size_is_refused() -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        page_request(-1, "", "connectors", 1)
    assert [v.field for v in refused.value.violations] == ["page_size"]


def test_pages_are_cut_in_bytes_and_the_token_resumes_after_the_last_kept_item() -> None:
    from sluiceway.api.v1 import connectors_pb2

    names = [f"c{i}" for i in range(10)]
    items = [connectors_pb2.Connector(name=n, config={"blob": "x" * 1000}) for n in names]
    kept, token = within_bytes(items, names, "", "connectors", 1, budget=3500)
    assert [c.name for c in kept] == names[:3]
    assert page_request(10, token, "connectors", 1).after == "c2"
    # Nothing cut: the token it had stays; one item over the budget still makes a page.
    assert within_bytes(items[:2], names[:2], "t", "connectors", 1) == (items[:2], "t")
    assert within_bytes(items, names, "", "connectors", 1, budget=10)[0] == items[:1]
