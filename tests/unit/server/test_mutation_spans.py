"""What a mutation's span says about the call (api/tracing.py): the RPC, and the connector and task
read from the request, whether it arrives as a message or, being forwarded, as bytes."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from sluiceway.api.v1 import connectors_pb2
from sluiceway_server.api.tracing import TracingInterceptor, mutation_attributes

RESTART_TASK = "/sluiceway.api.v1.ConnectorService/RestartTask"
CREATE = "/sluiceway.api.v1.ConnectorService/CreateConnector"


def test_the_task_of_a_message() -> None:
    request = connectors_pb2.RestartTaskRequest(name="connectors/orders/tasks/3")
    assert mutation_attributes(RESTART_TASK, request) == {
        "rpc.system": "grpc",
        "rpc.service": "sluiceway.api.v1.ConnectorService",
        "rpc.method": "RestartTask",
        "sluiceway.connector": "orders",
        "sluiceway.task": 3,
    }


def test_the_connector_of_forwarded_bytes() -> None:
    request = connectors_pb2.CreateConnectorRequest(connector_id="orders").SerializeToString()
    assert mutation_attributes(CREATE, request)["sluiceway.connector"] == "orders"


def test_bytes_that_are_no_request_give_the_rpc_only() -> None:
    assert mutation_attributes(CREATE, b"\xff\xff\xff") == {
        "rpc.system": "grpc",
        "rpc.service": "sluiceway.api.v1.ConnectorService",
        "rpc.method": "CreateConnector",
    }


def test_handlers_pass_untouched_while_tracing_is_off() -> None:
    handler: Any = grpc.unary_unary_rpc_method_handler(lambda request, context: request)

    async def continuation(details: grpc.HandlerCallDetails) -> Any:
        return handler

    class Details(grpc.HandlerCallDetails):
        method = CREATE
        invocation_metadata = ()

    intercepted = asyncio.run(TracingInterceptor().intercept_service(continuation, Details()))
    assert intercepted is handler
