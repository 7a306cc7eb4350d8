"""The blocking client is generated from the asyncio one by client/generate_sync.py: the checked-in
_sync.py must be exactly what the script makes of _aio.py, the script must refuse what it cannot
translate, and the two clients must offer the same methods with the same parameters."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sluiceway.client import AsyncSluicewayClient, SluicewayClient
from tests.unit.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "client" / "generate_sync.py"
AIO_SOURCE = ROOT / "client" / "sluiceway" / "client" / "_aio.py"

# The asyncio protocol methods and the blocking ones they stand for.
PROTOCOL_NAMES = {"__aenter__": "__enter__", "__aexit__": "__exit__"}
# Methods whose parameters differ on purpose: grpc.Channel.close() has no grace period.
DIFFERENT_SIGNATURES = frozenset({"close"})
# Methods whose docstrings differ on purpose, to speak of blocking iterators or none at all.
DIFFERENT_DOCSTRINGS = frozenset({"close", "list_connectors", "watch_status"})


def _generator() -> ModuleType:
    return load_script(SCRIPT)


def _surface(cls: type) -> dict[str, object]:
    """The public methods and properties of a client class, plus its constructor and context
    manager methods, by their blocking names."""
    return {
        PROTOCOL_NAMES.get(name, name): member
        for name, member in vars(cls).items()
        if not name.startswith("_")
        or name == "__init__"
        or name in {*PROTOCOL_NAMES, *PROTOCOL_NAMES.values()}
    }


def _signature(member: object) -> str:
    function = member.fget if isinstance(member, property) else member
    assert callable(function)
    # Annotations are strings here (postponed evaluation); only the iterator types differ.
    return str(inspect.signature(function)).replace("AsyncIterator[", "Iterator[")


def test_sync_client_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unknown_asynchronous_code_stops_generation() -> None:
    generator = _generator()
    source = AIO_SOURCE.read_text(encoding="utf-8")
    added = source + "\n    async def ping(self) -> None:\n        await self._retrier.ping_async()\n"
    with pytest.raises(generator.GenerationError, match="ping_async"):
        generator.transform(added)
    # A docstring the blocking client words differently, edited only on the asyncio side.
    edited = source.replace("`aclose()` the iterator to cancel it", "`aclose()` it to cancel the stream")
    assert edited != source
    with pytest.raises(generator.GenerationError, match="expected exactly one match"):
        generator.transform(edited)


def test_the_clients_offer_the_same_calls() -> None:
    blocking, asynchronous = _surface(SluicewayClient), _surface(AsyncSluicewayClient)
    assert sorted(blocking) == sorted(asynchronous)
    assert {"__init__", "__enter__", "__exit__", "close", "list_connectors", "watch_status"} <= set(blocking)
    for name, member in blocking.items():
        counterpart = asynchronous[name]
        if name not in DIFFERENT_SIGNATURES:
            assert _signature(member) == _signature(counterpart), name
        if name not in DIFFERENT_DOCSTRINGS:
            assert inspect.getdoc(member) == inspect.getdoc(counterpart), name
        assert not inspect.iscoroutinefunction(member), name
        # Every asyncio method is a coroutine, except those handing back an async iterator.
        returns_iterator = "AsyncIterator[" in str(getattr(counterpart, "__annotations__", {}).get("return"))
        is_method = inspect.isfunction(counterpart) and name != "__init__"
        assert inspect.iscoroutinefunction(counterpart) == (is_method and not returns_iterator), name
