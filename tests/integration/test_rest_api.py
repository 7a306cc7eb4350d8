"""Kafka Connect's REST API over real HTTP against a real control plane: every route, with the
status codes and bodies Kafka Connect documents, and the error bodies of its failures."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import sluiceway
from sluiceway_server.embedded import EmbeddedBroker, free_port
from sluiceway_server.rest.routes import ROUTES
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import wait_until
from tests.integration.rest_helpers import Http
from tests.readme_blocks import blocks_under

DATAGEN = "sluiceway_executor.connectors.datagen.DataGenSourceConnector"


@pytest.fixture(scope="module")
def rest_plane(broker: EmbeddedBroker) -> Iterator[tuple[ControlPlaneProcess, Http]]:
    port = free_port()
    plane = ControlPlaneProcess(
        broker, uuid.uuid4().hex[:8], settings={"rest.listeners": f"http://127.0.0.1:{port}"}
    ).start()
    yield plane, Http(f"http://127.0.0.1:{port}")
    plane.stop()


@pytest.fixture
def http(rest_plane: tuple[ControlPlaneProcess, Http]) -> Http:
    return rest_plane[1]


def datagen(topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "DataGenSource", "topic": topic, "tasks.max": "2", **extra}


def test_root_health_and_openapi(http: Http) -> None:
    root = http.get("/")
    assert root.status == 200
    assert set(root.body) == {"version", "commit", "kafka_cluster_id"}
    assert root.body["kafka_cluster_id"]
    health = http.get("/health")
    assert health.status == 200
    assert health.body["status"] == "healthy"
    document = http.get("/openapi.json")
    assert document.status == 200
    listed = {(method.upper(), path) for path, ops in document.body["paths"].items() for method in ops}
    assert listed == {(r.method, r.path) for r in ROUTES}
    # Every operation the served document lists is answered by a handler, not the router's 404/405.
    for path, operations in document.body["paths"].items():
        concrete = path.replace("{connector}", "no-such-connector").replace("{task}", "0")
        concrete = concrete.replace("{plugin}", "DataGenSourceConnector").replace("{logger}", "root")
        for method in operations:
            if method in ("put", "patch", "post", "delete") and "/connectors/" not in path:
                continue  # these would change the replica; their routes are exercised below
            answer = http.request(
                method.upper(), concrete, {} if method in ("put", "patch", "post") else None
            )
            assert answer.status != 405, (method, path)
            assert answer.body != {"error_code": 404, "message": "HTTP 404 Not Found"}, (method, path)
    create = document.body["paths"]["/connectors"]["post"]
    assert create["x-sluiceway-role"] == "admin"
    assert document.body["paths"]["/connectors/{connector}/pause"]["put"]["x-sluiceway-role"] == "operator"


def test_connector_lifecycle_as_kafka_connect_documents_it(http: Http, unique: str) -> None:
    name = f"rest-{unique}"
    created = http.post("/connectors", {"name": name, "config": datagen(f"t-{unique}")})
    assert created.status == 201, created.body
    assert created.headers["location"] == f"/connectors/{name}"
    assert created.body["name"] == name
    assert created.body["type"] == "source"
    assert created.body["config"]["name"] == name  # Kafka Connect keeps the name in the config

    again = http.post("/connectors", {"name": name, "config": datagen(f"t-{unique}")})
    assert again.status == 409
    assert again.body["error_code"] == 409
    assert again.body["reason"] == "CONNECTOR_ALREADY_EXISTS"

    assert name in http.get("/connectors").body
    info = http.get(f"/connectors/{name}")
    assert info.status == 200
    wait_until(lambda: len(http.get(f"/connectors/{name}").body["tasks"]) == 2, timeout=30)
    assert http.get(f"/connectors/{name}").body["tasks"] == [
        {"connector": name, "task": 0},
        {"connector": name, "task": 1},
    ]
    expanded = http.get("/connectors?expand=status&expand=info").body[name]
    assert expanded["info"]["config"]["topic"] == f"t-{unique}"
    assert expanded["status"]["name"] == name
    assert expanded["status"]["connector"]["state"] == "RUNNING"
    assert set(http.get("/connectors?expand=status").body[name]) == {"status"}

    status = http.get(f"/connectors/{name}/status")
    assert status.status == 200
    assert set(status.body) == {"name", "connector", "tasks", "type"}
    assert status.body["connector"]["worker_id"]

    tasks = http.get(f"/connectors/{name}/tasks").body
    assert [t["id"] for t in tasks] == [{"connector": name, "task": 0}, {"connector": name, "task": 1}]
    assert tasks[0]["config"]["task.class"]
    assert set(http.get(f"/connectors/{name}/tasks-config").body) == {f"{name}-0", f"{name}-1"}
    task = http.get(f"/connectors/{name}/tasks/0/status")
    assert task.status == 200
    assert task.body["id"] == 0
    assert task.body["state"] in {"UNASSIGNED", "RUNNING"}
    assert http.get(f"/connectors/{name}/tasks/7/status").status == 404
    assert http.get(f"/connectors/{name}/tasks/x/status").status == 404

    config = http.get(f"/connectors/{name}/config")
    assert config.body["topic"] == f"t-{unique}"
    replaced = http.put(f"/connectors/{name}/config", datagen(f"t-{unique}", **{"max.records": "5"}))
    assert replaced.status == 200
    assert replaced.body["config"]["max.records"] == "5"
    patched = http.patch(f"/connectors/{name}/config", {"max.records": None, "tasks.max": 1})
    assert patched.status == 200
    assert "max.records" not in patched.body["config"]
    assert patched.body["config"]["tasks.max"] == "1"

    assert http.put(f"/connectors/{name}/pause").status == 202
    wait_until(
        lambda: http.get(f"/connectors/{name}/status").body["connector"]["state"] == "PAUSED", timeout=30
    )
    assert http.put(f"/connectors/{name}/resume").status == 202
    wait_until(
        lambda: http.get(f"/connectors/{name}/status").body["connector"]["state"] == "RUNNING", timeout=30
    )

    assert http.post(f"/connectors/{name}/restart").status == 204
    restarted = http.post(f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false")
    assert restarted.status == 202
    assert restarted.body["name"] == name
    assert http.post(f"/connectors/{name}/restart?includeTasks=maybe").status == 400
    wait_until(lambda: http.post(f"/connectors/{name}/tasks/0/restart").status == 204, timeout=30)

    assert http.get(f"/connectors/{name}/topics").body == {name: {"topics": []}}
    assert http.put(f"/connectors/{name}/topics/reset").status == 202

    assert http.put(f"/connectors/{name}/stop").status == 204
    wait_until(
        lambda: http.get(f"/connectors/{name}/status").body["connector"]["state"] == "STOPPED", timeout=30
    )
    assert http.get(f"/connectors/{name}/offsets").body == {"offsets": []}
    offsets = {"offsets": [{"partition": {"task": 0}, "offset": {"seq": 30}}]}
    altered = http.patch(f"/connectors/{name}/offsets", offsets)
    assert altered.status == 200, altered.body
    assert altered.body["message"]
    assert http.get(f"/connectors/{name}/offsets").body == offsets
    reset = http.delete(f"/connectors/{name}/offsets")
    assert reset.status == 200
    assert reset.body["message"]
    assert http.get(f"/connectors/{name}/offsets").body == {"offsets": []}

    assert http.delete(f"/connectors/{name}").status == 204
    gone = http.get(f"/connectors/{name}")
    assert gone.status == 404
    assert gone.body["error_code"] == 404


def test_put_config_creates_with_201(http: Http, unique: str) -> None:
    name = f"put-{unique}"
    created = http.put(f"/connectors/{name}/config", datagen(f"t-{unique}"))
    assert created.status == 201
    assert created.headers["location"] == f"/connectors/{name}"
    assert http.delete(f"/connectors/{name}").status == 204


def test_initial_state_is_kept(http: Http, unique: str) -> None:
    name = f"stopped-{unique}"
    created = http.post("/connectors", {"name": name, "config": datagen("x"), "initial_state": "STOPPED"})
    assert created.status == 201
    wait_until(
        lambda: http.get(f"/connectors/{name}/status").body["connector"]["state"] == "STOPPED", timeout=30
    )
    assert http.delete(f"/connectors/{name}").status == 204


def test_plugins_config_and_validation(http: Http) -> None:
    connectors = http.get("/connector-plugins").body
    assert {"class": DATAGEN, "type": "source", "version": sluiceway.__version__} in connectors
    assert {p["type"] for p in connectors} <= {"source", "sink"}
    everything = http.get("/connector-plugins?connectorsOnly=false").body
    assert {"transformation", "predicate"} <= {p["type"] for p in everything}
    keys = http.get("/connector-plugins/DataGenSourceConnector/config")
    assert keys.status == 200
    by_name = {k["name"]: k for k in keys.body}
    assert by_name["tasks.max"]["type"] == "INT"
    assert {"name", "type", "required", "default_value", "importance", "documentation", "order"} <= set(
        by_name["tasks.max"]
    )
    assert http.get("/connector-plugins/NoSuchPlugin/config").status == 404

    # Kafka Connect counts a missing `name` as an error of the validation too.
    unnamed = http.put("/connector-plugins/DataGenSourceConnector/config/validate", datagen("v"))
    assert unnamed.status == 200
    assert unnamed.body["name"] == DATAGEN
    named = http.put("/connector-plugins/DataGenSourceConnector/config/validate", datagen("v", name="v"))
    assert named.body["error_count"] == 0, [c["value"] for c in named.body["configs"] if c["value"]["errors"]]
    assert [c["value"]["name"] for c in unnamed.body["configs"] if c["value"]["errors"]] == ["name"]
    bad = http.put(
        "/connector-plugins/DataGenSourceConnector/config/validate", datagen("v", **{"tasks.max": "zero"})
    )
    assert bad.status == 200
    assert bad.body["error_count"] >= 1
    failing = next(c for c in bad.body["configs"] if c["value"]["name"] == "tasks.max")
    assert failing["value"]["errors"]
    assert set(failing["definition"]) >= {"name", "type", "required", "importance", "order"}


def test_errors_read_like_kafka_connect(http: Http, unique: str) -> None:
    missing = http.get(f"/connectors/nothing-{unique}/status")
    assert missing.status == 404
    assert missing.body["error_code"] == 404
    assert missing.body["reason"] == "CONNECTOR_NOT_FOUND"
    assert http.get("/no/such/route").body == {"error_code": 404, "message": "HTTP 404 Not Found"}
    wrong_method = http.request("POST", "/connector-plugins")
    assert wrong_method.status == 405
    assert wrong_method.body["error_code"] == 405

    invalid = http.post(
        "/connectors", {"name": f"bad-{unique}", "config": {"connector.class": "NoSuchThing"}}
    )
    assert invalid.status == 400
    assert invalid.body["error_code"] == 400
    assert invalid.body["reason"] == "INVALID_CONFIG"
    assert "connector.class" in invalid.body["message"]
    assert http.get(f"/connectors/bad-{unique}").status == 404  # nothing was created

    not_json = http.request("POST", "/connectors", raw=b"{not json")
    assert not_json.status == 400
    assert "JSON" in not_json.body["message"]
    assert http.post("/connectors", {"config": datagen("x")}).status == 400
    mismatch = http.put(f"/connectors/a-{unique}/config", {**datagen("x"), "name": f"b-{unique}"})
    assert mismatch.status == 400
    assert http.get(f"/connectors/a-{unique}").status == 404
    assert http.put(f"/connectors/a-{unique}/config", {"tasks.max": ["1"]}).status == 400

    name = f"running-{unique}"
    assert http.post("/connectors", {"name": name, "config": datagen("x")}).status == 201
    not_stopped = http.patch(
        f"/connectors/{name}/offsets", {"offsets": [{"partition": {"a": 1}, "offset": None}]}
    )
    assert not_stopped.status == 400
    assert not_stopped.body["reason"] == "CONNECTOR_NOT_STOPPED"
    assert http.patch(f"/connectors/{name}/offsets", {"offsets": []}).status == 400
    assert http.delete(f"/connectors/{name}").status == 204


def test_the_readme_curl_examples_run_as_written(http: Http) -> None:
    """The README's REST section, run as a script would run it: each block in bash, stopping at the
    first command that fails (an HTTP error fails curl here), against this test's replica."""
    blocks = blocks_under("Kafka Connect REST API", "sh")
    assert len(blocks) >= 6
    outputs = []
    for block in blocks:
        script = block.text.replace("http://127.0.0.1:8084", http.base).replace(
            "curl -s ", "curl -sS --fail-with-body "
        )
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (block.text, done.stdout, done.stderr)
        outputs.append(done.stdout)
        if "/stop" in block.text:
            # Offsets change only once the connector's tasks have stopped.
            wait_until(
                lambda: http.get("/connectors/gen-rest/status").body["connector"]["state"] == "STOPPED",
                timeout=30,
            )
    created = _json_values(outputs[1])[0]
    assert created["name"] == "gen-rest"
    assert _json_values(outputs[0])[1]["status"] == "healthy"
    assert "were changed" in outputs[3]
    assert http.get("/connectors/gen-rest").status == 404


