from __future__ import annotations

import asyncio

import pytest

from sluiceway.api.v1 import connectors_pb2
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.errors import InvalidArgumentError, UnavailableError


def _request(request_id: str, name: str = "connectors/a") -> connectors_pb2.PauseConnectorRequest:
    return connectors_pb2.PauseConnectorRequest(name=name, request_id=request_id)


def test_same_id_same_request_runs_once() -> None:
    async def main() -> None:
        cache = RequestIdCache()
        calls = 0

        async def call() -> connectors_pb2.Connector:
            nonlocal calls
            calls += 1
            await asyncio.sleep(0.01)
            return connectors_pb2.Connector(name=f"connectors/a{calls}")

        first, second = await asyncio.gather(
            cache.run("Pause", _request("r1"), call), cache.run("Pause", _request("r1"), call)
        )
        third = await cache.run("Pause", _request("r1"), call)
        assert first == second == third and calls == 1
        # no request id: always runs
        await cache.run("Pause", _request(""), call)
        await cache.run("Pause", _request(""), call)
        assert calls == 3

    asyncio.run(main())


def test_reused_id_for_other_request_is_rejected() -> None:
    async def main() -> None:
        cache = RequestIdCache()

        async def call() -> connectors_pb2.Connector:
            return connectors_pb2.Connector()

        await cache.run("Pause", _request("r1"), call)
        with pytest.raises(InvalidArgumentError) as info:
            await cache.run("Pause", _request("r1", name="connectors/b"), call)
        assert info.value.reason == "REQUEST_ID_REUSED"

    asyncio.run(main())


def test_failures_are_not_remembered() -> None:
    async def main() -> None:
        cache = RequestIdCache()
        attempts = 0

        async def call() -> connectors_pb2.Connector:
            nonlocal attempts
            attempts += 1
            if attempts == 1:
                raise UnavailableError("try again")
            return connectors_pb2.Connector(name="connectors/ok")

        with pytest.raises(UnavailableError):
            await cache.run("Pause", _request("r1"), call)
        assert (await cache.run("Pause", _request("r1"), call)).name == "connectors/ok"

    asyncio.run(main())


def test_capacity_evicts_oldest() -> None:
    async def main() -> None:
        cache = RequestIdCache(capacity=2)
        count = 0

        async def call() -> connectors_pb2.Connector:
            nonlocal count
            count += 1
            return connectors_pb2.Connector()

        for rid in ("a", "b", "c", "a"):
            await cache.run("Pause", _request(rid), call)
        assert count == 4

    asyncio.run(main())


class _Recorded:
    """Answers kept as the cluster topic would keep them, shared by successive leaders."""

    def __init__(self, fail: bool = False) -> None:
        self.entries: dict[tuple[str, str], tuple[str, bytes]] = {}
        self.fail = fail

    def lookup(self, method: str, request_id: str, max_age: float) -> tuple[str, bytes] | None:
        return self.entries.get((method, request_id))

    async def record(self, method: str, request_id: str, fingerprint: str, response: bytes) -> None:
        if self.fail:
            raise RuntimeError("the cluster topic is away")
        self.entries[(method, request_id)] = (fingerprint, response)


TYPES = {"PauseConnector": connectors_pb2.Connector}


def test_a_later_leader_answers_a_retry_as_the_first_did() -> None:
    async def main() -> None:
        recorded = _Recorded()
        calls = 0

        async def call() -> connectors_pb2.Connector:
            nonlocal calls
            calls += 1
            return connectors_pb2.Connector(name=f"connectors/a{calls}")

        first = await RequestIdCache(answers=recorded, response_types=TYPES).run(
            "PauseConnector", _request("r1"), call
        )
        # A new leader starts with an empty memory but finds the recorded answer.
        later = RequestIdCache(answers=recorded, response_types=TYPES)
        assert await later.run("PauseConnector", _request("r1"), call) == first
        assert calls == 1
        with pytest.raises(InvalidArgumentError) as reused:
            await later.run("PauseConnector", _request("r1", name="connectors/b"), call)
        assert reused.value.reason == "REQUEST_ID_REUSED"
        assert calls == 1

    asyncio.run(main())


def test_an_answer_that_cannot_be_recorded_is_still_given() -> None:
    async def main() -> None:
        async def call() -> connectors_pb2.Connector:
            return connectors_pb2.Connector(name="connectors/a")

        cache = RequestIdCache(answers=_Recorded(fail=True), response_types=TYPES)
        assert (await cache.run("PauseConnector", _request("r1"), call)).name == "connectors/a"

    asyncio.run(main())
