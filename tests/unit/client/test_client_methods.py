"""Every client method against the fake control plane: requests built right, responses typed."""

from __future__ import annotations

import asyncio

import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2, plugins_pb2
from sluiceway.client import AsyncSluicewayClient, Connector, SluicewayClient, State, TargetState
from sluiceway.common.offsets import map_from_proto
from sluiceway.errors import InvalidArgumentError, NotFoundError
from tests.unit.client.fake_control_plane import DATAGEN, Served, offset_of


def test_connector_lifecycle(served: Served) -> None:
    fake = served.fake
    with SluicewayClient(served.target) as client:
        created = client.create_connector(
            "gen", {"connector.class": DATAGEN, "topic": "t", "tasks.max": 2}, initial_state="paused"
        )
        assert isinstance(created, Connector)
        assert created.target_state == TargetState.PAUSED
        assert (created.name, created.resource_name, str(created.target_state)) == (
            "gen",
            "connectors/gen",
            "PAUSED",
        )
        request = fake.attempts_of("CreateConnector")[0].request
        assert request.connector_id == "gen"
        assert request.initial_state == connectors_pb2.INITIAL_STATE_PAUSED
        assert dict(request.connector.config)["tasks.max"] == "2"

        checked = client.create_connector(
            "other", {"connector.class": DATAGEN, "topic": "t"}, validate_only=True, initial_state="STOPPED"
        )
        assert checked.name == "other"
        assert "other" not in fake.connectors

        full = client.get_connector("gen", view="full")
        assert full.status is not None
        assert len(full.tasks) == 2
        assert fake.attempts_of("GetConnector")[0].request.view == connectors_pb2.CONNECTOR_VIEW_FULL

        connector, was_created = client.replace_connector_config(
            "gen", {"connector.class": DATAGEN, "topic": "u"}
        )
        assert (connector.config["topic"], was_created) == ("u", False)
        _, was_created = client.replace_connector_config("new", {"connector.class": DATAGEN, "topic": "u"})
        assert was_created

        patched = client.patch_connector_config("gen", set={"a": True, "b": 1.5}, remove=["topic"])
        assert dict(patched.config) == {"connector.class": DATAGEN, "a": "true", "b": "1.5"}
        with pytest.raises(InvalidArgumentError, match="both set and removed"):
            client.patch_connector_config("gen", set={"a": "1"}, remove=["a"])

        assert client.stop_connector("gen").target_state == TargetState.STOPPED
        assert client.pause_connector("gen").target_state == TargetState.PAUSED
        assert client.resume_connector("gen").target_state == TargetState.RUNNING

        status = client.restart_connector("gen", include_tasks=True)
        assert status.connector.state == State.RESTARTING
        assert {t.status.state for t in status.tasks} == {State.RESTARTING}
        assert fake.attempts_of("RestartConnector")[0].request.include_tasks

        tasks = client.list_tasks("gen")
        assert [(t.connector, t.id) for t in tasks] == [("gen", 0), ("gen", 1)]
        assert client.connector_status("gen").connector.state == State.RUNNING
        assert client.task_status("gen", 1).id == 1
        with pytest.raises(NotFoundError) as info:
            client.task_status("gen", 5)
        assert info.value.reason == "TASK_NOT_FOUND"
        client.restart_task("gen", 0)

        client.delete_connector("new", delete_offsets=True, wait=True)
        delete = fake.attempts_of("DeleteConnector")[0].request
        assert (delete.name, delete.delete_offsets, delete.wait) == ("connectors/new", True, True)
        assert delete.request_id


