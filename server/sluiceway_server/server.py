"""Assembles a control-plane replica: Kafka-backed stores, the herder, and the gRPC server
with health checking and reflection; shuts down gracefully."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from confluent_kafka.admin import AdminClient
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

import sluiceway
from sluiceway.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    connectors_pb2,
    connectors_pb2_grpc,
    executor_pb2,
    executor_pb2_grpc,
    offsets_pb2,
    offsets_pb2_grpc,
    plugins_pb2,
    plugins_pb2_grpc,
    topics_pb2,
    topics_pb2_grpc,
)
from sluiceway.common.limits import SERVER_MAX_RECEIVE_BYTES
from sluiceway.common.metrics_endpoint import MetricsEndpoint, parse_metrics_listener
from sluiceway.common.tracing import TracingEndpointError, otlp_endpoint, start_tracing, stop_tracing
from sluiceway.connect.config_providers import ConfigProviders
from sluiceway.connect.plugins import PluginRegistry
from sluiceway.connect.worker_policy import WorkerPolicy
from sluiceway_executor.connectors import BUILT_IN_CONNECTORS
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_server.api.auth import AuditInterceptor, Authenticator, AuthInterceptor
from sluiceway_server.api.call_metrics import MetricsInterceptor
from sluiceway_server.api.cluster import ClusterServicer
from sluiceway_server.api.connectors import ConnectorServicer
from sluiceway_server.api.executors import ExecutorServicer
from sluiceway_server.api.forwarding import MUTATION_RESPONSES, ChannelPool, ForwardingInterceptor
from sluiceway_server.api.idempotency import RequestIdCache
from sluiceway_server.api.offsets import OffsetServicer
from sluiceway_server.api.plugins import PluginServicer
from sluiceway_server.api.task_progress import ProgressSource
from sluiceway_server.api.topics import TopicServicer
from sluiceway_server.api.tracing import TracingInterceptor
from sluiceway_server.cluster.answers import RecordedAnswers
from sluiceway_server.cluster.coordinator import ExecutorCoordinator
from sluiceway_server.cluster.election import LeaderElection
from sluiceway_server.cluster.leadership import Leadership
from sluiceway_server.cluster.members import executors_with_live_tasks
from sluiceway_server.cluster.term import LeaderTerm
from sluiceway_server.config import WorkerConfig
from sluiceway_server.herder.herder import Herder
from sluiceway_server.metrics import ControlPlaneMetrics
from sluiceway_server.readiness import HealthReporter, KafkaProbe, Readiness
from sluiceway_server.security.audit import AuditLog
from sluiceway_server.security.gateway import GatewaySocket
from sluiceway_server.security.setup import (
    note_confined_paths,
    replica_transport,
    tokens_file,
    warn_if_exposed,
)
from sluiceway_server.security.tls import listener_tls
from sluiceway_server.storage import (
    ConfigStore,
    ConnectorOffsetStorage,
    KafkaLog,
    LogRecord,
    OffsetStore,
    OwnOffsetsTopic,
    RecordLog,
    StatusStore,
    TopicSpec,
)
from sluiceway_server.storage.cluster_store import ClusterStore
from sluiceway_server.storage.leader_writer import LeaderWriter, leader_transactional_id
from sluiceway_server.storage.task_fencing import TaskFencer

if TYPE_CHECKING:
    from sluiceway_server.rest.app import RestServer

log = logging.getLogger(__name__)

PUBLIC_SERVICE_NAMES = (
    connectors_pb2.DESCRIPTOR.services_by_name["ConnectorService"].full_name,
    plugins_pb2.DESCRIPTOR.services_by_name["PluginService"].full_name,
    offsets_pb2.DESCRIPTOR.services_by_name["OffsetService"].full_name,
    topics_pb2.DESCRIPTOR.services_by_name["TopicService"].full_name,
    cluster_pb2.DESCRIPTOR.services_by_name["ClusterService"].full_name,
)
# Reflection lists the internal ExecutorService only when reflection.internal.enable is true.
SERVICE_NAMES = (
    *PUBLIC_SERVICE_NAMES,
    executor_pb2.DESCRIPTOR.services_by_name["ExecutorService"].full_name,
)
COMPACT = {"cleanup.policy": "compact"}
LogFactory = Callable[[Callable[[LogRecord], None]], RecordLog]


def kafka_log(
    config: WorkerConfig,
    topic_key: str,
    partitions: int,
    rf_key: str,
    on_record: Callable[[LogRecord], None],
    *,
    leader_only: bool = False,
) -> KafkaLog:
    return KafkaLog(
        config.get(topic_key),
        config.get("bootstrap.servers"),
        on_record,
        TopicSpec(partitions, config.get_int(rf_key), COMPACT),
        producer_config=config.prefixed("producer."),
        consumer_config=config.prefixed("consumer."),
        client_config=config.prefixed("admin."),
        name=topic_key.split(".", maxsplit=1)[0],
        leader_only=leader_only,
    )


def kafka_log_factory(
    config: WorkerConfig, topic_key: str, partitions: int, rf_key: str, created: list[KafkaLog] | None = None
) -> LogFactory:
    """Logs of the config and status topics (`created` collects them) are leader-only: they write
    through the leader's fenced producer."""

    def factory(on_record: Callable[[LogRecord], None]) -> RecordLog:
        made = kafka_log(config, topic_key, partitions, rf_key, on_record, leader_only=created is not None)
        if created is not None:
            created.append(made)
        return made

    return factory


