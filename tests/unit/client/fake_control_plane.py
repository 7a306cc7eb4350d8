"""A small in-memory control plane served by a real grpc.server on a loopback port, for the
client and CLI unit tests. It follows the API's contract (names, views, paging, error codes
with ErrorInfo / BadRequest / RetryInfo) closely enough to exercise the client, records every
attempt it sees, and can be told to fail calls."""

# The servicer methods are named by the proto's RPCs.
# ruff: noqa: N802

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf import duration_pb2, empty_pb2, timestamp_pb2
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from sluiceway.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    common_pb2,
    connectors_pb2,
    connectors_pb2_grpc,
    offsets_pb2,
    offsets_pb2_grpc,
    plugins_pb2,
    plugins_pb2_grpc,
    topics_pb2,
    topics_pb2_grpc,
)
from sluiceway.common.offsets import offsets_to_proto

DATAGEN = "io.sluiceway.connectors.DataGenSourceConnector"
FILESINK = "io.sluiceway.connectors.FileStreamSinkConnector"
LEADER_EPOCH = 2
# What an executor reports for a task whose Spark job failed in a Python worker: the worker's own
# traceback is embedded in the Spark error, after the executor's frames.
FAILED_TASK_TRACE = """Traceback (most recent call last):
  File "/opt/sluiceway/executor/runner.py", line 177, in _run
    self._loop(pipeline)
pyspark.errors.exceptions.connect.PythonException:
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/opt/sluiceway/executor/datasources/kafka.py", line 301, in write
    raise KafkaDeliveryError(topic, error)
KafkaDeliveryError: delivery to topic orders failed: Broker: Leader not available
"""


