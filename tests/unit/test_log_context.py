"""Log lines carry the connector, task and batch they were written for as JSON fields of their own
(sluiceway.common.log_context), from a thread's binding or a block's, and the API sets them from the
request's resource name."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from sluiceway.api.v1 import connectors_pb2, offsets_pb2
from sluiceway.common.log_context import LogContextFilter, bind_log_fields, log_fields
from sluiceway.common.logging_setup import JsonFormatter, RedactingFilter
from sluiceway_server.api.errors import request_log_fields


@pytest.fixture
def lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(LogContextFilter())
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test.log_context")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def _entries(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_threads_fields_and_a_blocks(lines: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = lines

    def runner() -> None:
        bind_log_fields(connector="orders", task=1)
        logger.info("started")
        bind_log_fields(batch=7)
        logger.info("batch done")
        with log_fields(batch=None, note="x"):
            logger.info("between batches")
        logger.info("after", extra={"task": 9})  # what the call gives wins

    thread = threading.Thread(target=runner)
    thread.start()
    thread.join()
    logger.info("elsewhere")  # another thread: none of them
    started, batch, between, after, elsewhere = _entries(out)
    assert (started["connector"], started["task"], "batch" in started) == ("orders", 1, False)
    assert (batch["task"], batch["batch"]) == (1, 7)
    assert "batch" not in between and between["note"] == "x"
    assert (after["task"], after["batch"]) == (9, 7)
    assert "connector" not in elsewhere


def test_the_api_names_the_connector_and_task_of_a_request() -> None:
    assert request_log_fields(connectors_pb2.GetConnectorRequest(name="connectors/orders")) == {
        "connector": "orders"
    }
    assert request_log_fields(connectors_pb2.RestartTaskRequest(name="connectors/orders/tasks/2")) == {
        "connector": "orders",
        "task": 2,
    }
    assert request_log_fields(connectors_pb2.CreateConnectorRequest(connector_id="new")) == {
        "connector": "new"
    }
    assert request_log_fields(connectors_pb2.ListTasksRequest(parent="connectors/orders")) == {
        "connector": "orders"
    }
    assert request_log_fields(offsets_pb2.GetConnectorOffsetsRequest(name="connectors/orders")) == {
        "connector": "orders"
    }
    assert request_log_fields(connectors_pb2.ListConnectorsRequest()) == {}
    # Not a task number: the connector alone (the API then refuses the name itself).
    assert request_log_fields(connectors_pb2.RestartTaskRequest(name="connectors/orders/tasks/\u00b2")) == {
        "connector": "orders"
    }
    assert request_log_fields(connectors_pb2.GetConnectorRequest(name="plugins/x")) == {}