def connector_offset_store(config: WorkerConfig, timeout: float, own: OwnOffsetsTopic) -> OffsetStore:
    """A connector's own offsets topic, on the cluster its producer writes to, created like the
    worker's offsets topic."""
    connection = own.connection
    store = OffsetStore(
        lambda on_record: KafkaLog(
            own.topic,
            connection["bootstrap.servers"],
            on_record,
            TopicSpec(
                config.get_int("offset.storage.partitions"),
                config.get_int("offset.storage.replication.factor"),
                COMPACT,
            ),
            producer_config={k: v for k, v in own.producer.items() if k != "bootstrap.servers"},
            consumer_config={k: v for k, v in connection.items() if k != "bootstrap.servers"},
            client_config={k: v for k, v in connection.items() if k != "bootstrap.servers"},
            name=f"offsets-{own.topic}",
        )
    )
    store.start(timeout)
    return store


def kafka_cluster_id(config: WorkerConfig, timeout: float) -> str:
    admin = AdminClient({"bootstrap.servers": config.get("bootstrap.servers"), **config.prefixed("admin.")})
    metadata = admin.list_topics(timeout=timeout)
    return str(metadata.cluster_id or "")


@dataclass
class ControlPlane:
    config: WorkerConfig
    server: grpc.aio.Server
    herder: Herder
    leadership: Leadership
    term: LeaderTerm
    offsets: ConnectorOffsetStorage
    channels: ChannelPool
    health: health.aio.HealthServicer
    stores: tuple[ConfigStore, StatusStore, OffsetStore, ClusterStore]
    port: int
    advertised_address: str
    background: set[asyncio.Task[None]]
    audit: AuditLog | None = None
    # Kafka Connect's REST API (rest.listeners), and the private socket it calls this replica on.
    rest: RestServer | None = None
    gateway_socket: GatewaySocket | None = None
    # Liveness and readiness (readiness.py): the REST layer's GET /health reads `readiness` too.
    readiness: Readiness | None = None
    health_reporter: HealthReporter | None = None
    # Prometheus metrics (metrics.listeners): the instruments, and their endpoint when served.
    metrics: ControlPlaneMetrics | None = None
    metrics_endpoint: MetricsEndpoint | None = None

    @property
    def coordinator(self) -> ExecutorCoordinator | None:
        """The executor coordinator of this replica's current term (None while it does not lead)."""
        return self.term.coordinator

    async def stop(self, grace: float = 10.0) -> None:
        log.info("shutting down")
        # Not enter_graceful_shutdown(): it would turn liveness NOT_SERVING as well.
        if self.health_reporter is not None:
            await self.health_reporter.stopping()
        # Calls are still answered meanwhile, so probes see "not ready" before the listener closes.
        await asyncio.sleep(self.config.seconds("shutdown.drain.ms"))
        for task in self.background:
            task.cancel()
        # The term ends first: its coordinator closes the executors' streams (they keep running
        # their tasks and attach to the next leader), background status writes finish while the
        # stores and the writer still run, and leaving the group lets another replica lead at once.
        await self.leadership.stop()
        if self.rest is not None:
            await self.rest.stop()
        await self.server.stop(grace)
        if self.gateway_socket is not None:
            self.gateway_socket.remove()
        await self.channels.close()
        await self.herder.stop()
        await self.offsets.stop()
        for store in self.stores:
            await asyncio.to_thread(store.stop)
        if self.audit is not None:
            self.audit.close()
        if self.metrics_endpoint is not None:
            self.metrics_endpoint.stop()
        await asyncio.to_thread(stop_tracing)  # the last mutations' spans
        log.info("stopped")