def rich_status(
    code: grpc.StatusCode,
    message: str,
    reason: str | None = None,
    *,
    metadata: dict[str, str] | None = None,
    violations: list[tuple[str, str]] | None = None,
    retry_delay: float | None = None,
) -> grpc.Status:
    """A grpc.Status carrying a google.rpc.Status with our error details."""
    status = status_pb2.Status(code=code.value[0], message=message)
    if reason is not None:
        info = error_details_pb2.ErrorInfo(reason=reason, domain="sluiceway", metadata=metadata or {})
        status.details.add().Pack(info)
    if violations:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=f, description=d) for f, d in violations
            ]
        )
        status.details.add().Pack(bad)
    if retry_delay is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(retry_delay * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    result: grpc.Status = rpc_status.to_status(status)
    return result


@dataclasses.dataclass
class Attempt:
    """One call as the server saw it."""

    method: str
    request: Any
    time_remaining: float | None
    metadata: dict[str, str]


@dataclasses.dataclass
class Failure:
    status: grpc.Status
    times: int
    # Sleep this long before failing (to exercise client deadlines).
    delay: float = 0.0


@dataclasses.dataclass
class StoredConnector:
    config: dict[str, str]
    target: common_pb2.TargetState.ValueType
    tasks: list[dict[str, str]]
    offsets: list[common_pb2.PartitionOffset] = dataclasses.field(default_factory=list)
    topics: set[str] = dataclasses.field(default_factory=set)
    failed_task: int | None = None


def _type_of(config: dict[str, str]) -> common_pb2.ConnectorType.ValueType:
    return (
        common_pb2.CONNECTOR_TYPE_SINK
        if "Sink" in config.get("connector.class", "")
        else common_pb2.CONNECTOR_TYPE_SOURCE
    )


class FakeControlPlane:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connectors: dict[str, StoredConnector] = {}
        self.attempts: list[Attempt] = []
        self.failures: dict[str, Failure] = {}
        # Results kept per request_id, like the real server's idempotency cache.
        self.results_by_request_id: dict[str, Any] = {}
        self.watch_events: list[connectors_pb2.StatusEvent] = []
        self.watch_fail_after_first = False
        self.position = 0
        # Active topics still recorded for connectors that were deleted.
        self.deleted_topics: dict[str, set[str]] = {}

    # --- test controls ---------------------------------------------------------------------

    def fail(self, method: str, status: grpc.Status, times: int = 1, delay: float = 0.0) -> None:
        self.failures[method] = Failure(status, times, delay)

    def attempts_of(self, method: str) -> list[Attempt]:
        return [a for a in self.attempts if a.method == method]

    def add_connector(
        self,
        name: str,
        config: dict[str, str] | None = None,
        *,
        tasks: int = 1,
        target: common_pb2.TargetState.ValueType = common_pb2.TARGET_STATE_RUNNING,
        failed_task: int | None = None,
    ) -> None:
        cfg = dict(config or {"connector.class": DATAGEN, "topic": f"{name}-topic", "tasks.max": str(tasks)})
        self.connectors[name] = StoredConnector(
            config=cfg,
            target=target,
            tasks=[{**cfg, "task.id": str(i)} for i in range(tasks)],
            failed_task=failed_task,
        )

    # --- plumbing --------------------------------------------------------------------------

    def enter(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        """Records the attempt and applies an injected failure."""
        remaining = context.time_remaining()
        metadata = {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}
        with self.lock:
            self.attempts.append(Attempt(method, request, remaining, metadata))
            failure = self.failures.get(method)
            if failure is not None and failure.times > 0:
                failure.times -= 1
            else:
                failure = None
        if failure is not None:
            if failure.delay:
                time.sleep(failure.delay)
            context.abort_with_status(failure.status)

    def abort(self, context: grpc.ServicerContext, status: grpc.Status) -> None:
        context.abort_with_status(status)

    def lookup(self, name: str, context: grpc.ServicerContext) -> tuple[str, StoredConnector]:
        connector = name.removeprefix("connectors/")
        stored = self.connectors.get(connector)
        if stored is None:
            self.abort(
                context,
                rich_status(
                    grpc.StatusCode.NOT_FOUND,
                    f"Connector {connector} not found",
                    "CONNECTOR_NOT_FOUND",
                    metadata={"connector": connector},
                ),
            )
            raise AssertionError("unreachable")
        return connector, stored

    def status_of(self, connector: str, stored: StoredConnector) -> connectors_pb2.ConnectorStatus:
        state = {
            common_pb2.TARGET_STATE_RUNNING: common_pb2.STATE_RUNNING,
            common_pb2.TARGET_STATE_PAUSED: common_pb2.STATE_PAUSED,
            common_pb2.TARGET_STATE_STOPPED: common_pb2.STATE_STOPPED,
        }[stored.target]
        updated = timestamp_pb2.Timestamp(seconds=1_700_000_000)
        status = connectors_pb2.ConnectorStatus(
            name=f"connectors/{connector}",
            type=_type_of(stored.config),
            connector=connectors_pb2.InstanceStatus(
                state=state, worker_id="replica-1", generation=LEADER_EPOCH, update_time=updated
            ),
        )
        for index in range(len(stored.tasks)):
            task_state = state
            trace = ""
            if stored.failed_task == index:
                task_state = common_pb2.STATE_FAILED
                trace = FAILED_TASK_TRACE
            task = status.tasks.add(
                name=f"connectors/{connector}/tasks/{index}",
                id=index,
                status=connectors_pb2.InstanceStatus(
                    state=task_state,
                    worker_id="executor-1",
                    generation=(LEADER_EPOCH << 32) | (index + 1),
                    trace=trace,
                    update_time=updated,
                ),
            )
            if task_state == common_pb2.STATE_RUNNING:
                # As an executor measures it: a sink's lag; a rate over the last minute.
                task.progress.records_per_second = 1234.4 if index == 0 else 2.25
                if index == 0:
                    task.progress.lag = 25_000
        return status

    def view(
        self, connector: str, stored: StoredConnector, view: connectors_pb2.ConnectorView.ValueType
    ) -> connectors_pb2.Connector:
        result = connectors_pb2.Connector(name=f"connectors/{connector}", config_position=self.position)
        if view in (connectors_pb2.CONNECTOR_VIEW_INFO, connectors_pb2.CONNECTOR_VIEW_FULL):
            masked = {k: ("[hidden]" if "password" in k else v) for k, v in stored.config.items()}
            result.config.update(masked)
            result.type = _type_of(stored.config)
            result.tasks.extend(f"connectors/{connector}/tasks/{i}" for i in range(len(stored.tasks)))
            result.target_state = stored.target
        if view in (connectors_pb2.CONNECTOR_VIEW_STATUS, connectors_pb2.CONNECTOR_VIEW_FULL):
            result.type = _type_of(stored.config)
            result.status.CopyFrom(self.status_of(connector, stored))
        return result

    def validate(
        self, name: str, config: dict[str, str], context: grpc.ServicerContext, field: str = "config"
    ) -> None:
        missing = "no value given, and this key has no default"
        problems = []
        if "connector.class" not in config:
            problems.append(("connector.class", missing))  # field paths as the server names them
        elif config["connector.class"] in (DATAGEN, "DataGenSource") and "topic" not in config:
            problems.append(("topic", missing))
        if problems:
            summary = "; ".join(f"{key}: {problem}" for key, problem in problems)
            violations = [(f'{field}["{key}"]', problem) for key, problem in problems]
            self.abort(
                context,
                rich_status(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Config of connector {name} has {len(problems)} error(s): {summary}",
                    "INVALID_CONFIG",
                    metadata={"connector": name, "config_keys": ",".join(sorted(k for k, _ in problems))},
                    violations=violations,
                ),
            )

    def idempotent(self, request_id: str, produce: Any) -> Any:
        if request_id and request_id in self.results_by_request_id:
            return self.results_by_request_id[request_id]
        result = produce()
        if request_id:
            self.results_by_request_id[request_id] = result
        return result


class ConnectorServicer(connectors_pb2_grpc.ConnectorServiceServicer):
    def __init__(self, fake: FakeControlPlane) -> None:
        self.fake = fake

    def CreateConnector(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("CreateConnector", request, context)
        config = dict(request.connector.config)
        fake.validate(request.connector_id, config, context, "connector.config")

        def produce() -> connectors_pb2.Connector:
            if request.connector_id in fake.connectors:
                fake.abort(
                    context,
                    rich_status(
                        grpc.StatusCode.ALREADY_EXISTS,
                        f"Connector {request.connector_id} already exists",
                        "CONNECTOR_ALREADY_EXISTS",
                    ),
                )
            target = {
                connectors_pb2.INITIAL_STATE_PAUSED: common_pb2.TARGET_STATE_PAUSED,
                connectors_pb2.INITIAL_STATE_STOPPED: common_pb2.TARGET_STATE_STOPPED,
            }.get(request.initial_state, common_pb2.TARGET_STATE_RUNNING)
            if request.validate_only:
                stored = StoredConnector(config=config, target=target, tasks=[])
            else:
                fake.add_connector(request.connector_id, config, tasks=int(config.get("tasks.max", "1")))
                stored = fake.connectors[request.connector_id]
                stored.target = target
                fake.position += 1
            return fake.view(request.connector_id, stored, connectors_pb2.CONNECTOR_VIEW_INFO)

        return fake.idempotent(request.request_id, produce)

    def GetConnector(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetConnector", request, context)
        connector, stored = self.fake.lookup(request.name, context)
        return self.fake.view(connector, stored, request.view or connectors_pb2.CONNECTOR_VIEW_INFO)

    def ListConnectors(self, request: Any, context: Any) -> Any:
        self.fake.enter("ListConnectors", request, context)
        names = sorted(self.fake.connectors)
        start = int(request.page_token or 0)
        size = request.page_size or 100
        page = names[start : start + size]
        response = connectors_pb2.ListConnectorsResponse(
            connectors=[
                self.fake.view(
                    n, self.fake.connectors[n], request.view or connectors_pb2.CONNECTOR_VIEW_NAMES
                )
                for n in page
            ]
        )
        if start + size < len(names):
            response.next_page_token = str(start + size)
        return response

    def ReplaceConnectorConfig(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("ReplaceConnectorConfig", request, context)
        connector = request.name.removeprefix("connectors/")
        config = dict(request.config)
        fake.validate(connector, config, context)
        created = connector not in fake.connectors
        if created:
            fake.add_connector(connector, config)
        else:
            fake.connectors[connector].config = config
        fake.position += 1
        return connectors_pb2.ReplaceConnectorConfigResponse(
            connector=fake.view(connector, fake.connectors[connector], connectors_pb2.CONNECTOR_VIEW_INFO),
            created=created,
        )

    def PatchConnectorConfig(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("PatchConnectorConfig", request, context)
        connector, stored = fake.lookup(request.name, context)
        stored.config.update(request.set)
        for key in request.remove:
            stored.config.pop(key, None)
        return fake.view(connector, stored, connectors_pb2.CONNECTOR_VIEW_INFO)

    def DeleteConnector(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("DeleteConnector", request, context)
        connector, _ = fake.lookup(request.name, context)
        del fake.connectors[connector]
        outcome = (
            connectors_pb2.DeletedCallback.OUTCOME_SUCCEEDED
            if request.wait
            else connectors_pb2.DeletedCallback.OUTCOME_PENDING
        )
        return connectors_pb2.DeleteConnectorResponse(
            deleted_callback=connectors_pb2.DeletedCallback(outcome=outcome)
        )

    def _target(self, method: str, request: Any, context: Any, target: Any) -> Any:
        fake = self.fake
        fake.enter(method, request, context)
        connector, stored = fake.lookup(request.name, context)
        stored.target = target
        return fake.view(connector, stored, connectors_pb2.CONNECTOR_VIEW_INFO)

    def PauseConnector(self, request: Any, context: Any) -> Any:
        return self._target("PauseConnector", request, context, common_pb2.TARGET_STATE_PAUSED)

    def ResumeConnector(self, request: Any, context: Any) -> Any:
        return self._target("ResumeConnector", request, context, common_pb2.TARGET_STATE_RUNNING)

    def StopConnector(self, request: Any, context: Any) -> Any:
        return self._target("StopConnector", request, context, common_pb2.TARGET_STATE_STOPPED)

    def RestartConnector(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("RestartConnector", request, context)
        connector, stored = fake.lookup(request.name, context)
        status = fake.status_of(connector, stored)
        if not request.only_failed or status.connector.state == common_pb2.STATE_FAILED:
            status.connector.state = common_pb2.STATE_RESTARTING
        if request.include_tasks:
            for task in status.tasks:
                if not request.only_failed or task.status.state == common_pb2.STATE_FAILED:
                    task.status.state = common_pb2.STATE_RESTARTING
        return status

    def ListTasks(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("ListTasks", request, context)
        connector, stored = fake.lookup(request.parent, context)
        return connectors_pb2.ListTasksResponse(
            tasks=[
                connectors_pb2.Task(name=f"connectors/{connector}/tasks/{i}", config=cfg)
                for i, cfg in enumerate(stored.tasks)
            ]
        )

    def GetConnectorStatus(self, request: Any, context: Any) -> Any:
        fake = self.fake
        fake.enter("GetConnectorStatus", request, context)
        connector, stored = fake.lookup(request.name, context)
        return fake.status_of(connector, stored)

    def _task(self, name: str, context: Any) -> tuple[str, StoredConnector, int]:
        head, _, number = name.rpartition("/tasks/")
        connector, stored = self.fake.lookup(head, context)
        index = int(number)
        if index >= len(stored.tasks):
            self.fake.abort(
                context,
                rich_status(grpc.StatusCode.NOT_FOUND, f"Task {name} not found", "TASK_NOT_FOUND"),
            )
        return connector, stored, index

    def GetTaskStatus(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetTaskStatus", request, context)
        connector, stored, index = self._task(request.name, context)
        return self.fake.status_of(connector, stored).tasks[index]

    def RestartTask(self, request: Any, context: Any) -> Any:
        self.fake.enter("RestartTask", request, context)
        self._task(request.name, context)
        return empty_pb2.Empty()

    def WatchStatus(self, request: Any, context: Any) -> Iterator[Any]:
        fake = self.fake
        fake.enter("WatchStatus", request, context)
        events: list[connectors_pb2.StatusEvent] = []
        if request.include_initial:
            for connector, stored in sorted(fake.connectors.items()):
                if request.name and request.name != f"connectors/{connector}":
                    continue
                status = fake.status_of(connector, stored)
                events.append(connectors_pb2.StatusEvent(name=status.name, status=status.connector))
                events.extend(connectors_pb2.StatusEvent(name=t.name, status=t.status) for t in status.tasks)
        events.extend(fake.watch_events)
        for index, event in enumerate(events):
            yield event
            if index == 0 and fake.watch_fail_after_first:
                context.abort_with_status(
                    rich_status(grpc.StatusCode.UNAVAILABLE, "replica shutting down", "STORAGE_UNAVAILABLE")
                )


class PluginServicer(plugins_pb2_grpc.PluginServiceServicer):
    PLUGINS = [
        plugins_pb2.Plugin(
            name=f"plugins/{DATAGEN}",
            class_name=DATAGEN,
            type=plugins_pb2.PLUGIN_TYPE_SOURCE_CONNECTOR,
            version="0.1.0",
            aliases=["DataGenSource", "DataGenSourceConnector"],
        ),
        plugins_pb2.Plugin(
            name=f"plugins/{FILESINK}",
            class_name=FILESINK,
            type=plugins_pb2.PLUGIN_TYPE_SINK_CONNECTOR,
            version="0.1.0",
            aliases=["FileStreamSink"],
        ),
    ]
    CONVERTER = plugins_pb2.Plugin(
        name="plugins/io.sluiceway.converters.JsonConverter",
        class_name="io.sluiceway.converters.JsonConverter",
        type=plugins_pb2.PLUGIN_TYPE_CONVERTER,
        version="0.1.0",
    )

    def __init__(self, fake: FakeControlPlane) -> None:
        self.fake = fake

    def ListPlugins(self, request: Any, context: Any) -> Any:
        self.fake.enter("ListPlugins", request, context)
        plugins = list(self.PLUGINS) + ([self.CONVERTER] if request.include_all_types else [])
        return plugins_pb2.ListPluginsResponse(plugins=plugins)

    def _plugin(self, name: str, context: Any) -> plugins_pb2.Plugin:
        bare = name.removeprefix("plugins/")
        for plugin in self.PLUGINS:
            if bare == plugin.class_name or bare in plugin.aliases:
                return plugin
        self.fake.abort(
            context, rich_status(grpc.StatusCode.NOT_FOUND, f"Plugin {bare} not found", "PLUGIN_NOT_FOUND")
        )
        raise AssertionError("unreachable")

    def GetPluginConfigDefinition(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetPluginConfigDefinition", request, context)
        plugin = self._plugin(request.name, context)
        return plugins_pb2.PluginConfigDefinition(
            plugin=plugin,
            keys=[
                plugins_pb2.ConfigKeyDefinition(
                    name="topic",
                    type=plugins_pb2.CONFIG_TYPE_STRING,
                    required=True,
                    importance=plugins_pb2.IMPORTANCE_HIGH,
                    documentation="The topic to write to.\nSecond line.",
                ),
                plugins_pb2.ConfigKeyDefinition(
                    name="max.records",
                    type=plugins_pb2.CONFIG_TYPE_LONG,
                    default_value="-1",
                    importance=plugins_pb2.IMPORTANCE_MEDIUM,
                    documentation="Records per task; then the task idles.",
                ),
            ],
        )

    def ValidateConnectorConfig(self, request: Any, context: Any) -> Any:
        self.fake.enter("ValidateConnectorConfig", request, context)
        plugin = self._plugin(request.plugin or request.config.get("connector.class", ""), context)
        response = plugins_pb2.ValidateConnectorConfigResponse(plugin_class_name=plugin.class_name)
        topic = response.configs.add()
        topic.definition.name = "topic"
        topic.value.name = "topic"
        if "topic" in request.config:
            topic.value.value = request.config["topic"]
        else:
            topic.value.errors.append("topic: no value given, and this key has no default")
        response.error_count = sum(len(c.value.errors) for c in response.configs)
        return response


class OffsetServicer(offsets_pb2_grpc.OffsetServiceServicer):
    def __init__(self, fake: FakeControlPlane) -> None:
        self.fake = fake

    def _stopped(self, connector: str, stored: StoredConnector, context: Any) -> None:
        if stored.target != common_pb2.TARGET_STATE_STOPPED:
            state = common_pb2.TargetState.Name(stored.target).removeprefix("TARGET_STATE_")
            self.fake.abort(
                context,
                rich_status(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"Connector {connector} is {state}; offsets "
                    f"change only while it is stopped: run `sluiceway connectors stop {connector}` first",
                    "CONNECTOR_NOT_STOPPED",
                ),
            )

    def GetConnectorOffsets(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetConnectorOffsets", request, context)
        connector, stored = self.fake.lookup(request.name, context)
        return offsets_pb2.ConnectorOffsets(name=f"connectors/{connector}", offsets=stored.offsets)

    def AlterConnectorOffsets(self, request: Any, context: Any) -> Any:
        self.fake.enter("AlterConnectorOffsets", request, context)
        connector, stored = self.fake.lookup(request.name, context)
        self._stopped(connector, stored, context)
        for item in request.offsets:
            stored.offsets = [o for o in stored.offsets if o.partition != item.partition]
            if item.HasField("offset"):
                stored.offsets.append(item)
        return offsets_pb2.AlterConnectorOffsetsResponse(
            message=f"Offsets of connector {connector} altered; the connector acknowledged the change",
            connector_acknowledged=True,
        )

    def ResetConnectorOffsets(self, request: Any, context: Any) -> Any:
        self.fake.enter("ResetConnectorOffsets", request, context)
        connector, stored = self.fake.lookup(request.name, context)
        self._stopped(connector, stored, context)
        stored.offsets = []
        return offsets_pb2.ResetConnectorOffsetsResponse(message="offsets reset", connector_acknowledged=True)


class TopicServicer(topics_pb2_grpc.TopicServiceServicer):
    def __init__(self, fake: FakeControlPlane) -> None:
        self.fake = fake

    def GetActiveTopics(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetActiveTopics", request, context)
        deleted = request.name.removeprefix("connectors/")
        if deleted in self.fake.deleted_topics:
            return topics_pb2.ActiveTopics(
                name=request.name, topics=sorted(self.fake.deleted_topics[deleted]), connector_exists=False
            )
        connector, stored = self.fake.lookup(request.name, context)
        return topics_pb2.ActiveTopics(
            name=f"connectors/{connector}", topics=sorted(stored.topics), connector_exists=True
        )

    def ResetActiveTopics(self, request: Any, context: Any) -> Any:
        self.fake.enter("ResetActiveTopics", request, context)
        _, stored = self.fake.lookup(request.name, context)
        removed = sorted(stored.topics)
        stored.topics.clear()
        return topics_pb2.ResetActiveTopicsResponse(
            name=request.name, removed_topics=removed, connector_exists=True
        )


class ClusterServicer(cluster_pb2_grpc.ClusterServiceServicer):
    def __init__(self, fake: FakeControlPlane) -> None:
        self.fake = fake

    # The log-level calls are not part of what these tests exercise.
    def ListLoggers(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def GetLogger(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def SetLoggerLevel(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "not in this fake")

    def GetServerInfo(self, request: Any, context: Any) -> Any:
        self.fake.enter("GetServerInfo", request, context)
        leader = cluster_pb2.Member(
            id="replica-1", advertised_address="10.0.0.1:8083", leader_epoch=4, leader=True
        )
        follower = cluster_pb2.Member(id="replica-2", advertised_address="10.0.0.2:8083")
        return cluster_pb2.ServerInfo(
            version="0.1.0",
            commit="abc123",
            kafka_cluster_id="kafka-cluster-1",
            group_id="sluiceway",
            this_replica=follower,
            leader=leader,
            members=[leader, follower],
            executors=[
                cluster_pb2.ExecutorInfo(
                    id="executor-1",
                    host="host-a",
                    spark_remote="sc://localhost:15002",
                    last_heartbeat_time=timestamp_pb2.Timestamp(seconds=1_700_000_000),
                    tasks=["connectors/a/tasks/0"],
                    version="0.1.0",
                )
            ],
            config_position=self.fake.position,
        )


def offset_of(partition: dict[str, Any], offset: dict[str, Any] | None) -> common_pb2.PartitionOffset:
    return offsets_to_proto([(partition, offset)])[0]


class VirtualClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    async def async_sleep(self, seconds: float) -> None:
        self.sleep(seconds)


@dataclasses.dataclass
class Served:
    fake: FakeControlPlane
    target: str
    server: grpc.Server


def serve(credentials: grpc.ServerCredentials | None = None) -> Served:
    """Starts the fake on a loopback port, over TLS when given server `credentials`."""
    fake = FakeControlPlane()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    connectors_pb2_grpc.add_ConnectorServiceServicer_to_server(ConnectorServicer(fake), server)
    plugins_pb2_grpc.add_PluginServiceServicer_to_server(PluginServicer(fake), server)
    offsets_pb2_grpc.add_OffsetServiceServicer_to_server(OffsetServicer(fake), server)
    topics_pb2_grpc.add_TopicServiceServicer_to_server(TopicServicer(fake), server)
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(ClusterServicer(fake), server)
    port = (
        server.add_secure_port("127.0.0.1:0", credentials)
        if credentials is not None
        else server.add_insecure_port("127.0.0.1:0")
    )
    server.start()
    return Served(fake=fake, target=f"127.0.0.1:{port}", server=server)


__all__ = [
    "DATAGEN",
    "FILESINK",
    "FakeControlPlane",
    "Served",
    "VirtualClock",
    "offset_of",
    "rich_status",
    "serve",
]
