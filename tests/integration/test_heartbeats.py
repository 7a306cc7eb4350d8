"""KIP-910 end to end: source heartbeat records on a real broker (Tansu), Spark Connect, control
plane and executor.

One control plane with worker heartbeat settings runs four DataGen connectors at once, each with its
own `max.records`, so the `seq` in a heartbeat value tells which connector sent it:

- `plain` sets nothing: the worker's interval and topic apply;
- `own` sets both keys: its heartbeats go to its own topic, which did not exist before, keep coming
  while the task has no data left, and their offsets are committed (the offsets topic gains a record
  per heartbeat while the offset stays the last generated seq);
- `slow` sets only an interval of an hour: the worker's shorter one does not apply to it;
- `off` sets an interval of 0 and a topic: no heartbeats, so that topic is never created.

A second control plane with the worker defaults (heartbeats off) runs one DataGen connector: no
`connect-heartbeats` topic appears.

Empty values: a connector whose `heartbeat.records.topic` and `heartbeat.interval.ms` are empty
strings runs with the worker's (KIP-910: empty means the worker's topic), and the config keeps them
as given; a control plane whose own `heartbeat.records.topic` is empty does not start.

The record-level path (the hook runs inside Spark in the `sluiceway-source-task` data source) is
checked with the pipeline alone, on the record-level DataGen task.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from sluiceway.client import SluicewayClient
from sluiceway_executor.pipelines.factory import SparkPipelineFactory
from sluiceway_executor.pipelines.spec import TaskSpec
from sluiceway_server.embedded import (
    EmbeddedBroker,
    EmbeddedSparkConnect,
    control_plane_argv,
    free_port,
)
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    attach_executor,
    committed_offsets,
    topic_exists,
)

pytestmark = pytest.mark.integration

WORKER_INTERVAL_MS = 600
OWN_INTERVAL_MS = 400
# max.records per connector: the last seq (max - 1) in a heartbeat value names the connector.
PLAIN, OWN, SLOW, OFF = 10, 20, 30, 5


@pytest.fixture
def admin(broker: EmbeddedBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def datagen(topic: str, max_records: int, **heartbeat: str) -> dict[str, Any]:
    return {
        "connector.class": "DataGenSource",
        "tasks.max": 1,
        "topic": topic,
        "max.records": max_records,
        **heartbeat,
    }


def generated(client: SluicewayClient, name: str, max_records: int) -> Callable[[], bool]:
    """A probe: the connector's task committed its last generated seq."""
    return lambda: committed_offsets(client, name) == [({"task": 0}, {"seq": max_records - 1})]


