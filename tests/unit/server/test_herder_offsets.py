"""KIP-875 in the herder over memory-backed stores: the state rules, request validation, the
connector's say, and that a refused or timed-out change writes nothing (the same flows run over
the socket against the real broker in tests/integration/test_api_offsets.py)."""

from __future__ import annotations

import pytest

from sluiceway_server.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PluginTimeoutError,
    UnavailableError,
)
from sluiceway_server.model import TargetState
from tests.unit.server.test_herder_memory import CONTROLLABLE, Bed, run

PARTITION = {"file": "a"}


async def _stopped(bed: Bed, name: str, **config: str) -> None:
    await bed.herder.create_connector(name, {"connector.class": CONTROLLABLE, **config}, TargetState.STOPPED)


def test_changes_need_a_stopped_connector_and_write_nothing_otherwise() -> None:
    async def test(bed: Bed) -> None:
        await bed.herder.create_connector("c", {"connector.class": CONTROLLABLE}, TargetState.PAUSED)
        with pytest.raises(FailedPreconditionError) as refused:
            await bed.herder.offsets.alter("c", [(PARTITION, {"line": 1})])
        assert refused.value.reason == "CONNECTOR_NOT_STOPPED"
        assert refused.value.metadata["target_state"] == "PAUSED"
        assert "Stop it first" in refused.value.message
        with pytest.raises(NotFoundError):
            await bed.herder.offsets.reset("missing")
        assert bed.logs["offsets"].records() == []

    run(test)


def test_alter_reset_and_a_second_reset() -> None:
    async def test(bed: Bed) -> None:
        await _stopped(bed, "c", **{"alter.offsets": "ack"})
        change = await bed.herder.offsets.alter(
            "c", [(PARTITION, {"line": 2**63 - 1}), ({"file": "b"}, None)]
        )
        assert change.acknowledged and "confirmed" in change.message
        assert await bed.herder.offsets.get("c") == [(PARTITION, {"line": 2**63 - 1})]
        assert (await bed.herder.offsets.reset("c")).acknowledged
        assert await bed.herder.offsets.get("c") == []
        assert (await bed.herder.offsets.reset("c")).acknowledged

    run(test)


@pytest.mark.parametrize(
    ("offsets", "field"),
    [
        ([], "offsets"),
        ([({}, {"line": 1})], "offsets[0].partition"),
        ([(PARTITION, {"ratio": float("nan")})], 'offsets[0].offset.fields["ratio"]'),
        ([(PARTITION, {"line": 1}), (PARTITION, None)], "offsets[1].partition"),
    ],
)
def test_bad_source_offsets_name_the_field(
    offsets: list[tuple[dict[str, object], object]], field: str
) -> None:
    async def test(bed: Bed) -> None:
        await _stopped(bed, "c")
        with pytest.raises(InvalidArgumentError) as refused:
            await bed.herder.offsets.alter("c", offsets)  # type: ignore[arg-type]
        assert refused.value.reason == "INVALID_OFFSETS"
        assert [v.field for v in refused.value.violations] == [field]
        assert bed.logs["offsets"].records() == []

    run(test)


@pytest.mark.parametrize("behaviour", ["fail", "unsupported"])
def test_a_refusing_connector_changes_nothing(behaviour: str) -> None:
    async def test(bed: Bed) -> None:
        await _stopped(bed, "c", **{"alter.offsets": "ack"})
        await bed.herder.offsets.alter("c", [(PARTITION, {"line": 1})])
        await bed.herder.patch_connector_config("c", {"alter.offsets": behaviour}, [])
        written = len(bed.logs["offsets"].records())
        for change in (
            bed.herder.offsets.alter("c", [(PARTITION, {"line": 9})]),
            bed.herder.offsets.reset("c"),
        ):
            with pytest.raises(FailedPreconditionError) as refused:
                await change
            assert refused.value.reason == "CONNECTOR_REJECTED_OFFSETS"
        assert len(bed.logs["offsets"].records()) == written
        assert await bed.herder.offsets.get("c") == [(PARTITION, {"line": 1})]

    run(test)


def test_a_hanging_connector_times_out_and_changes_nothing() -> None:
    async def test(bed: Bed) -> None:
        await _stopped(bed, "c", **{"alter.offsets": "hang"})
        with pytest.raises(PluginTimeoutError):
            await bed.herder.offsets.alter("c", [(PARTITION, {"line": 1})])
        assert bed.logs["offsets"].records() == []
        # the connector's lock was released: other changes go ahead
        await bed.herder.set_target_state("c", TargetState.PAUSED)

    run(test, plugin_timeout=0.5)


def test_own_offsets_topic_wins_and_resets_reach_both_topics() -> None:
    async def test(bed: Bed) -> None:
        bed.offset_store.put("c", [(PARTITION, {"line": 1}), ({"file": "b"}, {"line": 2})], 5)
        await _stopped(bed, "c", **{"offsets.storage.topic": "own"})
        await bed.herder.offsets.alter("c", [(PARTITION, {"line": 7})])
        assert await bed.herder.offsets.get("c") == [(PARTITION, {"line": 7}), ({"file": "b"}, {"line": 2})]
        await bed.herder.offsets.reset("c")
        assert await bed.herder.offsets.get("c") == []
        assert bed.offset_store.offsets("c") == []

    run(test)


def test_an_unreachable_offsets_topic_is_unavailable_not_internal() -> None:
    async def test(bed: Bed) -> None:
        await _stopped(bed, "c")
        bed.offset_store.stop()
        with pytest.raises(UnavailableError) as down:
            await bed.herder.offsets.alter("c", [(PARTITION, {"line": 1})])
        assert down.value.reason == "STORAGE_UNAVAILABLE"

    run(test)
