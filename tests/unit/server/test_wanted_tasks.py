"""WantedTasks: the same desired tasks as members.desired_tasks, derived again only for a connector
whose config, task configs or target state changed, and source tasks held back until their own
offsets topic is open."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sluiceway_server.cluster.members import desired_tasks
from sluiceway_server.cluster.wanted import WantedTasks
from sluiceway_server.model import ConnectorType, TargetState, TaskId
from sluiceway_server.storage.config_store import ClusterConfigState
from sluiceway_server.storage.connector_offsets import OwnOffsetsTopic


def kind(config: Mapping[str, str]) -> ConnectorType:
    return ConnectorType.SINK if config["connector.class"].endswith("Sink") else ConnectorType.SOURCE


class Topics:
    """Own offsets topics by the connector's offsets.storage.topic; ``opened`` decides is_open."""

    def __init__(self) -> None:
        self.asked = 0
        self.opening: list[str] = []
        self.opened: set[str] = set()

    def own_topic(self, config: Mapping[str, str]) -> OwnOffsetsTopic | None:
        self.asked += 1
        topic = config.get("offsets.storage.topic")
        return None if topic is None else OwnOffsetsTopic(topic, (("bootstrap.servers", "b:9092"),))

    def is_open(self, own: OwnOffsetsTopic) -> bool:
        return own.topic in self.opened

    def open_topic(self, own: OwnOffsetsTopic) -> None:
        self.opening.append(own.topic)


def snapshot(
    configs: Mapping[str, Mapping[str, str]],
    tasks: Mapping[str, tuple[Mapping[str, str], ...]],
    targets: Mapping[str, TargetState] | None = None,
) -> ClusterConfigState:
    return ClusterConfigState(
        position=1,
        connector_configs=MappingProxyType(dict(configs)),
        target_states=MappingProxyType(dict(targets or {})),
        task_configs=MappingProxyType(dict(tasks)),
    )


GEN = {"connector.class": "DataGenSource", "topic": "t"}
OWN = {"connector.class": "DataGenSource", "topic": "t", "offsets.storage.topic": "gen-offsets"}
LAKE = {"connector.class": "SparkFileSink", "topics": "t"}
TWO = ({"task.id": "0"}, {"task.id": "1"})
ONE = ({"task.id": "0"},)


def test_the_same_tasks_as_desired_tasks_and_unchanged_connectors_reuse_theirs() -> None:
    topics = Topics()
    wanted = WantedTasks(kind, topics)
    first = snapshot({"gen": GEN, "lake": LAKE}, {"gen": TWO, "lake": ONE})
    tasks = wanted.desired(first)
    assert tasks == desired_tasks(first)
    assert topics.asked == 1  # the source only
    again = wanted.desired(first)
    assert all(again[t] is tasks[t] for t in tasks)
    # A new snapshot: the sink's config changed, the source's values are the same objects.
    changed_lake = {**LAKE, "topics": "u"}
    second = snapshot({"gen": GEN, "lake": changed_lake}, {"gen": TWO, "lake": ONE})
    after = wanted.desired(second)
    assert after == desired_tasks(second)
    assert after[TaskId("gen", 0)] is tasks[TaskId("gen", 0)]
    assert after[TaskId("lake", 0)] is not tasks[TaskId("lake", 0)]
    assert after[TaskId("lake", 0)].connector_config == changed_lake
    assert topics.asked == 1


def test_stopped_and_removed_connectors_have_no_tasks_and_are_derived_again_when_back() -> None:
    wanted = WantedTasks(kind, Topics())
    running = snapshot({"gen": GEN, "lake": LAKE}, {"gen": TWO, "lake": ONE})
    before = wanted.desired(running)
    stopped = snapshot({"gen": GEN}, {"gen": TWO}, {"gen": TargetState.STOPPED})
    assert wanted.desired(stopped) == {}
    back = wanted.desired(running)
    assert back == before and back[TaskId("gen", 0)] is not before[TaskId("gen", 0)]
    paused = snapshot({"gen": GEN}, {"gen": ONE}, {"gen": TargetState.PAUSED})
    assert list(wanted.desired(paused)) == [TaskId("gen", 0)]


def test_a_source_task_waits_for_its_own_offsets_topic() -> None:
    topics = Topics()
    wanted = WantedTasks(kind, topics)
    snap = snapshot({"own": OWN, "gen": GEN, "lake": LAKE}, {"own": ONE, "gen": ONE, "lake": ONE})
    eligible = wanted.desired(snap)
    assert set(wanted.ready(eligible)) == {TaskId("gen", 0), TaskId("lake", 0)}
    assert topics.opening == ["gen-offsets"]
    topics.opened.add("gen-offsets")
    assert set(wanted.ready(wanted.desired(snap))) == set(eligible)
    assert topics.opening == ["gen-offsets"]  # not opened again


def test_the_same_snapshot_object_is_answered_without_looking_at_its_connectors() -> None:
    class Counting:
        """A snapshot that counts the walks over its connectors."""

        def __init__(self, inner: ClusterConfigState) -> None:
            self.inner = inner
            self.walks = 0

        def connectors(self) -> list[str]:
            self.walks += 1
            return self.inner.connectors()

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

    wanted = WantedTasks(kind, Topics())
    snap = Counting(snapshot({"gen": GEN, "lake": LAKE}, {"gen": TWO, "lake": ONE}))
    first = wanted.desired(snap)
    again = wanted.desired(snap)
    assert again == first and again is not first  # a copy: callers may change theirs
    again.clear()
    assert wanted.desired(snap) == first
    assert snap.walks == 1
    # Any other snapshot object is walked, even one equal to the last.
    other = Counting(snapshot({"gen": GEN, "lake": LAKE}, {"gen": TWO, "lake": ONE}))
    assert wanted.desired(other) == first and other.walks == 1


def test_snapshots_of_a_store_are_answered_from_their_changes_as_a_whole_walk_would() -> None:
    """Random config-topic histories: after each step the wanted tasks of the new snapshot, worked
    out from the connectors its records changed, equal those of a walk over everything."""
    import random

    from sluiceway_server.storage import ConfigStore
    from sluiceway_server.storage.memory_log import MemoryLog

    rng = random.Random(20261130)
    store = ConfigStore(lambda on_record: MemoryLog("configs", on_record))
    store.start(5)
    walks = 0

    class Walked(WantedTasks):
        def _walk(self, snap: object) -> None:
            nonlocal walks
            walks += 1
            super()._walk(snap)

    topics = Topics()
    wanted = Walked(kind, topics)
    names = [f"c{n}" for n in range(8)]
    try:
        for step in range(300):
            name = rng.choice(names)
            action = rng.random()
            exists = store.snapshot().contains(name)
            if not exists or action < 0.3:
                config = rng.choice([GEN, OWN, LAKE])
                store.put_connector_config(name, {**config, "name": name, "step": str(step % 3)})
            elif action < 0.55:
                store.put_task_configs(name, [{"task.id": str(n)} for n in range(rng.randint(0, 3))])
            elif action < 0.75:
                store.put_target_state(name, rng.choice(list(TargetState)))
            elif action < 0.85:
                store.remove_connector_config(name)
            else:
                store.put_restart_request(name, include_tasks=True, only_failed=False)
            snap = store.snapshot()
            if rng.random() < 0.7:  # some snapshots go unseen, as between two rebalances
                assert wanted.desired(snap) == desired_tasks(snap), step
                assert set(wanted.ready(wanted.desired(snap))) <= set(desired_tasks(snap))
        assert walks == 1
    finally:
        store.stop()