def heartbeats(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """The values of the heartbeat records in `topic` (keys checked on the way)."""
    records = read_topic(bootstrap, topic)
    assert all(key == "0-heartbeat" for key, _ in records), records
    return [value for _, value in records]


def offset_records(bootstrap: str, offsets_topic: str, connector: str) -> int:
    """How many records the offsets topic holds for the connector's task-0 partition."""
    key = json.dumps([connector, {"task": 0}], separators=(",", ":"))
    return sum(1 for k, _ in read_topic(bootstrap, offsets_topic) if k == key)


def test_heartbeats_follow_the_connector_over_the_worker_settings(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    admin: AdminClient,
) -> None:
    u = uuid.uuid4().hex[:10]
    worker_topic, own_topic, off_topic = f"hb-{u}-worker", f"hb-{u}-own", f"hb-{u}-off"
    plane = control_plane_factory(
        **FAST_EXECUTOR_SESSION,
        **{"heartbeat.interval.ms": str(WORKER_INTERVAL_MS), "heartbeat.records.topic": worker_topic},
    )
    stack = attach_executor(plane, spark_connect, "heartbeats")
    bootstrap = broker.bootstrap_servers
    try:
        for topic in (worker_topic, own_topic, off_topic):
            assert not topic_exists(admin, topic)
        names = {kind: f"{kind}-{u}" for kind in ("plain", "own", "slow", "off")}
        stack.client.create_connector(names["plain"], datagen(f"data-{u}-plain", PLAIN))
        stack.client.create_connector(
            names["own"],
            datagen(
                f"data-{u}-own",
                OWN,
                **{"heartbeat.interval.ms": str(OWN_INTERVAL_MS), "heartbeat.records.topic": own_topic},
            ),
        )
        stack.client.create_connector(
            names["slow"], datagen(f"data-{u}-slow", SLOW, **{"heartbeat.interval.ms": "3600000"})
        )
        stack.client.create_connector(
            names["off"],
            datagen(
                f"data-{u}-off", OFF, **{"heartbeat.interval.ms": "0", "heartbeat.records.topic": off_topic}
            ),
        )
        for kind, last in (("plain", PLAIN), ("own", OWN), ("slow", SLOW), ("off", OFF)):
            stack.wait_for(generated(stack.client, names[kind], last), f"{kind}'s data")

        # The connector's own topic: created by the task, then fed while the task has no data left.
        stack.wait_for(lambda: topic_exists(admin, own_topic), "the connector's heartbeat topic")
        stack.wait_for(lambda: len(heartbeats(bootstrap, own_topic)) >= 2, "two heartbeats")
        before = len(heartbeats(bootstrap, own_topic))
        commits_before = offset_records(bootstrap, plane.topics["offset"], names["own"])
        time.sleep(4)
        own = heartbeats(bootstrap, own_topic)
        assert len(own) >= before + 2, f"{before} then {len(own)} heartbeats in 4 s\n{stack.logs()}"
        # Each names the task and its last seq; their offsets are committed, and change nothing.
        assert {(v["task"], v["seq"]) for v in own} == {(0, OWN - 1)}
        assert all(isinstance(v["ts"], int) for v in own)
        assert offset_records(bootstrap, plane.topics["offset"], names["own"]) >= commits_before + 2
        assert committed_offsets(stack.client, names["own"]) == [({"task": 0}, {"seq": OWN - 1})]
        # The data topic got the data only; the heartbeat topic is one of the task's active topics.
        assert len(read_topic(bootstrap, f"data-{u}-own")) == OWN
        assert set(stack.client.active_topics(names["own"]).topics) == {f"data-{u}-own", own_topic}

        # The worker's topic and interval for the connector that sets nothing, and only for it: `own`
        # has its own topic, `slow` its own interval, `off` none.
        stack.wait_for(lambda: topic_exists(admin, worker_topic), "the worker's heartbeat topic")
        stack.wait_for(
            lambda: len(heartbeats(bootstrap, worker_topic)) >= 2, "heartbeats in the worker topic"
        )
        assert {(v["task"], v["seq"]) for v in heartbeats(bootstrap, worker_topic)} == {(0, PLAIN - 1)}
        assert committed_offsets(stack.client, names["plain"]) == [({"task": 0}, {"seq": PLAIN - 1})]
        assert worker_topic in set(stack.client.active_topics(names["plain"]).topics)
        assert set(stack.client.active_topics(names["slow"]).topics) == {f"data-{u}-slow"}
        assert not topic_exists(admin, off_topic)
        assert set(stack.client.active_topics(names["off"]).topics) == {f"data-{u}-off"}
        for name in names.values():
            stack.client.delete_connector(name)
    finally:
        stack.close()


def test_no_heartbeat_topic_with_the_worker_defaults(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    admin: AdminClient,
) -> None:
    plane = control_plane_factory(**FAST_EXECUTOR_SESSION)
    stack = attach_executor(plane, spark_connect, "heartbeats")
    try:
        u = uuid.uuid4().hex[:10]
        name = f"quiet-{u}"
        # DataGen has a heartbeat hook; the worker's default interval, 0, keeps it from being called.
        stack.client.create_connector(name, datagen(f"data-{u}-quiet", 5))
        stack.wait_for(
            lambda: committed_offsets(stack.client, name) == [({"task": 0}, {"seq": 4})], "the data"
        )
        time.sleep(3)  # several idle batches
        assert not topic_exists(admin, "connect-heartbeats")
        assert set(stack.client.active_topics(name).topics) == {f"data-{u}-quiet"}
        stack.client.delete_connector(name)
    finally:
        stack.close()


def test_empty_heartbeat_settings_of_a_connector_take_the_workers(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    admin: AdminClient,
) -> None:
    u = uuid.uuid4().hex[:10]
    worker_topic, last = f"hb-{u}-worker", 7
    plane = control_plane_factory(
        **FAST_EXECUTOR_SESSION,
        **{"heartbeat.interval.ms": str(WORKER_INTERVAL_MS), "heartbeat.records.topic": worker_topic},
    )
    stack = attach_executor(plane, spark_connect, "heartbeats")
    try:
        name = f"empty-{u}"
        empty = {
            "heartbeat.records.topic": "",
            "heartbeat.interval.ms": "",
            # The restart keys follow the same rule (docs/CONFIGURATION.md): empty is the worker's value.
            "task.restart.max.attempts": "",
        }
        stack.client.create_connector(name, datagen(f"data-{u}-empty", last, **empty))
        # Stored as given: the empty values stay empty, nothing is filled in.
        stored = stack.client.get_connector(name).config
        assert {key: stored[key] for key in empty} == empty
        stack.wait_for(generated(stack.client, name, last), "the data")
        # The worker's interval and topic: heartbeats keep coming there while the task is idle.
        stack.wait_for(lambda: topic_exists(admin, worker_topic), "the worker's heartbeat topic")
        stack.wait_for(
            lambda: len(heartbeats(broker.bootstrap_servers, worker_topic)) >= 2,
            "heartbeats in the worker's topic",
        )
        assert {(v["task"], v["seq"]) for v in heartbeats(broker.bootstrap_servers, worker_topic)} == {
            (0, last - 1)
        }
        assert set(stack.client.active_topics(name).topics) == {f"data-{u}-empty", worker_topic}
        assert not topic_exists(admin, "connect-heartbeats")
        stack.client.delete_connector(name)
    finally:
        stack.close()


def test_a_control_plane_with_an_empty_heartbeat_topic_does_not_start(broker: EmbeddedBroker) -> None:
    # Connectors that leave theirs empty would use it: start-up stops and names the key, instead of
    # falling back to connect-heartbeats.
    argv = control_plane_argv(
        broker.bootstrap_servers,
        f"127.0.0.1:{free_port()}",
        f"cluster-{uuid.uuid4().hex[:8]}",
        {"heartbeat.records.topic": ""},
    )
    ended = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert ended.returncode == 2, ended
    assert "invalid worker configuration: heartbeat.records.topic: must not be empty" in ended.stderr
    assert "listening" not in ended.stdout


# ------------------------------------------------------------------ record-level tasks (pipeline only)


def test_a_record_level_task_sends_its_heartbeats_from_inside_spark(
    spark_with_sources: SparkSession, broker: EmbeddedBroker, admin: AdminClient
) -> None:
    u = uuid.uuid4().hex[:10]
    data, beats = f"data-{u}-records", f"hb-{u}-records"
    config = {
        "connector.class": "DataGenSource",
        "topic": data,
        "max.records": "3",
        # 1 ms: due at every batch.
        "heartbeat.interval.ms": "1",
        "heartbeat.records.topic": beats,
    }
    spec = TaskSpec(
        name=f"connectors/rec-{u}/tasks/0",
        connector=f"rec-{u}",
        task_index=0,
        generation=1,
        connector_config=config,
        task_config={
            **config,
            "task.id": "0",
            "task.class": "sluiceway_executor.connectors.datagen.DataGenSourceTask",
        },
        paused=False,
        task_count=1,
    )
    pipeline = SparkPipelineFactory(spark_with_sources)(spec, {"bootstrap.servers": broker.bootstrap_servers})
    pipeline.start()
    try:
        time.sleep(0.01)
        # Nothing committed yet: the task has no offset to carry and sends no heartbeat.
        first = pipeline.run_batch(0)
        assert first.records == 3 and first.offsets == [({"task": 0}, {"seq": 2})]
        assert first.topics == {data}
        assert not topic_exists(admin, beats)
        pipeline.committed(first)
        time.sleep(0.01)
        # Idle now: the batch holds the heartbeat only, which the runner commits and does not count.
        second = pipeline.run_batch(1)
        assert second.records == 0 and second.empty
        assert second.offsets == [({"task": 0}, {"seq": 2})]
        assert second.topics == {beats}
        assert topic_exists(admin, beats)
        ((key, value),) = read_topic(broker.bootstrap_servers, beats)
        assert key == "0-heartbeat" and (value["task"], value["seq"]) == (0, 2)
        assert len(read_topic(broker.bootstrap_servers, data)) == 3
    finally:
        pipeline.stop()
