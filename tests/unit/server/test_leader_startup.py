"""A new leader's start-up on in-memory stores: every connector of the config topic is started,
at most `STARTUP_CONCURRENCY` reconciliations at a time, so the API answers while they run."""

from __future__ import annotations

import asyncio
import time

from sluiceway_server.herder.reconciler import STARTUP_CONCURRENCY
from sluiceway_server.model import State, TargetState
from tests.unit.server.test_herder_memory import Bed, settle


def test_schedule_all_reconciles_every_name_once_a_bounded_number_at_a_time() -> None:
    names = [f"c{n}" for n in range(STARTUP_CONCURRENCY * 3 + 5)]

    async def scenario() -> None:
        bed = Bed()
        reconciler = bed.herder._new_reconciler()
        done: list[str] = []
        running = most = 0

        async def reconcile(name: str) -> None:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.002)  # a plugin call's or a status write's wait
            running -= 1
            done.append(name)

        reconciler._reconcile_locked = reconcile  # type: ignore[method-assign]
        await reconciler.schedule_all(names)
        assert sorted(done) == sorted(names)
        assert most == STARTUP_CONCURRENCY
        await reconciler.schedule_all(names[:3])
        assert most == STARTUP_CONCURRENCY and len(done) == len(names) + 3
        await reconciler.schedule_all([])

    asyncio.run(scenario())


def test_a_new_leader_starts_every_connector_and_answers_meanwhile() -> None:
    count = STARTUP_CONCURRENCY * 3

    async def scenario() -> None:
        bed = Bed()
        names = [f"gen-{n:03d}" for n in range(count)]
        for name in names:
            config = {"connector.class": "DataGenSource", "topic": name, "name": name, "tasks.max": "1"}
            bed.config_store.put_connector_config(name, config, TargetState.STARTED)
        await bed.herder.start()
        try:
            began = time.monotonic()
            assert len(bed.herder.connector_names()) == count
            bed.herder.connector_status(names[-1])
            assert time.monotonic() - began < 0.5
            for name in names:
                await settle(bed, name, State.RUNNING, tasks=1)
        finally:
            await bed.herder.stop()

    asyncio.run(scenario())
