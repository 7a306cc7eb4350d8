"""Cluster state in Kafka (docs/ARCHITECTURE.md §5): the config, status and offsets topics, in
Kafka Connect's own keys and JSON values, and our cluster topic, each materialised by a store over a
RecordLog (KafkaLog, or MemoryLog in tests); the leader's fenced writer, the fencing of task
transactional ids, and the sink connectors' offsets in their consumer groups."""

from sluiceway_server.storage.config_store import (
    ClusterConfigState,
    ConfigStore,
    ConfigUpdateListener,
    RestartRequest,
)
from sluiceway_server.storage.connector_offsets import (
    ConnectorOffsetStorage,
    ConsumerGroupActiveError,
    OwnOffsetsTopic,
    SinkOffsetsRefusedError,
)
from sluiceway_server.storage.kafka_log import KafkaLog
from sluiceway_server.storage.memory_log import MemoryCluster, MemoryLog
from sluiceway_server.storage.offset_store import OffsetStore, offset_key
from sluiceway_server.storage.record_log import LogPosition, LogRecord, LogStoppedError, RecordLog
from sluiceway_server.storage.status_store import (
    ConnectorStatusRecord,
    ErrorEntry,
    StatusChange,
    StatusStore,
    TaskStatusRecord,
    TopicStatusRecord,
)
from sluiceway_server.storage.topics import TopicCreationError, TopicSpec, compacted, ensure_topic

__all__ = [
    "ClusterConfigState",
    "ConfigStore",
    "ConfigUpdateListener",
    "ConnectorOffsetStorage",
    "ConnectorStatusRecord",
    "ConsumerGroupActiveError",
    "ErrorEntry",
    "KafkaLog",
    "LogPosition",
    "LogRecord",
    "LogStoppedError",
    "MemoryCluster",
    "MemoryLog",
    "OffsetStore",
    "OwnOffsetsTopic",
    "RecordLog",
    "RestartRequest",
    "SinkOffsetsRefusedError",
    "StatusChange",
    "StatusStore",
    "TaskStatusRecord",
    "TopicCreationError",
    "TopicSpec",
    "TopicStatusRecord",
    "compacted",
    "ensure_topic",
    "offset_key",
]
