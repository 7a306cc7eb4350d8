"""Topic specs: validation that Tansu would skip, and the compacted spec of the internal topics."""

from __future__ import annotations

import pytest

from sluiceway_server.storage import TopicSpec, compacted


def test_compacted_forces_the_cleanup_policy() -> None:
    spec = compacted(25, 3, {"cleanup.policy": "delete", "segment.ms": "1000"})
    assert spec == TopicSpec(25, 3, {"cleanup.policy": "compact", "segment.ms": "1000"})
    assert compacted(1).replication_factor == -1


@pytest.mark.parametrize(("partitions", "replication"), [(0, -1), (-1, 1), (1, 0), (1, -2)])
def test_invalid_specs_are_rejected(partitions: int, replication: int) -> None:
    with pytest.raises(ValueError, match="topic 't'"):
        TopicSpec(partitions, replication, {}).validate("t")


@pytest.mark.parametrize(("partitions", "replication"), [(1, -1), (5, 1), (25, 3)])
def test_valid_specs_pass(partitions: int, replication: int) -> None:
    TopicSpec(partitions, replication, {}).validate("t")
