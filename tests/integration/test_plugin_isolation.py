"""A plugin whose config(), validate() and start() are slow never stalls the API: while its calls
are under way, every read RPC of the real control plane answers at its usual speed: a median under
100 ms, and not one call held up for anything like a slow callback's 1.5 s."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from sluiceway.api.v1 import cluster_pb2, common_pb2, connectors_pb2, plugins_pb2
from tests.integration.api_helpers import Stubs, failure, wait_until

pytestmark = pytest.mark.integration

SLOW = "testing_connectors.SlowSourceConnector"
MEDIAN_LIMIT = 0.1  # seconds
# A call queued behind a slow callback would wait at least 1.5 s; a third of that leaves room for the
# scheduler of a loaded 2-core machine without letting a real stall through.
WORST_LIMIT = 0.5


@pytest.fixture
def stubs(channel: grpc.Channel) -> Stubs:
    return Stubs.of(channel)


def _reads(stubs: Stubs, healthy: str) -> dict[str, Callable[[], Any]]:
    name = f"connectors/{healthy}"
    return {
        "GetConnector": lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=name, view=connectors_pb2.CONNECTOR_VIEW_FULL), timeout=10
        ),
        "ListConnectors": lambda: stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(view=connectors_pb2.CONNECTOR_VIEW_FULL), timeout=10
        ),
        "ListTasks": lambda: stubs.connectors.ListTasks(
            connectors_pb2.ListTasksRequest(parent=name), timeout=10
        ),
        "GetConnectorStatus": lambda: stubs.connectors.GetConnectorStatus(
            connectors_pb2.GetConnectorStatusRequest(name=name), timeout=10
        ),
        "ListPlugins": lambda: stubs.plugins.ListPlugins(plugins_pb2.ListPluginsRequest(), timeout=10),
        "GetPluginConfigDefinition": lambda: stubs.plugins.GetPluginConfigDefinition(
            plugins_pb2.GetPluginConfigDefinitionRequest(name="plugins/DataGenSource"), timeout=10
        ),
        "GetServerInfo": lambda: stubs.cluster.GetServerInfo(cluster_pb2.GetServerInfoRequest(), timeout=10),
    }


def test_slow_plugin_callbacks_never_stall_reads(stubs: Stubs, unique: str) -> None:
    healthy = f"healthy-{unique}"
    stubs.connectors.CreateConnector(
        connectors_pb2.CreateConnectorRequest(
            connector_id=healthy,
            connector=connectors_pb2.Connector(
                config={"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": "2"}
            ),
            initial_state=connectors_pb2.INITIAL_STATE_PAUSED,
        ),
        timeout=30,
    )
    reads = _reads(stubs, healthy)
    for call in reads.values():
        call()  # warm the channel and the server's caches of DataGenSource

    slow = f"slow-{unique}"
    slow_config = {
        "name": slow,
        "connector.class": SLOW,
        "validate.delay.ms": "1500",
        "start.delay.ms": "2000",
        "secret": "hunter2",
    }
    outcomes: dict[str, Any] = {}

    def slow_calls() -> None:
        # Validation (config() twice and validate()), then creation and start(), then reads that
        # need the slow plugin's definition: each one is slow, none may hold up the others.
        outcomes["validate"] = stubs.plugins.ValidateConnectorConfig(
            plugins_pb2.ValidateConnectorConfigRequest(config=slow_config), timeout=60
        )
        outcomes["create"] = stubs.connectors.CreateConnector(
            connectors_pb2.CreateConnectorRequest(
                connector_id=slow, connector=connectors_pb2.Connector(config=slow_config)
            ),
            timeout=60,
        )
        outcomes["get"] = stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(
                name=f"connectors/{slow}", view=connectors_pb2.CONNECTOR_VIEW_FULL
            ),
            timeout=60,
        )
        outcomes["definition"] = stubs.plugins.GetPluginConfigDefinition(
            plugins_pb2.GetPluginConfigDefinitionRequest(name=f"plugins/{SLOW}"), timeout=60
        )

    worker = threading.Thread(target=slow_calls, daemon=True)
    started = time.monotonic()
    worker.start()
    latencies: dict[str, list[float]] = {name: [] for name in reads}
    while worker.is_alive() and time.monotonic() - started < 90:
        for name, call in reads.items():
            before = time.monotonic()
            call()
            latencies[name].append(time.monotonic() - before)
        time.sleep(0.02)
    worker.join(timeout=5)
    elapsed = time.monotonic() - started

    assert set(outcomes) == {"validate", "create", "get", "definition"}, outcomes
    # The slow calls really were slow: each config() sleeps 1.5 s, validate() 1.5 s more.
    assert elapsed > 3.0
    assert outcomes["validate"].error_count == 0
    assert outcomes["get"].config["secret"] == "[hidden]"  # masked with the slow plugin's definition
    assert "validate.delay.ms" in {key.name for key in outcomes["definition"].keys}
    for name, measured in latencies.items():
        assert len(measured) >= 10, f"{name} was called only {len(measured)} times"
        typical, worst = statistics.median(measured), max(measured)
        assert typical < MEDIAN_LIMIT, (
            f"{name} took {typical * 1000:.0f} ms (median) while the slow plugin ran"
        )
        assert worst < WORST_LIMIT, f"{name} took {worst * 1000:.0f} ms once while the slow plugin ran"

    # start() ran on the connector's own thread: the connector gets to RUNNING.
    wait_until(
        lambda: (
            stubs.connectors.GetConnectorStatus(
                connectors_pb2.GetConnectorStatusRequest(name=f"connectors/{slow}"), timeout=10
            ).connector.state
            == common_pb2.STATE_RUNNING
        ),
        what="slow connector RUNNING",
    )


def test_hung_validation_answers_plugin_timeout(channel: grpc.Channel, unique: str) -> None:
    """validate() that outlives plugin.callback.timeout.ms (5 s on the test control plane) gets
    DEADLINE_EXCEEDED with reason PLUGIN_TIMEOUT, and nothing is created."""
    stubs = Stubs.of(channel)
    name = f"hung-{unique}"
    config = {"connector.class": SLOW, "validate.delay.ms": "8000"}
    started = time.monotonic()
    refused = failure(
        lambda: stubs.connectors.CreateConnector(
            connectors_pb2.CreateConnectorRequest(
                connector_id=name, connector=connectors_pb2.Connector(config=config)
            ),
            timeout=30,
        )
    )
    assert refused.code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert refused.reason == "PLUGIN_TIMEOUT"
    assert time.monotonic() - started < 15
    missing = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(name=f"connectors/{name}"), timeout=10
        )
    )
    assert missing.code == grpc.StatusCode.NOT_FOUND