def test_etags_reach_the_server(served: Served) -> None:
    fake = served.fake
    with SluicewayClient(served.target) as client:
        client.create_connector("gen", {"connector.class": DATAGEN, "topic": "t"})
        client.replace_connector_config("gen", {"connector.class": DATAGEN, "topic": "u"}, etag="e1")
        client.patch_connector_config("gen", set={"a": "1"}, etag="e2")
        client.delete_connector("gen", etag="e3")
        client.create_connector("plain", {"connector.class": DATAGEN, "topic": "t"})
        client.delete_connector("plain")
    assert fake.attempts_of("ReplaceConnectorConfig")[0].request.etag == "e1"
    assert fake.attempts_of("PatchConnectorConfig")[0].request.etag == "e2"
    assert [a.request.etag for a in fake.attempts_of("DeleteConnector")] == ["e3", ""]


def test_list_connectors_follows_pages(served: Served) -> None:
    for name in ("e", "a", "d", "b", "c"):
        served.fake.add_connector(name)
    with SluicewayClient(served.target) as client:
        names = [c.name for c in client.list_connectors(view="status", page_size=2)]
        assert names == list("abcde")
        requests = [a.request for a in served.fake.attempts_of("ListConnectors")]
        assert [r.page_token for r in requests] == ["", "2", "4"]
        assert {r.view for r in requests} == {connectors_pb2.CONNECTOR_VIEW_STATUS}

        page = client.list_connectors_page(page_size=3)
        assert len(page.connectors) == 3
        assert page.next_page_token == "3"
        with pytest.raises(InvalidArgumentError):
            client.list_connectors(view="everything")
        with pytest.raises(InvalidArgumentError):
            client.list_connectors(page_size=-1)


def test_enum_arguments(served: Served) -> None:
    served.fake.add_connector("gen")
    with SluicewayClient(served.target) as client:
        client.get_connector("gen", view=connectors_pb2.CONNECTOR_VIEW_STATUS)
        client.create_connector(
            "x",
            {"connector.class": DATAGEN, "topic": "t"},
            initial_state=connectors_pb2.INITIAL_STATE_STOPPED,
        )
        with pytest.raises(InvalidArgumentError, match="RUNNING, PAUSED or STOPPED"):
            client.create_connector("y", {"connector.class": DATAGEN}, initial_state="sleeping")
        with pytest.raises(InvalidArgumentError, match=r"config\.bad"):
            client.create_connector("y", {"bad": None})  # type: ignore[dict-item]
    assert served.fake.attempts_of("GetConnector")[0].request.view == connectors_pb2.CONNECTOR_VIEW_STATUS
    assert served.fake.connectors["x"].target == common_pb2.TARGET_STATE_STOPPED


def test_plugins_offsets_topics_cluster(served: Served) -> None:
    fake = served.fake
    fake.add_connector("gen")
    fake.connectors["gen"].topics = {"t1", "t2"}
    with SluicewayClient(served.target) as client:
        plugins = client.list_plugins()
        assert all(isinstance(p, plugins_pb2.Plugin) for p in plugins)
        assert len(client.list_plugins(include_all_types=True)) == len(plugins) + 1

        definition = client.plugin_config("DataGenSource")
        assert [k.name for k in definition.keys] == ["topic", "max.records"]

        invalid = client.validate_config({"connector.class": "DataGenSource"})
        assert invalid.error_count == 1
        valid = client.validate_config({"topic": "t"}, plugin="DataGenSource")
        assert valid.error_count == 0
        assert fake.attempts_of("ValidateConnectorConfig")[1].request.plugin == "plugins/DataGenSource"

        client.stop_connector("gen")
        response = client.alter_offsets(
            "gen",
            [
                {"partition": {"task": 0}, "offset": {"seq": 41}},
                offset_of({"task": 1}, {"seq": 7}),
                {"partition": {"task": 2}, "offset": None},
            ],
        )
        assert response.connector_acknowledged
        sent = fake.attempts_of("AlterConnectorOffsets")[0].request
        assert map_from_proto(sent.offsets[0].offset)["seq"] == 41
        assert not sent.offsets[2].HasField("offset")
        offsets = client.get_offsets("gen")
        assert [map_from_proto(o.offset) for o in offsets.offsets] == [{"seq": 41}, {"seq": 7}]
        # Offsets are exact to 64 bits, both ways.
        client.alter_offsets(
            "gen", [{"partition": {"task": 0}, "offset": {"seq": 2**63 - 1, "neg": -(2**63)}}]
        )
        exact = [o for o in client.get_offsets("gen").offsets if map_from_proto(o.partition) == {"task": 0}]
        assert map_from_proto(exact[0].offset) == {"seq": 2**63 - 1, "neg": -(2**63)}
        with pytest.raises(InvalidArgumentError, match="64-bit"):
            client.alter_offsets("gen", [{"partition": {"p": 0}, "offset": {"o": 2**63}}])
        with pytest.raises(InvalidArgumentError, match="string, number, boolean or null"):
            client.alter_offsets("gen", [{"partition": {"p": 0}, "offset": {"o": {"nested": 1}}}])
        with pytest.raises(InvalidArgumentError, match="at least one"):
            client.alter_offsets("gen", [])
        with pytest.raises(InvalidArgumentError, match="unknown keys"):
            client.alter_offsets("gen", [{"partition": {}, "offsets": {}}])
        assert "reset" in client.reset_offsets("gen").message
        assert len(client.get_offsets("gen").offsets) == 0

        assert sorted(client.active_topics("gen").topics) == ["t1", "t2"]
        client.reset_active_topics("gen")
        assert list(client.active_topics("gen").topics) == []

        info = client.server_info()
        assert info.leader.id == "replica-1"
        assert [m.id for m in info.members] == ["replica-1", "replica-2"]


