"""The Sluiceway client library: typed, retrying clients of the control plane's gRPC API.

    from sluiceway.client import SluicewayClient

    with SluicewayClient() as client:  # $SLUICEWAY_SERVER or localhost:8083
        client.create_connector("gen", {"connector.class": "DataGenSource", "topic": "t"})
        for connector in client.list_connectors(view="STATUS"):
            print(connector.name, connector.state)  # gen RUNNING

Connector, task and status methods return the objects of this package (`Connector`,
`ConnectorStatus`, `Task`...): bare names and enums that print their names, each with the API
message it came from in `raw`. Plugin, offset, topic and cluster methods return the generated
messages of `sluiceway.api.v1`. Failures raise `sluiceway.errors` exceptions.
`AsyncSluicewayClient` offers the same methods for asyncio. TLS, mutual TLS and a bearer token
come from a `TransportSecurity`, by default read from the SLUICEWAY_TLS* and SLUICEWAY_TOKEN*
environment variables. The config readers (`load_config_file`,
`parse_properties`...) accept what the CLI accepts: Kafka Connect JSON bodies and Java
`.properties` files.
"""

from sluiceway.client._aio import AsyncSluicewayClient
from sluiceway.client._base import DEFAULT_TARGET, DEFAULT_TIMEOUT, TARGET_ENV, resolve_target
from sluiceway.client._config_input import (
    ConfigFile,
    ConfigInputError,
    format_properties,
    load_config_file,
    load_offsets_file,
    parse_config_json,
    parse_key_values,
    parse_offsets_json,
    parse_properties,
)
from sluiceway.client._names import connector_id, connector_name, parse_task_name, plugin_name, task_name
from sluiceway.client._objects import (
    Connector,
    ConnectorPage,
    ConnectorStatus,
    ConnectorType,
    ErrorEvent,
    Generation,
    InstanceStatus,
    Notice,
    State,
    StatusEvent,
    TargetState,
    Task,
    TaskStatus,
)
from sluiceway.client._requests import ConfigMapping, ConfigValue, OffsetLike
from sluiceway.client._retry import Retrier, RetryPolicy
from sluiceway.client._sync import SluicewayClient
from sluiceway.common.transport import TransportSecurity

__all__ = [
    "DEFAULT_TARGET",
    "DEFAULT_TIMEOUT",
    "TARGET_ENV",
    "AsyncSluicewayClient",
    "ConfigFile",
    "ConfigInputError",
    "ConfigMapping",
    "ConfigValue",
    "Connector",
    "ConnectorPage",
    "ConnectorStatus",
    "ConnectorType",
    "ErrorEvent",
    "Generation",
    "InstanceStatus",
    "Notice",
    "OffsetLike",
    "Retrier",
    "RetryPolicy",
    "SluicewayClient",
    "State",
    "StatusEvent",
    "TargetState",
    "Task",
    "TaskStatus",
    "TransportSecurity",
    "connector_id",
    "connector_name",
    "format_properties",
    "load_config_file",
    "load_offsets_file",
    "parse_config_json",
    "parse_key_values",
    "parse_offsets_json",
    "parse_properties",
    "parse_task_name",
    "plugin_name",
    "resolve_target",
    "task_name",
]
