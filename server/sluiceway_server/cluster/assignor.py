"""Task assignment as a pure function: balanced by task count, sticky, and never placing a
task on a second executor before the first has released it (docs/ARCHITECTURE.md §6).

The coordinator calls `plan()` whenever tasks, executors or releases change and carries out
the result: revocations first; a task moving between executors is assigned to its new owner
only once the old one acknowledged the revocation or was declared dead.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from sluiceway_server.model import TaskId


@dataclass(frozen=True)
class Plan:
    # executor id → tasks to start there (new owner, or a changed assignment on the same owner)
    assign: dict[str, list[TaskId]] = field(default_factory=dict)
    # executor id → tasks to stop there; they are re-placed after the executor acknowledges
    revoke: dict[str, list[TaskId]] = field(default_factory=dict)


def plan(
    desired: Set[TaskId],
    owners: Mapping[TaskId, str],
    revoking: Set[TaskId],
    capacity: Mapping[str, int],
) -> Plan:
    """One step towards a balanced, sticky assignment.

    desired:  tasks that should run (connectors RUNNING or PAUSED with committed task configs)
    owners:   task → executor that currently holds it (assigned, including ones being revoked)
    revoking: tasks whose revocation is under way; they stay where they are until released
    capacity: executor id → most tasks it takes (0 = no limit)
    """
    executors = sorted(capacity)
    result = Plan()
    if not executors:
        return result
    load = dict.fromkeys(executors, 0)
    for owner in owners.values():
        if owner in load:
            load[owner] += 1

    # Tasks no longer wanted, or held by unknown executors' ghosts, are revoked.
    for task, owner in sorted(owners.items()):
        if task not in desired and task not in revoking and owner in load:
            result.revoke.setdefault(owner, []).append(task)

    def has_room(executor: str) -> bool:
        limit = capacity[executor]
        return limit == 0 or load[executor] < limit

    def least_loaded() -> str | None:
        candidates = [e for e in executors if has_room(e)]
        return min(candidates, key=lambda e: (load[e], e)) if candidates else None

    # Unowned wanted tasks go to the least-loaded executor (sorted for determinism).
    for task in sorted(t for t in desired if t not in owners):
        target = least_loaded()
        if target is None:
            break
        result.assign.setdefault(target, []).append(task)
        load[target] += 1

    # Balance: with nothing in flight, move tasks from the busiest to the idlest until the
    # spread is at most one. Departures count at once so one step moves enough tasks.
    if not revoking:
        staying = {t: o for t, o in owners.items() if t in desired and o in load}
        removed = {t for tasks in result.revoke.values() for t in tasks}
        for task in removed:
            load[owners[task]] -= 1
        while True:
            busiest = max(executors, key=lambda e: (load[e], e))
            idlest = least_loaded()
            if idlest is None or load[busiest] - load[idlest] <= 1:
                break
            movable = sorted(t for t, o in staying.items() if o == busiest)
            if not movable:
                break
            task = movable[-1]
            del staying[task]
            result.revoke.setdefault(busiest, []).append(task)
            load[busiest] -= 1
            load[idlest] += 1
    return result
