"""The REST layer's translation of our messages into Kafka Connect's bodies, and of failures into
its status codes, without a server."""

from __future__ import annotations

import json

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2, offsets_pb2, plugins_pb2
from sluiceway.errors import NOT_RETURNED, FieldViolation, InvalidArgumentError, NotFoundError, Reason
from sluiceway_server.rest import kafka_json
from sluiceway_server.rest.errors import HTTP_STATUS_BY_REASON, RestError, error_response, http_status


def test_every_reason_the_server_sends_has_an_http_status() -> None:
    sent = {r for r in Reason if r is not Reason.ERROR_REASON_UNSPECIFIED} - NOT_RETURNED
    assert set(HTTP_STATUS_BY_REASON) == sent


def test_kafka_connects_status_codes_for_its_documented_failures() -> None:
    assert http_status(NotFoundError("x", reason=Reason.CONNECTOR_NOT_FOUND)) == 404
    assert http_status(InvalidArgumentError("x", reason=Reason.INVALID_CONFIG)) == 400
    assert HTTP_STATUS_BY_REASON[Reason.CONNECTOR_ALREADY_EXISTS] == 409
    assert HTTP_STATUS_BY_REASON[Reason.NOT_AUTHORIZED] == 403
    assert HTTP_STATUS_BY_REASON[Reason.UNAUTHENTICATED] == 401
    # No reason of ours: the gRPC code decides.
    assert http_status(InvalidArgumentError("x", code=grpc.StatusCode.INVALID_ARGUMENT)) == 400


def test_an_invalid_config_lists_each_key_in_the_message() -> None:
    error = InvalidArgumentError(
        "Config of connector 'c' has 2 error(s)",
        reason=Reason.INVALID_CONFIG,
        field_violations=[
            FieldViolation("tasks.max", "must be at least 1"),
            FieldViolation("topic", "missing"),
        ],
    )
    response = error_response(error)
    assert response.status == 400
    assert response.text is not None
    body = json.loads(response.text)
    assert body["error_code"] == 400
    assert body["reason"] == "INVALID_CONFIG"
    assert "tasks.max: must be at least 1" in body["message"]
    assert "topic: missing" in body["message"]
    refused = error_response(RestError(405, "HTTP 405 Method Not Allowed"))
    assert refused.text is not None
    assert json.loads(refused.text) == {"error_code": 405, "message": "HTTP 405 Method Not Allowed"}


def test_connector_info_and_status_bodies() -> None:
    connector = connectors_pb2.Connector(
        name="connectors/c",
        config={"connector.class": "X"},
        type=common_pb2.CONNECTOR_TYPE_SINK,
        tasks=["connectors/c/tasks/0", "connectors/c/tasks/1"],
    )
    assert kafka_json.connector_info(connector) == {
        "name": "c",
        "config": {"connector.class": "X"},
        "tasks": [{"connector": "c", "task": 0}, {"connector": "c", "task": 1}],
        "type": "sink",
    }
    status = connectors_pb2.ConnectorStatus(
        name="connectors/c",
        type=common_pb2.CONNECTOR_TYPE_SOURCE,
        connector=connectors_pb2.InstanceStatus(state=common_pb2.STATE_RUNNING, worker_id="cp:8083"),
        tasks=[
            connectors_pb2.TaskStatus(
                id=1,
                status=connectors_pb2.InstanceStatus(
                    state=common_pb2.STATE_FAILED, worker_id="e1", trace="boom"
                ),
            ),
            connectors_pb2.TaskStatus(
                id=0, status=connectors_pb2.InstanceStatus(state=common_pb2.STATE_UNASSIGNED)
            ),
        ],
    )
    assert kafka_json.connector_state_info(status) == {
        "name": "c",
        "connector": {"state": "RUNNING", "worker_id": "cp:8083"},
        "tasks": [
            {"id": 0, "state": "UNASSIGNED", "worker_id": ""},
            {"id": 1, "state": "FAILED", "worker_id": "e1", "trace": "boom"},
        ],
        "type": "source",
    }


def test_plugin_and_config_key_bodies() -> None:
    plugin = plugins_pb2.Plugin(class_name="a.B", type=plugins_pb2.PLUGIN_TYPE_TRANSFORMATION)
    assert kafka_json.plugin_info(plugin) == {"class": "a.B", "type": "transformation"}
    key = plugins_pb2.ConfigKeyDefinition(
        name="tasks.max",
        type=plugins_pb2.CONFIG_TYPE_INT,
        default_value="1",
        importance=plugins_pb2.IMPORTANCE_HIGH,
    )
    info = kafka_json.config_key_info(key)
    assert (info["type"], info["importance"], info["default_value"], info["order"]) == ("INT", "HIGH", "1", 0)
    assert kafka_json.config_key_info(plugins_pb2.ConfigKeyDefinition(name="x"))["default_value"] is None


def test_offsets_round_trip_and_bad_offsets() -> None:
    body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": None},
        ]
    }
    parsed = kafka_json.offsets_request(body)
    assert kafka_json.connector_offsets(offsets_pb2.ConnectorOffsets(offsets=parsed)) == body
    bad: object
    for bad in (
        {},
        {"offsets": []},
        {"offsets": [{"offset": None}]},
        {"offsets": [{"partition": {"a": [1]}}]},
    ):
        with pytest.raises(kafka_json.BodyError):
            kafka_json.offsets_request(bad)


def test_config_bodies_take_jsons_scalars_as_text() -> None:
    assert kafka_json.config_object({"tasks.max": 2, "enabled": True, "topic": "t"}) == {
        "tasks.max": "2",
        "enabled": "true",
        "topic": "t",
    }
    assert kafka_json.patch_object({"a": "1", "b": None}) == ({"a": "1"}, ["b"])
    bad_config: object
    for bad_config in ([], {"a": None}, {"a": {"nested": 1}}):
        with pytest.raises(kafka_json.BodyError):
            kafka_json.config_object(bad_config)
    assert kafka_json.initial_state("paused") == connectors_pb2.INITIAL_STATE_PAUSED
    with pytest.raises(kafka_json.BodyError):
        kafka_json.initial_state("SLEEPING")
