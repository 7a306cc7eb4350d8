"""The assignor: balanced, sticky, and never two owners for one task."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sluiceway_server.cluster.assignor import Plan, plan
from sluiceway_server.model import TaskId


def tasks(connector: str, count: int) -> set[TaskId]:
    return {TaskId(connector, n) for n in range(count)}


def apply(step: Plan, owners: dict[TaskId, str]) -> dict[TaskId, str]:
    """Carry out a plan with every revocation acknowledged at once."""
    result = dict(owners)
    for revoked in step.revoke.values():
        for task in revoked:
            result.pop(task, None)
    for executor, assigned in step.assign.items():
        for task in assigned:
            assert task not in result, f"{task} assigned while still owned by {result.get(task)}"
            result[task] = executor
    return result


def settle(desired: set[TaskId], owners: dict[TaskId, str], capacity: dict[str, int]) -> dict[TaskId, str]:
    for _ in range(50):
        step = plan(desired, owners, set(), capacity)
        if not step.assign and not step.revoke:
            return owners
        owners = apply(step, owners)
    raise AssertionError("did not converge")


def loads(owners: dict[TaskId, str], executors: list[str]) -> list[int]:
    return [sum(1 for o in owners.values() if o == e) for e in executors]


def test_name_round_trip() -> None:
    task = TaskId("my-conn", 3)
    assert TaskId.parse(task.name) == task


def test_balanced_initial_assignment() -> None:
    owners = settle(tasks("a", 5) | tasks("b", 3), {}, {"e1": 0, "e2": 0, "e3": 0})
    assert sorted(loads(owners, ["e1", "e2", "e3"])) == [2, 3, 3]


def test_new_executor_takes_only_what_balance_needs() -> None:
    desired = tasks("a", 6)
    owners = settle(desired, {}, {"e1": 0, "e2": 0})
    before = dict(owners)
    owners = settle(desired, owners, {"e1": 0, "e2": 0, "e3": 0})
    moved = [t for t in desired if before[t] != owners[t]]
    assert loads(owners, ["e1", "e2", "e3"]) == [2, 2, 2]
    assert len(moved) == 2 and all(owners[t] == "e3" for t in moved)


def test_dead_executor_tasks_move_and_others_stay() -> None:
    desired = tasks("a", 4)
    owners = settle(desired, {}, {"e1": 0, "e2": 0})
    survivors = {t: o for t, o in owners.items() if o == "e1"}
    after = settle(desired, survivors, {"e1": 0})
    assert set(after.values()) == {"e1"} and set(after) == desired
    assert all(after[t] == "e1" for t in survivors)


def test_nothing_moves_while_a_revocation_is_in_flight() -> None:
    owners = {TaskId("a", 0): "e1", TaskId("a", 1): "e1", TaskId("a", 2): "e1"}
    step = plan(set(owners), owners, {TaskId("a", 2)}, {"e1": 0, "e2": 0})
    assert step.revoke == {} and step.assign == {}


def test_removed_tasks_are_revoked_and_capacity_is_respected() -> None:
    owners = {TaskId("a", 0): "e1", TaskId("gone", 0): "e1"}
    step = plan({TaskId("a", 0), TaskId("b", 0), TaskId("b", 1)}, owners, set(), {"e1": 2})
    assert step.revoke == {"e1": [TaskId("gone", 0)]}
    assert sum(len(v) for v in step.assign.values()) == 0  # e1 is full until the revocation completes
    owners = apply(step, owners)
    step = plan({TaskId("a", 0), TaskId("b", 0), TaskId("b", 1)}, owners, set(), {"e1": 2})
    assert step.assign == {"e1": [TaskId("b", 0)]}


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 12),
    st.integers(0, 6),
    st.lists(st.sampled_from(["e1", "e2", "e3", "e4"]), min_size=1, max_size=4, unique=True),
    st.lists(st.sampled_from(["e1", "e2", "e3", "e4"]), min_size=1, max_size=4, unique=True),
)
def test_converges_balanced_without_double_ownership(
    a_tasks: int, b_tasks: int, first: list[str], second: list[str]
) -> None:
    desired = tasks("a", a_tasks) | tasks("b", b_tasks)
    owners = settle(desired, {}, dict.fromkeys(first, 0))
    assert set(owners) == desired
    # membership changes: the departed executors' tasks are released, the rest stay put
    kept = {t: o for t, o in owners.items() if o in second}
    after = settle(desired, kept, dict.fromkeys(second, 0))
    assert set(after) == desired
    spread = loads(after, sorted(second))
    assert max(spread) - min(spread) <= 1
