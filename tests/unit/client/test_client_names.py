"""Resource names: bare ids and full names in, full names on the wire."""

from __future__ import annotations

import pytest

from sluiceway.client import (
    SluicewayClient,
    connector_id,
    connector_name,
    parse_task_name,
    plugin_name,
    resolve_target,
    task_name,
)
from sluiceway.errors import InvalidArgumentError
from tests.unit.client.fake_control_plane import Served


@pytest.mark.parametrize("given", ["my-conn", "connectors/my-conn"])
def test_connector_names(given: str) -> None:
    assert connector_name(given) == "connectors/my-conn"
    assert connector_id(given) == "my-conn"


@pytest.mark.parametrize("bad", ["", "   ", "connectors/", "connectors/a/tasks/0", "a/b"])
def test_bad_connector_names(bad: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        connector_name(bad)
    assert isinstance(info.value, ValueError)
    assert info.value.reason == "INVALID_REQUEST"
    assert info.value.field_violations[0].field == "name"


def test_task_names() -> None:
    assert task_name("c", 0) == "connectors/c/tasks/0"
    assert task_name("connectors/c", 12) == "connectors/c/tasks/12"
    assert parse_task_name("connectors/c/tasks/12") == ("c", 12)
    for bad in (-1, True, "1"):
        with pytest.raises(InvalidArgumentError):
            task_name("c", bad)  # type: ignore[arg-type]
    for bad_name in ("connectors/c", "connectors/c/tasks/x", "c/tasks/"):
        with pytest.raises(InvalidArgumentError):
            parse_task_name(bad_name)


def test_plugin_names() -> None:
    assert plugin_name("DataGenSource") == "plugins/DataGenSource"
    assert plugin_name("plugins/io.x.Y") == "plugins/io.x.Y"
    with pytest.raises(InvalidArgumentError):
        plugin_name("")


def test_target_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLUICEWAY_SERVER", raising=False)
    assert resolve_target(None) == "localhost:8083"
    monkeypatch.setenv("SLUICEWAY_SERVER", "cp:9000")
    assert resolve_target(None) == "cp:9000"
    assert resolve_target("explicit:1") == "explicit:1"
    with SluicewayClient() as client:
        assert client.target == "cp:9000"


def test_names_on_the_wire(served: Served) -> None:
    served.fake.add_connector("c", tasks=3)
    with SluicewayClient(served.target) as client:
        client.get_connector("c")
        client.get_connector("connectors/c")
        client.task_status("c", 2)
        client.task_status("connectors/c", 1)
        client.restart_task("c", 0)
        client.list_tasks("connectors/c")
        client.plugin_config("DataGenSource")
        client.watch_status("c").close()  # type: ignore[attr-defined]
    fake = served.fake
    assert [a.request.name for a in fake.attempts_of("GetConnector")] == ["connectors/c", "connectors/c"]
    assert [a.request.name for a in fake.attempts_of("GetTaskStatus")] == [
        "connectors/c/tasks/2",
        "connectors/c/tasks/1",
    ]
    assert fake.attempts_of("RestartTask")[0].request.name == "connectors/c/tasks/0"
    assert fake.attempts_of("ListTasks")[0].request.parent == "connectors/c"
    assert fake.attempts_of("GetPluginConfigDefinition")[0].request.name == "plugins/DataGenSource"


def test_bad_names_fail_before_any_call(served: Served) -> None:
    with SluicewayClient(served.target) as client:
        with pytest.raises(InvalidArgumentError):
            client.get_connector("a/b")
        with pytest.raises(InvalidArgumentError):
            client.task_status("c", -1)
    assert served.fake.attempts == []