def _json_values(text: str) -> list[Any]:
    """The JSON bodies curl printed one after another (with no newline between them)."""
    decoder = json.JSONDecoder()
    values, position = [], 0
    while position < len(text.rstrip()):
        value, position = decoder.raw_decode(text, position)
        values.append(value)
        while position < len(text) and text[position].isspace():
            position += 1
    return values


def test_admin_loggers_set_this_replicas_levels(http: Http) -> None:
    listed = http.get("/admin/loggers")
    assert listed.status == 200
    assert "root" in listed.body
    assert set(listed.body["root"]) == {"level", "last_modified"}
    changed = http.put("/admin/loggers/sluiceway_server.rest", {"level": "DEBUG"})
    assert changed.status == 200, changed.body
    assert changed.body == ["sluiceway_server.rest"]
    one = http.get("/admin/loggers/sluiceway_server.rest").body
    assert one["level"] == "DEBUG"
    assert isinstance(one["last_modified"], int)
    assert http.get("/admin/loggers").body["sluiceway_server.rest"]["level"] == "DEBUG"
    assert http.put("/admin/loggers/sluiceway_server.rest", {"level": "INFO"}).status == 200
    bad = http.put("/admin/loggers/sluiceway_server.rest", {"level": "LOUD"})
    assert bad.status == 400
    assert "LOUD" in bad.body["message"]
    assert http.put("/admin/loggers/sluiceway_server.rest", {}).status == 400
    assert http.put("/admin/loggers/sluiceway_server.rest?scope=cluster", {"level": "DEBUG"}).status == 400
    assert http.get("/admin/loggers/sluiceway_server.rest").body["level"] == "INFO"  # unchanged
    missing = http.get("/admin/loggers/no.such.logger")
    assert missing.status == 404
    assert missing.body["reason"] == "LOGGER_NOT_FOUND"
