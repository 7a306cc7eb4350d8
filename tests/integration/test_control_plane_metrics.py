"""The control plane's /metrics, scraped over HTTP from real replicas: calls counted by method and
code (gRPC, REST, forwarding to the leader), and the state gauges equal to what the status API says."""

from __future__ import annotations

import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sluiceway.client import SluicewayClient
from sluiceway.errors import NotFoundError
from sluiceway_server.embedded import EmbeddedBroker, free_port
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import wait_until
from tests.integration.rest_helpers import Http

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def metrics_plane(
    broker: EmbeddedBroker, suffix: str, *, lead: bool = True, rest: bool = False
) -> ControlPlaneProcess:
    settings = {"metrics.listeners": f"http://127.0.0.1:{free_port()}"}
    if rest:
        settings["rest.listeners"] = f"http://127.0.0.1:{free_port()}"
    return ControlPlaneProcess(broker, suffix, settings=settings).start(lead=lead)


def test_calls_and_states_are_counted(broker: EmbeddedBroker, unique: str) -> None:
    plane = metrics_plane(broker, uuid.uuid4().hex[:8], rest=True)
    url = plane.settings["metrics.listeners"] + "/metrics"
    try:
        name = f"metered-{unique}"
        with SluicewayClient(plane.address, timeout=30) as client:
            client.create_connector(
                name, {"connector.class": "DataGenSource", "topic": name, "tasks.max": "2"}
            )
            with pytest.raises(NotFoundError):
                client.get_connector(f"missing-{unique}")
            http = Http(plane.settings["rest.listeners"])
            assert http.get(f"/connectors/{name}/status").status == 200
            assert http.get(f"/connectors/missing-{unique}").status == 404

            samples = scrape(url)
            connectors = "sluiceway.api.v1.ConnectorService"
            handled = "sluiceway_grpc_server_handled_total"
            assert value(samples, handled, service=connectors, method="CreateConnector", code="OK") == 1
            assert value(samples, handled, service=connectors, method="GetConnector", code="NOT_FOUND") >= 1
            assert (
                value(
                    samples,
                    "sluiceway_grpc_server_handling_seconds_count",
                    service=connectors,
                    method="CreateConnector",
                )
                == 1
            )
            rest = "sluiceway_rest_requests_total"
            assert (
                value(samples, rest, method="GET", route="/connectors/{connector}/status", status="200") == 1
            )
            assert value(samples, rest, method="GET", route="/connectors/{connector}", status="404") == 1
            # The state gauges are read anew every second.
            wait_until(lambda: value(scrape(url), "sluiceway_leader") == 1, timeout=10)
            assert value(scrape(url), "sluiceway_leader_epoch") >= 1
            # The create made the leader share the tasks out again.
            assert value(scrape(url), "sluiceway_rebalance_seconds_count") >= 1
            # Each internal topic read to its end (a record written a moment ago, such as the member
            # record refreshed every second, shows as lag until it is read).
            samples = scrape(url)
            for topic in plane.topics.values():
                assert ("sluiceway_internal_topic_read_lag", (("topic", topic),)) in samples, topic
            wait_until(
                lambda: all(
                    value(scrape(url), "sluiceway_internal_topic_read_lag", topic=topic) == 0
                    for topic in plane.topics.values()
                ),
                timeout=10,
                what="every internal topic read to its end",
            )

            # The state gauges agree with the status API once both have seen the tasks.
            def agreed() -> bool:
                status = client.connector_status(name)
                now = scrape(url)
                tasks = {(str(t.id), t.state.name) for t in status.tasks}
                gauged = {
                    (dict(labels)["task"], dict(labels)["state"])
                    for (metric, labels), v in now.items()
                    if metric == "sluiceway_task_state" and dict(labels)["connector"] == name and v == 1
                }
                connector_state = status.connector.state.name
                return (
                    len(tasks) == 2
                    and gauged == tasks
                    and value(now, "sluiceway_connectors", state=connector_state) >= 1
                )

            wait_until(agreed, timeout=30, what="the task gauges to match the status API")
            client.delete_connector(name)
    finally:
        plane.stop()


def test_a_follower_counts_what_it_forwards(broker: EmbeddedBroker, unique: str) -> None:
    suffix = uuid.uuid4().hex[:8]
    leader = metrics_plane(broker, suffix)
    follower = metrics_plane(broker, suffix, lead=False)
    try:
        name = f"forwarded-{unique}"
        with SluicewayClient(follower.address, timeout=30) as client:
            client.create_connector(name, {"connector.class": "DataGenSource", "topic": name})
            client.delete_connector(name)
        samples = scrape(follower.settings["metrics.listeners"] + "/metrics")
        assert value(samples, "sluiceway_forwarded_requests_total", method="CreateConnector", code="OK") == 1
        assert value(samples, "sluiceway_forwarded_requests_total", method="DeleteConnector", code="OK") == 1
        assert value(samples, "sluiceway_forwarding_seconds_count", method="CreateConnector") == 1
        assert value(samples, "sluiceway_leader") == 0
        leader_samples = scrape(leader.settings["metrics.listeners"] + "/metrics")
        assert (
            value(leader_samples, "sluiceway_forwarded_requests_total", method="CreateConnector", code="OK")
            == 0
        )
    finally:
        follower.stop()
        leader.stop()