async def start_control_plane(config: WorkerConfig, plugins: PluginRegistry | None = None) -> ControlPlane:
    try:
        tracing_endpoint = otlp_endpoint(config.get("tracing.otlp.endpoint"), os.environ)
    except TracingEndpointError as exc:  # the key is checked with the config; OTEL_* variables here
        raise RuntimeError(f"cannot trace: {exc}") from None
    loop = asyncio.get_running_loop()
    # Store calls block until records are read back; give them room beyond the default pool.
    loop.set_default_executor(ThreadPoolExecutor(64, thread_name_prefix="sluiceway-io"))
    startup_timeout = config.seconds("startup.timeout.ms")
    try:
        cluster_id = await asyncio.to_thread(kafka_cluster_id, config, startup_timeout)
    except Exception as exc:
        raise RuntimeError(f"cannot reach Kafka at {config.get('bootstrap.servers')}: {exc}") from exc

    leader_logs: list[KafkaLog] = []
    config_store = ConfigStore(
        kafka_log_factory(config, "config.storage.topic", 1, "config.storage.replication.factor", leader_logs)
    )
    status_store = StatusStore(
        kafka_log_factory(
            config,
            "status.storage.topic",
            config.get_int("status.storage.partitions"),
            "status.storage.replication.factor",
            leader_logs,
        )
    )
    offset_store = OffsetStore(
        kafka_log_factory(
            config,
            "offset.storage.topic",
            config.get_int("offset.storage.partitions"),
            "offset.storage.replication.factor",
        )
    )
    cluster_store = ClusterStore(
        kafka_log_factory(config, "cluster.storage.topic", 1, "cluster.storage.replication.factor")
    )
    stores = (config_store, status_store, offset_store, cluster_store)
    await asyncio.gather(*(asyncio.to_thread(s.start, startup_timeout) for s in stores))

    tls = listener_tls(config)
    rest_listeners = config.rest_listeners()
    gateway_socket = GatewaySocket() if rest_listeners else None
    authenticator = Authenticator(
        tokens_file(config), gateway=None if gateway_socket is None else gateway_socket.trust()
    )
    audit = AuditLog(config.get("audit.log.file").strip())
    channels = ChannelPool(
        [("grpc.max_receive_message_length", SERVER_MAX_RECEIVE_BYTES)], replica_transport(config, tls)
    )
    metrics = ControlPlaneMetrics()
    forwarding = ForwardingInterceptor(channels, metrics)
    traced = TracingInterceptor()
    server = grpc.aio.server(
        # Outermost first: every call is counted, then admitted before it is forwarded, audited or served.
        interceptors=[
            MetricsInterceptor(metrics),
            AuthInterceptor(authenticator, audit),
            traced,
            forwarding,
            AuditInterceptor(audit),
        ],
        options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", SERVER_MAX_RECEIVE_BYTES)],
    )
    if tls is None:
        port = server.add_insecure_port(config.listen_address())
    else:
        port = server.add_secure_port(config.listen_address(), tls.server_credentials())
    if port == 0:
        raise RuntimeError(f"cannot listen on {config.listen_address()}")
    if gateway_socket is not None:
        gateway_socket.check_private()
        if server.add_insecure_port(gateway_socket.target) == 0:
            raise RuntimeError(f"cannot listen on {gateway_socket.target} for the REST API")
    warn_if_exposed(config, authenticator.enabled, tls is not None)
    advertised = config.advertised_address(port)
    traced.replica = advertised
    if tracing_endpoint:
        start_tracing(
            tracing_endpoint,
            service="sluiceway-control-plane",
            instance=advertised,
            version=sluiceway.__version__,
        )
    offsets = ConnectorOffsetStorage(
        worker_config=config.props,
        offset_store=offset_store,
        offset_store_factory=functools.partial(connector_offset_store, config, startup_timeout),
        admin_factory=AdminClient,
    )
    # Takes over the transactional ids tasks commit their offsets with: for the coordinator, before
    # a dead executor's tasks run elsewhere; for KIP-875, before a stopped connector's offsets change.
    fencer = TaskFencer(config.props, status_store=status_store)
    policy = WorkerPolicy.from_worker_config(config.props)  # checked by WorkerConfig.validate
    note_confined_paths(policy)
    herder = Herder(
        worker_id=advertised,
        config_store=config_store,
        status_store=status_store,
        plugins=plugins
        or PluginRegistry.discover(
            plugin_path=policy.plugin_path, built_in=BUILT_IN_CONNECTORS, transforms=built_in_plugins()
        ),
        plugin_timeout=config.seconds("plugin.callback.timeout.ms"),
        offset_storage=offsets,
        topic_tracking=config.get_bool("topic.tracking.enable"),
        topic_tracking_reset=config.get_bool("topic.tracking.allow.reset"),
        policy=policy,
        fencer=fencer,
        providers=ConfigProviders.from_worker_config(config.props),  # checked by WorkerConfig.validate
    )
    await herder.start(lead=False)
    session_timeout = config.seconds("executor.session.timeout.ms")
    term = LeaderTerm(
        herder,
        leader_logs,
        # Called at the start of each term, once the status topic was read to its end: the new
        # coordinator waits up to a session timeout for the executors it shows running tasks.
        lambda: ExecutorCoordinator(
            snapshot=herder.snapshot,
            connector_type=herder.connector_type,
            status=herder.status,
            offsets=offsets,
            worker_config=config.props,
            heartbeat_interval=config.seconds("executor.heartbeat.interval.ms"),
            session_timeout=session_timeout,
            topics=herder.topics,
            fencer=fencer,
            expected_executors=executors_with_live_tasks(status_store),
            grace=session_timeout,
            on_rebalance=metrics.rebalance_seconds.observe,
        ),
    )
    leadership = _leadership(config, advertised, cluster_store, herder, term, startup_timeout)
    forwarding.use(leadership)
    _add_services(server, config, herder, leadership, term, channels, cluster_id)

    health_servicer = health.aio.HealthServicer()
    readiness = Readiness(
        unreachable_after=config.seconds("readiness.kafka.unreachable.ms"),
        leader_known=lambda: leadership.leader() is not None,
        kafka=f"Kafka at {config.get('bootstrap.servers')}",
    )
    health_reporter = HealthReporter(
        readiness,
        health_servicer,
        ("", *SERVICE_NAMES),  # "" starts as SERVING in grpc's servicer: set before it serves
        KafkaProbe(
            config.get("bootstrap.servers"), config.prefixed("admin."), config.get("config.storage.topic")
        ).check,
        config.seconds("readiness.kafka.check.interval.ms"),
    )
    await health_reporter.publish()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflected = SERVICE_NAMES if config.get_bool("reflection.internal.enable") else PUBLIC_SERVICE_NAMES
    reflection.enable_server_reflection(
        (*reflected, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME),
        server,
    )
    await server.start()
    # Before readiness turns SERVING, so whoever waits for that can scrape at once.
    metrics_endpoint = None
    metrics_listener = parse_metrics_listener(config.get("metrics.listeners"))
    if metrics_listener is not None:
        metrics_endpoint = MetricsEndpoint.start(*metrics_listener, metrics.registry)
        log.info("metrics served", extra={"metrics_url": metrics_endpoint.url})
    rest = None
    if gateway_socket is not None:
        # Imported here: the REST API's web framework costs a replica without rest.listeners about
        # 0.3 s of its start.
        from sluiceway_server.rest.app import RestServer
        from sluiceway_server.rest.gateway import GrpcGateway

        gateway = GrpcGateway(gateway_socket, config.seconds("request.timeout.ms"))
        rest = RestServer(config, gateway, readiness, metrics)
        await rest.start(rest_listeners)
    await leadership.start()
    await health_reporter.start()
    background: set[asyncio.Task[None]] = set()
    if metrics_endpoint is not None:  # no gauges to keep while nobody can scrape them
        background.add(
            loop.create_task(
                _refresh_metrics(metrics, herder, leadership, term, _read_lags(config, stores)),
                name="metrics-refresh",
            )
        )
    log.info(
        "control plane serving",
        extra={"listen": config.listen_address(), "advertised": advertised, "kafka_cluster_id": cluster_id},
    )
    return ControlPlane(
        config,
        server,
        herder,
        leadership,
        term,
        offsets,
        channels,
        health_servicer,
        stores,
        port,
        advertised,
        background,
        audit,
        rest,
        gateway_socket,
        readiness=readiness,
        health_reporter=health_reporter,
        metrics=metrics,
        metrics_endpoint=metrics_endpoint,
    )


