"""Helpers for tests that talk to the real control plane over its socket."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from confluent_kafka import Consumer, KafkaError, TopicPartition
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from grpc_status import rpc_status

from sluiceway.api.v1 import cluster_pb2_grpc, connectors_pb2_grpc, plugins_pb2_grpc

T = TypeVar("T")


@dataclass
class Stubs:
    connectors: connectors_pb2_grpc.ConnectorServiceStub
    plugins: plugins_pb2_grpc.PluginServiceStub
    cluster: cluster_pb2_grpc.ClusterServiceStub

    @classmethod
    def of(cls, channel: grpc.Channel) -> Stubs:
        return cls(
            connectors_pb2_grpc.ConnectorServiceStub(channel),
            plugins_pb2_grpc.PluginServiceStub(channel),
            cluster_pb2_grpc.ClusterServiceStub(channel),
        )


@dataclass
class RpcFailure:
    code: grpc.StatusCode
    message: str
    reason: str = ""
    domain: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    violations: dict[str, list[str]] = field(default_factory=dict)
    retry_delay: float | None = None


def failure(call: Callable[[], Any]) -> RpcFailure:
    """Run `call`, which must fail; return its status with the rich details decoded."""
    try:
        call()
    except grpc.RpcError as exc:
        status = rpc_status.from_call(exc)
        result = RpcFailure(exc.code(), exc.details() or "")
        for detail in status.details if status is not None else []:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
                result.reason, result.domain, result.metadata = info.reason, info.domain, dict(info.metadata)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                for v in bad.field_violations:
                    result.violations.setdefault(v.field, []).append(v.description)
            elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                retry = error_details_pb2.RetryInfo()
                detail.Unpack(retry)
                result.retry_delay = retry.retry_delay.ToNanoseconds() / 1e9
        return result
    raise AssertionError("the call succeeded but was expected to fail")


def wait_until(
    probe: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.1, what: str = ""
) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except grpc.RpcError as exc:
            last = exc
        else:
            last = result
            if result:
                return result
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or probe}: last={last!r}")


def read_topic(bootstrap: str, topic: str, timeout: float = 15.0) -> list[tuple[str | None, Any]]:
    """Every record of `topic`, in order per partition: (key as text, value parsed as JSON or None)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            # Tansu answers a waiting fetch only when the wait ends: a short wait lets the end of a
            # busy partition show up.
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
        partitions = list(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        pending = set(partitions)
        out: list[tuple[str | None, Any]] = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                    continue
                raise RuntimeError(error)
            key = msg.key()
            value = msg.value()
            out.append(
                (key.decode() if key is not None else None, json.loads(value) if value is not None else None)
            )
        if pending:
            raise TimeoutError(f"did not reach the end of {topic} partitions {sorted(pending)}")
        return out
    finally:
        consumer.close()