def test_async_client_covers_the_same_calls(served: Served) -> None:
    served.fake.add_connector("a")
    served.fake.add_connector("b", tasks=2)

    async def scenario() -> None:
        async with AsyncSluicewayClient(served.target) as client:
            created = await client.create_connector("gen", {"connector.class": DATAGEN, "topic": "t"})
            assert created.name == "gen"
            assert (await client.get_connector("gen")).config["topic"] == "t"
            names = [c.name async for c in client.list_connectors(page_size=1)]
            assert names == ["a", "b", "gen"]
            assert len((await client.list_connectors_page(page_size=2)).connectors) == 2
            _, created_flag = await client.replace_connector_config(
                "gen", {"connector.class": DATAGEN, "topic": "u"}
            )
            assert not created_flag
            assert "x" in (await client.patch_connector_config("gen", set={"x": "1"})).config
            assert (await client.stop_connector("gen")).target_state == TargetState.STOPPED
            assert (await client.pause_connector("gen")).target_state == TargetState.PAUSED
            assert (await client.resume_connector("gen")).target_state == TargetState.RUNNING
            await client.restart_connector("gen", only_failed=True)
            assert len(await client.list_tasks("b")) == 2
            assert (await client.connector_status("b")).name == "b"
            task = await client.task_status("b", 1)
            assert (task.connector, task.id, task.raw.name) == ("b", 1, "connectors/b/tasks/1")
            await client.restart_task("b", 1)
            events = [(e.connector, e.task) async for e in client.watch_status("b")]
            assert events == [("b", None), ("b", 0), ("b", 1)]
            assert await client.list_plugins()
            assert (await client.plugin_config("DataGenSource")).plugin.class_name == DATAGEN
            assert (await client.validate_config({"connector.class": DATAGEN})).error_count == 1
            await client.stop_connector("a")
            await client.alter_offsets("a", [{"partition": {"task": 0}, "offset": {"seq": 1}}])
            assert len((await client.get_offsets("a")).offsets) == 1
            await client.reset_offsets("a")
            assert list((await client.active_topics("a")).topics) == []
            await client.reset_active_topics("a")
            assert (await client.server_info()).version == "0.1.0"
            await client.delete_connector("gen")
            with pytest.raises(NotFoundError):
                await client.get_connector("gen")

    asyncio.run(scenario())


def test_timeouts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        SluicewayClient("127.0.0.1:1", timeout=0)
    with SluicewayClient("127.0.0.1:1") as client, pytest.raises(ValueError, match="positive"):
        client.server_info(timeout=-1)