# How often the state gauges are read anew; a scrape sees values at most this old.
_METRICS_REFRESH_SECONDS = 1.0


def _read_lags(
    config: WorkerConfig, stores: tuple[ConfigStore, StatusStore, OffsetStore, ClusterStore]
) -> dict[str, Callable[[], int]]:
    """Each internal topic's read lag on this replica, by topic name."""
    config_store, status_store, offset_store, cluster_store = stores
    return {
        config.get("config.storage.topic"): config_store.read_lag,
        config.get("status.storage.topic"): status_store.read_lag,
        config.get("offset.storage.topic"): offset_store.read_lag,
        config.get("cluster.storage.topic"): cluster_store.read_lag,
    }


async def _refresh_metrics(
    metrics: ControlPlaneMetrics,
    herder: Herder,
    leadership: Leadership,
    term: LeaderTerm,
    read_lags: Mapping[str, Callable[[], int]],
) -> None:
    """Keeps the state gauges current while metrics are served, from the herder's plain lookups
    (cheap enough for the event loop with many connectors)."""
    while True:
        connectors: dict[str, str] = {}
        tasks: list[tuple[str, int, str]] = []
        for name, task, state in herder.instance_states():
            if task is None:
                connectors[name] = state.value
            else:
                tasks.append((name, task, state.value))
        leader = leadership.leader()
        coordinator = term.coordinator
        metrics.set_cluster_state(
            connectors,
            tasks,
            leading=leadership.leading,
            leader_epoch=leader.epoch if leader is not None else 0,
            executors=len(coordinator.executors()) if coordinator is not None else 0,
        )
        for topic, read_lag in read_lags.items():
            metrics.internal_topic_read_lag.labels(topic).set(read_lag())
        await asyncio.sleep(_METRICS_REFRESH_SECONDS)


def _leadership(
    config: WorkerConfig,
    advertised: str,
    cluster_store: ClusterStore,
    herder: Herder,
    term: LeaderTerm,
    timeout: float,
) -> Leadership:
    bootstrap = config.get("bootstrap.servers")
    session_timeout_ms = config.get_int("session.timeout.ms")

    async def read_leader_logs(limit: float) -> None:
        # The offsets topic too: the first assignments of a term carry what it holds (source
        # offsets, and the latest change of a sink's offsets, which a sink task must not miss).
        await asyncio.gather(
            asyncio.to_thread(herder.config_store.read_to_end, limit),
            asyncio.to_thread(herder.status_store.read_to_end, limit),
            asyncio.to_thread(herder.offsets.storage.offset_store.read_to_end, limit),
        )

    return Leadership(
        member_id=advertised,
        address=advertised,
        version=sluiceway.__version__,
        cluster=cluster_store,
        duties=term,
        writer_factory=lambda on_fenced: LeaderWriter(
            leader_transactional_id(config.get("group.id")),
            bootstrap,
            config.prefixed("producer."),
            on_fenced=on_fenced,
        ),
        election_factory=lambda on_change: LeaderElection(
            member_id=advertised,
            cluster=cluster_store,
            session_timeout=session_timeout_ms / 1000.0,
            on_change=on_change,
        ),
        read_to_end=read_leader_logs,
        member_refresh=session_timeout_ms / 3000.0,
        timeout=timeout,
    )


def _add_services(
    server: grpc.aio.Server,
    config: WorkerConfig,
    herder: Herder,
    leadership: Leadership,
    term: LeaderTerm,
    channels: ChannelPool,
    cluster_id: str,
) -> None:
    default_timeout = config.seconds("request.timeout.ms")
    request_ids = RequestIdCache(
        answers=RecordedAnswers(leadership.cluster, lambda: leadership.writer, default_timeout),
        response_types=MUTATION_RESPONSES,
    )
    connectors_pb2_grpc.add_ConnectorServiceServicer_to_server(
        ConnectorServicer(
            herder,
            request_ids,
            default_timeout,
            progress=ProgressSource(leadership, lambda: term.coordinator, channels),
        ),
        server,
    )
    offsets_pb2_grpc.add_OffsetServiceServicer_to_server(
        OffsetServicer(herder.offsets, request_ids, default_timeout), server
    )
    plugins_pb2_grpc.add_PluginServiceServicer_to_server(PluginServicer(herder, default_timeout), server)
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(
        ClusterServicer(
            herder,
            leadership,
            lambda: term.coordinator,
            channels,
            kafka_cluster_id=cluster_id,
            group_id=config.get("group.id"),
            member_max_age_ms=config.get_int("session.timeout.ms"),
        ),
        server,
    )
    executor_pb2_grpc.add_ExecutorServiceServicer_to_server(
        ExecutorServicer(lambda: term.coordinator, leadership.leader_address), server
    )
    topics_pb2_grpc.add_TopicServiceServicer_to_server(
        TopicServicer(herder.topics, request_ids, default_timeout), server
    )
