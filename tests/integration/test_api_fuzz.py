"""Fuzzing the whole gRPC API with Hypothesis against a real control plane of its own.

Each example is one call of one RPC (ConnectorService, PluginService, OffsetService, TopicService,
ClusterService, ExecutorService.Attach) with generated names, configs, enum numbers, page sizes and
tokens, request ids, etags, positions and offsets. Properties checked after every call:

- a failed call is neither INTERNAL nor UNKNOWN and carries a google.rpc.ErrorInfo with domain
  "sluiceway" and a reason from ErrorReason, in trailers that fit gRPC's default 8 KiB metadata
  limit; the calls are made with gRPC's default 4 MiB message limit, as the client library's are, so
  a response too large for it fails this too;
- a failed call changed nothing: every connector's etag (config and target state) and the offsets of
  the pool's connectors read the same before and after it;
- the control plane process is alive, and its health service answers SERVING (every
  `HEALTH_EVERY` examples and at the end).

Environment: SLUICEWAY_FUZZ_EXAMPLES (default `DEFAULT_EXAMPLES`, the bounded run of `make test`);
SLUICEWAY_FUZZ_SEED makes the run random with that seed (without it the run is derandomized);
SLUICEWAY_FUZZ_KEEP_GOING=1 collects every distinct failure and reports them all at the end, instead
of stopping at the first one and shrinking it. `make fuzz` runs 10,000 examples with a random seed.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import pytest
from google.protobuf import struct_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2  # type: ignore[import-untyped]
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from sluiceway.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    common_pb2,
    connectors_pb2,
    connectors_pb2_grpc,
    errors_pb2,
    executor_pb2,
    executor_pb2_grpc,
    offsets_pb2,
    offsets_pb2_grpc,
    plugins_pb2,
    plugins_pb2_grpc,
    topics_pb2,
    topics_pb2_grpc,
)
from sluiceway.common.limits import EXECUTOR_MAX_RECEIVE_BYTES

pytestmark = pytest.mark.integration
V = TypeVar("V")

DEFAULT_EXAMPLES = 500
EXAMPLES = int(os.environ.get("SLUICEWAY_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES)))
SEED = os.environ.get("SLUICEWAY_FUZZ_SEED", "").strip()
KEEP_GOING = os.environ.get("SLUICEWAY_FUZZ_KEEP_GOING", "") not in ("", "0")

CALL_TIMEOUT = 30.0  # unary calls: far above what any of them needs, so a timeout is the server's
STREAM_SECONDS = 0.4  # how long a WatchStatus or Attach stream is read before the client ends it
HEALTH_EVERY = 25
KNOWN_REASONS = frozenset(errors_pb2.ErrorReason.keys()) - {"ERROR_REASON_UNSPECIFIED"}

# Names that creates, updates and deletes share, so that calls meet existing connectors.
POOL = ("fuzz-a", "fuzz-b", "fuzz-c", "fuzz-heavy")
HEAVY = POOL[-1]  # the name `heavy_creates` uses
TOPIC = "fuzz-topic"
BULK_KEY = "fuzz.bulk."  # many keys of one config: `fuzz.bulk.0` ... with the value "v"
# Generated values that the fuzzer replaces when it sends the call: the connector's current etag, and
# the last page token the same method returned. They start with a private-use character, so generated
# text practically never equals them.
CURRENT_ETAG = "\ue000current-etag"
LAST_TOKEN = "\ue000last-page-token"

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

# --- strategies ------------------------------------------------------------------------------------

TRICKY = (
    "\u202e",  # right-to-left override
    "\u200f",
    "\u2066",
    "\x00",
    "/",
    "\\",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\ufeff",
    "\u00a0",
    "\u0663",  # Arabic-Indic digit three
    "\u00b2",
    "\u0969",  # Devanagari digit three
    "\uff11",  # fullwidth digit one
    "é",
    "名",
    "\U0001f642",
    '"',
    "'",
    "%s",
    "..",
    "*",
    "$",
    "{}",
)

_chars = st.one_of(st.characters(codec="utf-8"), st.sampled_from([t for t in TRICKY if len(t) == 1]))
short_text = st.text(_chars, max_size=24)
# Long strings (up to 10 KiB characters) as a repeated unit: cheap to generate and to print.
long_text = st.builds(
    lambda unit, times: (unit * times)[:10_240],
    st.text(_chars, min_size=1, max_size=6),
    st.integers(100, 10_240),
)
texts = st.one_of(st.just(""), short_text, st.sampled_from(TRICKY), long_text)


@st.composite
def mostly(draw: st.DrawFn, usual: st.SearchStrategy[V], odd: st.SearchStrategy[V], weight: int = 4) -> V:
    """`usual` about `weight` times as often as `odd`, so that most calls get far enough to act.
    (Shrinking leads towards `usual`.)"""
    return draw(odd) if draw(st.integers(0, weight)) == weight else draw(usual)


def enum_numbers(values: Sequence[int]) -> st.SearchStrategy[int]:
    """Defined values of an enum, and any other int32."""
    return mostly(st.sampled_from(values), st.integers(*INT32), 2)


int32s = st.one_of(st.sampled_from([0, 1, -1, *INT32, 1000, 1001]), st.integers(*INT32))
int64s = st.one_of(st.sampled_from([0, 1, -1, *INT64, 2**31, 2**32, 2**53 + 1]), st.integers(*INT64))

connector_ids = mostly(
    st.sampled_from(POOL),
    st.one_of(
        st.builds(lambda name, extra: name + extra, st.sampled_from(POOL), st.sampled_from(TRICKY)),
        st.builds(lambda name, extra: extra + name, st.sampled_from(POOL), st.sampled_from(TRICKY)),
        texts,
    ),
    3,
)
connector_names = mostly(
    st.builds(lambda cid: f"connectors/{cid}", connector_ids),
    st.one_of(
        st.sampled_from(["", "connectors/", "connectors//", "Connectors/fuzz-a", "fuzz-a", "connectors/a/b"]),
        texts,
    ),
)
task_numbers = mostly(
    st.sampled_from(["0", "1"]),
    st.one_of(
        st.sampled_from(
            [
                "2",
                "00",
                "\u0663",
                "\u00b2",
                "-1",
                "+1",
                " 1",
                "1 ",
                "1\n",
                "2147483647",
                "2147483648",
                "99999999999999999999999",
                "0x1",
                "1e3",
                "",
            ],
        ),
        st.integers(0, 2**40).map(str),
        texts,
    ),
    2,
)
task_names = mostly(
    st.builds(lambda cid, task: f"connectors/{cid}/tasks/{task}", connector_ids, task_numbers),
    connector_names,
)
CLASS_NAMES = (
    "DataGenSource",
    "DataGenSourceConnector",
    "sluiceway_executor.connectors.datagen.DataGenSourceConnector",
    "FileStreamSource",
    "FileStreamSink",
    "SparkFileSink",
    "JdbcSource",
    "JdbcSink",
    "datagensource",
    " DataGenSource ",
    "DataGenSource\x00",
    "json.JSONDecoder",
    "builtins.object",
    "sluiceway.connect.SourceConnector",
    "sluiceway_executor.connectors.datagen.DataGenSourceTask",
    "no.such.module.Connector",
)
class_names = mostly(st.sampled_from(CLASS_NAMES), texts, 2)
plugin_names = mostly(
    st.builds(lambda cls: f"plugins/{cls}", class_names),
    st.one_of(st.sampled_from(["", "plugins/", "plugins//", "DataGenSource"]), texts),
    3,
)

# Configs that validate and stay idle: no executor of this plane runs tasks, DataGen is slow anyway.
VALID_CONFIGS: tuple[Mapping[str, str], ...] = (
    {"connector.class": "DataGenSource", "topic": TOPIC, "records.per.sec": "1", "tasks.max": "1"},
    {"connector.class": "DataGenSource", "topic": TOPIC, "records.per.sec": "0.5", "tasks.max": "2"},
    {"connector.class": "FileStreamSource", "file": "/nonexistent/sluiceway-fuzz/in.txt", "topic": TOPIC},
    {"connector.class": "FileStreamSink", "file": "/nonexistent/sluiceway-fuzz/out.txt", "topics": TOPIC},
)


def heavy_config() -> dict[str, str]:
    """Valid, but large once running: 50 task configs of some 90 kB each (a full ListTasks page of
    about 4.5 MB; assignments of about 9 MB for an executor holding them all). Drawn rarely, as every
    reconciliation of it writes those 4.5 MB to the config topic. (A function, so that no strategy's
    repr holds the filler.)"""
    return {
        "connector.class": "DataGenSource",
        "topic": TOPIC,
        "records.per.sec": "1",
        "tasks.max": "50",
        "fuzz.filler": "x" * 90_000,
    }


CONFIG_KEYS = (
    "connector.class",
    "tasks.max",
    "name",
    "topic",
    "topics",
    "topics.regex",
    "file",
    "records.per.sec",
    "max.records",
    "record.size.bytes",
    "batch.max.records",
    "key.converter",
    "value.converter",
    "offsets.storage.topic",
    "errors.tolerance",
    "heartbeat.interval.ms",
    "topic.creation.default.partitions",
    "topic.creation.groups",
    "consumer.override.group.id",
    "connection.password",
    "transforms",
    "",
    " ",
    "\x00",
    " tasks.max",
    "tasks.max ",
    "\u202etasks.max",
)
CONFIG_VALUES = (
    "",
    "0",
    "1",
    "2",
    "-1",
    " 2 ",
    "\t1\n",
    "\u0662",
    "1000",
    "1001",
    "1000000",
    "2147483647",
    "2147483648",
    "1e3",
    "nan",
    "true",
    "DataGenSource",
    TOPIC,
    "\x00",
    "(",
    ".*",
    "a,b",
    "bad topic!",
    "__consumer_offsets",
)
huge_values = st.builds(
    lambda unit, times: unit * times, st.sampled_from(["x", "é", "\x00"]), st.integers(1, 300_000)
)
config_keys = st.one_of(st.sampled_from(CONFIG_KEYS), texts)
config_values = st.one_of(st.sampled_from(CONFIG_VALUES), texts, class_names, huge_values)


def _config(
    base: Mapping[str, str],
    changes: Mapping[str, str],
    removed: Sequence[str],
    bulk: int,
    big: tuple[str, int] | None,
) -> dict[str, str]:
    config = {k: v for k, v in base.items() if k not in removed}
    config.update({f"{BULK_KEY}{i}": "v" for i in range(bulk)})
    config.update(changes)
    if big is not None:
        config[big[0]] = "y" * big[1]
    return config


# At most one value per config just under the 4 MiB request limit (so that no request nears the 8 MiB
# at which gRPC itself refuses it), for a key the pool's plugins define: an answer that repeats the
# value next to the plugin's definitions (validation) grows past 4 MiB there.
big_values = st.tuples(st.sampled_from(["topic", "file"]), st.integers(4_184_000, 4_194_200))


configs = mostly(
    mostly(
        st.sampled_from(VALID_CONFIGS).map(dict),
        st.builds(
            _config,
            st.one_of(st.sampled_from(VALID_CONFIGS), st.just({})),
            st.dictionaries(config_keys, config_values, max_size=4),
            st.lists(st.sampled_from(CONFIG_KEYS), max_size=2),
            mostly(st.just(0), st.integers(990, 1100), 3),
            mostly(st.none(), big_values, 8),
        ),
        2,
    ),
    st.builds(heavy_config),
    25,
)
positions = mostly(
    st.just(0), st.one_of(st.integers(1, 300), st.integers(*INT64), st.sampled_from([-1, *INT64])), 3
)
page_sizes = mostly(st.sampled_from([0, 1, 2, 100, 1000]), st.one_of(st.just(1001), int32s), 3)


def _forged_token(after: Any, query: str) -> str:
    data = json.dumps({"after": after, "query": query}).encode()
    return base64.urlsafe_b64encode(data).decode()


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), short_text)
page_tokens = mostly(
    st.sampled_from(["", LAST_TOKEN]),
    st.one_of(
        texts,
        st.binary(max_size=48).map(lambda raw: base64.urlsafe_b64encode(raw).decode()),
        st.builds(
            _forged_token,
            st.one_of(_json_scalars, st.lists(_json_scalars, max_size=2)),
            st.one_of(short_text, st.text("0123456789abcdef", min_size=16, max_size=16)),
        ),
    ),
    3,
)
request_ids = mostly(st.sampled_from(["", "", "fuzz-r1", "fuzz-r2"]), texts, 3)
etags = mostly(st.sampled_from(["", "", CURRENT_ETAG]), texts, 3)
views = enum_numbers(list(connectors_pb2.ConnectorView.values()))
# Mostly connectors that start idle; RUNNING ones get tasks, which fuzzed executors are assigned.
initial_states = mostly(
    st.sampled_from([connectors_pb2.INITIAL_STATE_STOPPED, connectors_pb2.INITIAL_STATE_PAUSED]),
    enum_numbers(list(connectors_pb2.InitialState.values())),
    2,
)


def _offset_value(kind: str, value: Any) -> common_pb2.OffsetValue:
    if kind == "null":
        return common_pb2.OffsetValue(null_value=struct_pb2.NULL_VALUE)
    return common_pb2.OffsetValue(**{kind: value})


offset_values = st.one_of(
    st.just(_offset_value("null", None)),
    st.booleans().map(lambda v: _offset_value("bool_value", v)),
    int64s.map(lambda v: _offset_value("int_value", v)),
    st.floats().map(lambda v: _offset_value("double_value", v)),
    texts.map(lambda v: _offset_value("string_value", v)),
    st.just(common_pb2.OffsetValue()),  # no kind set
)
offset_keys = st.one_of(
    st.sampled_from(
        ["task", "seq", "kafka_topic", "kafka_partition", "kafka_offset", "file", "position", ""]
    ),
    texts,
)


def _offset_map(fields: Mapping[str, common_pb2.OffsetValue]) -> common_pb2.OffsetMap:
    return common_pb2.OffsetMap(fields=dict(fields))


offset_maps = st.dictionaries(offset_keys, offset_values, max_size=3).map(_offset_map)


def _partition_offset(
    partition: common_pb2.OffsetMap | None, offset: common_pb2.OffsetMap | None
) -> common_pb2.PartitionOffset:
    result = common_pb2.PartitionOffset()
    if partition is not None:
        result.partition.CopyFrom(partition)
    if offset is not None:
        result.offset.CopyFrom(offset)
    return result


def _pair(
    partition: Mapping[str, common_pb2.OffsetValue], offset: Mapping[str, common_pb2.OffsetValue] | None
) -> common_pb2.PartitionOffset:
    return _partition_offset(_offset_map(partition), None if offset is None else _offset_map(offset))


counts = mostly(st.integers(0, 1000), int64s, 2)
ints = counts.map(lambda v: _offset_value("int_value", v))
# Offsets in the shapes the pool's plugins use (DataGen, FileStream source, sinks), so that alters of
# stopped connectors get as far as the plugin and the offsets topics.
well_formed_offsets = st.one_of(
    st.builds(
        lambda task, seq: _pair({"task": task}, None if seq is None else {"seq": seq}),
        ints,
        st.one_of(ints, st.none()),
    ),
    st.builds(
        lambda file, position: _pair(
            {"filename": file}, None if position is None else {"position": position}
        ),
        st.one_of(st.just("/nonexistent/sluiceway-fuzz/in.txt"), texts).map(
            lambda v: _offset_value("string_value", v)
        ),
        st.one_of(ints, st.none()),
    ),
    st.builds(
        lambda topic, partition, offset: _pair(
            {"kafka_topic": topic, "kafka_partition": partition},
            None if offset is None else {"kafka_offset": offset},
        ),
        st.one_of(st.just(TOPIC), texts).map(lambda v: _offset_value("string_value", v)),
        ints,
        st.one_of(ints, st.none()),
    ),
)
offset_lists = mostly(
    st.lists(well_formed_offsets, min_size=1, max_size=3),
    st.lists(
        st.builds(_partition_offset, st.one_of(offset_maps, st.none()), st.one_of(offset_maps, st.none())),
        max_size=4,
    ),
    2,
)

# --- calls -----------------------------------------------------------------------------------------


def shorten(text: str) -> str:
    """A readable Python literal for `text`: a repeated unit as `unit * n`, other long text cut."""
    if len(text) <= 160:
        return repr(text)
    for start in range(17):  # after a prefix such as "connectors/"
        for size in range(1, 9):
            unit = text[start : start + size]
            times = 1
            while text.startswith(unit, start + times * size):
                times += 1
            end = start + times * size
            if len(text) - end + start <= 120:
                head = [repr(text[:start])] if start else []
                tail = [repr(text[end:])] if end < len(text) else []
                return " + ".join([*head, f"{unit!r} * {times}", *tail])
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[:120]!r}...<{len(text)} chars, sha256 {digest}>"


def show(value: Any) -> str:
    """A message as `Type(field=value, ...)` with only the fields that are set."""
    if isinstance(value, Message):
        parts = []
        for descriptor, item in value.ListFields():
            if descriptor.message_type is not None and descriptor.message_type.GetOptions().map_entry:
                bulk = sum(1 for k in item if k.startswith(BULK_KEY))
                pairs = [f"{show(k)}: {show(v)}" for k, v in item.items() if not k.startswith(BULK_KEY)]
                pairs += [f"<{bulk} keys {BULK_KEY}N>"] if bulk else []
                shown = "{" + ", ".join(pairs) + "}"
            elif descriptor.is_repeated:
                shown = "[" + ", ".join(show(v) for v in item) + "]"
            else:
                shown = show(item)
            parts.append(f"{descriptor.name}={shown}")
        return f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, str):
        return shorten(value)
    return repr(value)


@dataclass(frozen=True)
class Call:
    """One generated call. Attach sends `stream` (each message with whether to adopt the task and
    generation of the first assignment received) and keeps the stream open after it if `hold_open`."""

    service: str
    method: str
    request: Message | None = None
    stream: tuple[tuple[executor_pb2.ExecutorMessage, bool], ...] = ()
    hold_open: bool = False

    @property
    def rpc(self) -> str:
        return f"{self.service}.{self.method}"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))  # Hypothesis prints examples with this rather than field by field

    def __repr__(self) -> str:
        if self.request is not None:
            return f"{self.rpc}({show(self.request)})"
        sent = ", ".join(
            show(m) + (" [adopting the assignment]" if adopt else "") for m, adopt in self.stream
        )
        return f"{self.rpc}([{sent}], hold_open={self.hold_open})"


def unary(service: str, method: str, requests: st.SearchStrategy[Message]) -> st.SearchStrategy[Call]:
    return requests.map(lambda request: Call(service, method, request))


cpb = connectors_pb2

connector_messages = st.builds(
    cpb.Connector,
    config=configs,
    name=st.one_of(st.just(""), connector_names),
    etag=st.one_of(st.just(""), texts),
    config_position=st.one_of(st.just(0), int64s),
    target_state=enum_numbers(list(common_pb2.TargetState.values())),
)

connector_calls = [
    unary(
        "ConnectorService",
        "CreateConnector",
        st.builds(
            cpb.CreateConnectorRequest,
            connector_id=connector_ids,
            connector=connector_messages,
            initial_state=initial_states,
            request_id=request_ids,
            validate_only=st.booleans(),
        ),
    ),
    unary(
        "ConnectorService",
        "GetConnector",
        st.builds(cpb.GetConnectorRequest, name=connector_names, view=views, min_config_position=positions),
    ),
    unary(
        "ConnectorService",
        "ListConnectors",
        st.builds(
            cpb.ListConnectorsRequest,
            page_size=page_sizes,
            page_token=page_tokens,
            view=views,
            min_config_position=positions,
        ),
    ),
    unary(
        "ConnectorService",
        "ReplaceConnectorConfig",
        st.builds(
            cpb.ReplaceConnectorConfigRequest,
            name=connector_names,
            config=configs,
            request_id=request_ids,
            etag=etags,
        ),
    ),
    unary(
        "ConnectorService",
        "PatchConnectorConfig",
        st.builds(
            cpb.PatchConnectorConfigRequest,
            name=connector_names,
            set=st.dictionaries(config_keys, config_values, max_size=4),
            remove=st.lists(config_keys, max_size=3),
            request_id=request_ids,
            etag=etags,
        ),
    ),
    unary(
        "ConnectorService",
        "DeleteConnector",
        st.builds(
            cpb.DeleteConnectorRequest,
            name=connector_names,
            delete_offsets=st.booleans(),
            wait=st.booleans(),
            request_id=request_ids,
            etag=etags,
        ),
    ),
    *(
        unary("ConnectorService", method, st.builds(request, name=connector_names, request_id=request_ids))
        for method, request in (
            ("PauseConnector", cpb.PauseConnectorRequest),
            ("ResumeConnector", cpb.ResumeConnectorRequest),
            ("StopConnector", cpb.StopConnectorRequest),
        )
    ),
    unary(
        "ConnectorService",
        "RestartConnector",
        st.builds(
            cpb.RestartConnectorRequest,
            name=connector_names,
            include_tasks=st.booleans(),
            only_failed=st.booleans(),
            request_id=request_ids,
        ),
    ),
    unary(
        "ConnectorService",
        "ListTasks",
        st.builds(
            cpb.ListTasksRequest,
            parent=connector_names,
            min_config_position=positions,
            page_size=page_sizes,
            page_token=page_tokens,
        ),
    ),
    unary(
        "ConnectorService",
        "GetConnectorStatus",
        st.builds(cpb.GetConnectorStatusRequest, name=connector_names),
    ),
    unary("ConnectorService", "GetTaskStatus", st.builds(cpb.GetTaskStatusRequest, name=task_names)),
    unary(
        "ConnectorService",
        "RestartTask",
        st.builds(cpb.RestartTaskRequest, name=task_names, request_id=request_ids),
    ),
    unary(
        "ConnectorService",
        "WatchStatus",
        st.builds(
            cpb.WatchStatusRequest,
            name=st.one_of(st.just(""), connector_names),
            include_initial=st.booleans(),
        ),
    ),
]
plugin_calls = [
    unary(
        "PluginService",
        "ListPlugins",
        st.builds(
            plugins_pb2.ListPluginsRequest,
            include_all_types=st.booleans(),
            page_size=page_sizes,
            page_token=page_tokens,
        ),
    ),
    unary(
        "PluginService",
        "GetPluginConfigDefinition",
        st.builds(plugins_pb2.GetPluginConfigDefinitionRequest, name=plugin_names),
    ),
    unary(
        "PluginService",
        "ValidateConnectorConfig",
        st.builds(
            plugins_pb2.ValidateConnectorConfigRequest,
            plugin=st.one_of(st.just(""), plugin_names),
            config=configs,
        ),
    ),
]
offset_calls = [
    unary(
        "OffsetService",
        "GetConnectorOffsets",
        st.builds(offsets_pb2.GetConnectorOffsetsRequest, name=connector_names),
    ),
    unary(
        "OffsetService",
        "AlterConnectorOffsets",
        st.builds(
            offsets_pb2.AlterConnectorOffsetsRequest,
            name=connector_names,
            offsets=offset_lists,
            request_id=request_ids,
        ),
    ),
    unary(
        "OffsetService",
        "ResetConnectorOffsets",
        st.builds(offsets_pb2.ResetConnectorOffsetsRequest, name=connector_names, request_id=request_ids),
    ),
]
topic_calls = [
    unary(
        "TopicService", "GetActiveTopics", st.builds(topics_pb2.GetActiveTopicsRequest, name=connector_names)
    ),
    unary(
        "TopicService",
        "ResetActiveTopics",
        st.builds(topics_pb2.ResetActiveTopicsRequest, name=connector_names, request_id=request_ids),
    ),
]
cluster_calls = [unary("ClusterService", "GetServerInfo", st.just(cluster_pb2.GetServerInfoRequest()))]

epb = executor_pb2
running_task_reports = st.builds(
    epb.RunningTask,
    task=task_names,
    generation=int64s,
    fingerprint=texts,
    state=enum_numbers(list(common_pb2.State.values())),
    trace=texts,
)
hellos = st.builds(
    epb.Hello,
    executor_id=mostly(st.sampled_from(["fuzz-executor-1", "fuzz-executor-2"]), texts, 3),
    version=st.one_of(st.just("fuzz"), texts),
    host=st.one_of(st.just("fuzz-host"), texts),
    spark_remote=st.one_of(st.just("sc://fuzz:15002"), texts),
    max_tasks=int32s,
    running_tasks=st.lists(running_task_reports, max_size=3),
)
executor_messages = st.one_of(
    st.builds(epb.ExecutorMessage, hello=hellos),
    st.builds(
        epb.ExecutorMessage,
        heartbeat=st.builds(epb.Heartbeat, running_tasks=st.lists(task_names, max_size=3)),
    ),
    st.builds(
        epb.ExecutorMessage,
        task_status=st.builds(
            epb.TaskStatusReport,
            task=task_names,
            generation=int64s,
            state=enum_numbers(list(common_pb2.State.values())),
            trace=texts,
        ),
    ),
    st.builds(epb.ExecutorMessage, goodbye=st.just(epb.Goodbye())),
    st.builds(
        epb.ExecutorMessage,
        active_topics=st.builds(
            epb.ActiveTopicsReport, task=task_names, generation=int64s, topics=st.lists(texts, max_size=3)
        ),
    ),
    st.builds(
        epb.ExecutorMessage,
        revocation_ack=st.builds(epb.RevocationAck, tasks=st.lists(task_names, max_size=3)),
    ),
    st.just(epb.ExecutorMessage()),
)
attach_calls = st.builds(
    lambda first, rest, hold_open: Call("ExecutorService", "Attach", None, (first, *rest), hold_open),
    st.tuples(mostly(st.builds(epb.ExecutorMessage, hello=hellos), executor_messages, 3), st.just(False)),
    st.lists(st.tuples(executor_messages, st.booleans()), max_size=4),
    st.booleans(),
)

# The pool's last name with the heavy config, running, so that large task sets meet the list, status
# and executor calls (the fuzzed creates rarely pick all of that). The serial only varies the config:
# Hypothesis does not repeat an example it has already run.
heavy_creates = unary(
    "ConnectorService",
    "CreateConnector",
    st.builds(
        lambda serial: cpb.CreateConnectorRequest(
            connector_id=HEAVY,
            connector=cpb.Connector(config={**heavy_config(), "fuzz.serial": str(serial)}),
            initial_state=cpb.INITIAL_STATE_RUNNING,
        ),
        st.integers(0, 2**32),
    ),
)
ALL_CALLS = [*connector_calls, *plugin_calls, *offset_calls, *topic_calls, *cluster_calls, attach_calls]
# Creates, deletes and attaches twice as often: the pool fills and empties, and executors meet tasks.
calls = st.one_of(
    *ALL_CALLS,
    *(strategy.map(lambda call: call) for strategy in (connector_calls[0], connector_calls[5], attach_calls)),
    heavy_creates,
)

# --- running calls and checking them ----------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """What a rejected call must not change. Connectors: name → (etag, target state, config digest);
    offsets: pool name → its offsets, serialized (or the error reading them)."""

    connectors: Mapping[str, tuple[str, str, str]]
    offsets: Mapping[str, frozenset[bytes] | str]


@dataclass(frozen=True)
class Failure:
    prop: str
    rpc: str
    code: str
    detail: str
    reproducer: str

    @property
    def signature(self) -> tuple[str, str, str]:
        return (self.prop, self.rpc, self.code)

    def __str__(self) -> str:
        return f"[{self.prop}] {self.rpc} -> {self.code}: {self.detail}\n    reproducer: {self.reproducer}"


@dataclass
class Outcome:
    error: grpc.RpcError | None = None
    attached: bool = False  # Attach: the server welcomed the executor before the stream ended
    sent: Message | None = None  # the request as sent (placeholders replaced)


def _config_digest(config: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(config.items())).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Fuzzer:
    address: str
    alive: Callable[[], bool]
    examples: int = 0
    started: float = field(default_factory=time.monotonic)
    by_rpc: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)
    failures: dict[tuple[str, str, str], Failure] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    previous: str = "the start"  # the call before the current one

    def __post_init__(self) -> None:
        # Fuzzed calls get gRPC's default message limit, as the client library's calls do, but accept
        # any trailers, so that their size is measured (`_trailers_problem`) rather than refused at
        # random between gRPC's soft and hard limits. The Attach stream accepts what a real executor
        # accepts; the fuzzer's own reads take whatever comes.
        wide = [("grpc.max_receive_message_length", EXECUTOR_MAX_RECEIVE_BYTES)]
        fuzzed = grpc.insecure_channel(
            self.address,
            options=[("grpc.max_metadata_size", 1 << 24), ("grpc.absolute_max_metadata_size", 1 << 24)],
        )
        executor = grpc.insecure_channel(self.address, options=wide)
        reader = grpc.insecure_channel(self.address, options=wide)
        self.channels = [fuzzed, executor, reader]
        self.stubs: dict[str, Any] = {
            "ConnectorService": connectors_pb2_grpc.ConnectorServiceStub(fuzzed),
            "PluginService": plugins_pb2_grpc.PluginServiceStub(fuzzed),
            "OffsetService": offsets_pb2_grpc.OffsetServiceStub(fuzzed),
            "TopicService": topics_pb2_grpc.TopicServiceStub(fuzzed),
            "ClusterService": cluster_pb2_grpc.ClusterServiceStub(fuzzed),
            "ExecutorService": executor_pb2_grpc.ExecutorServiceStub(executor),
        }
        self.connectors = connectors_pb2_grpc.ConnectorServiceStub(reader)
        self.offsets = offsets_pb2_grpc.OffsetServiceStub(reader)
        self.health = health_pb2_grpc.HealthStub(reader)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()

    # state

    def snapshot(self) -> Snapshot:
        connectors: dict[str, tuple[str, str, str]] = {}
        token = ""
        while True:
            page = self.connectors.ListConnectors(
                connectors_pb2.ListConnectorsRequest(
                    view=connectors_pb2.CONNECTOR_VIEW_INFO, page_size=100, page_token=token
                ),
                timeout=CALL_TIMEOUT,
            )
            for c in page.connectors:
                connectors[c.name] = (
                    c.etag,
                    common_pb2.TargetState.Name(c.target_state),
                    _config_digest(c.config),
                )
            token = page.next_page_token
            if not token:
                break
        offsets: dict[str, frozenset[bytes] | str] = {}
        for name in POOL:
            resource = f"connectors/{name}"
            if resource not in connectors:
                continue
            try:
                reply = self.offsets.GetConnectorOffsets(
                    offsets_pb2.GetConnectorOffsetsRequest(name=resource), timeout=CALL_TIMEOUT
                )
            except grpc.RpcError as exc:
                offsets[resource] = f"error {exc.code().name}"
            else:
                offsets[resource] = frozenset(o.SerializeToString(deterministic=True) for o in reply.offsets)
        return Snapshot(connectors, offsets)

    def serving(self) -> bool:
        try:
            reply = self.health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    # calls

    def resolve(self, call: Call, before: Snapshot) -> Message:
        """The request with the placeholders replaced by the etag and page token they stand for."""
        assert call.request is not None
        request: Any = type(call.request)()
        request.CopyFrom(call.request)
        fields = request.DESCRIPTOR.fields_by_name
        if "etag" in fields and request.etag == CURRENT_ETAG:
            current = before.connectors.get(request.name)
            request.etag = current[0] if current else ""
        if "page_token" in fields and request.page_token == LAST_TOKEN:
            request.page_token = self.tokens.get(call.method, "")
        result: Message = request
        return result

    def invoke(self, call: Call, before: Snapshot) -> Outcome:
        if call.method == "Attach":
            return self.attach(call)
        request = self.resolve(call, before)
        method = getattr(self.stubs[call.service], call.method)
        if call.method == "WatchStatus":
            stream = method(request, timeout=STREAM_SECONDS)
            try:
                for _ in stream:
                    pass
            except grpc.RpcError as exc:
                return Outcome(None if _client_deadline(exc) else exc, sent=request)
            return Outcome(sent=request)
        try:
            response = method(request, timeout=CALL_TIMEOUT)
        except grpc.RpcError as exc:
            return Outcome(exc, sent=request)
        token = getattr(response, "next_page_token", "")
        if token:
            self.tokens[call.method] = token
        return Outcome(sent=request)

    def attach(self, call: Call) -> Outcome:
        assignments: list[executor_pb2.TaskAssignment] = []
        assigned = threading.Event()
        done = threading.Event()
        welcomed = False

        def requests() -> Iterator[executor_pb2.ExecutorMessage]:
            waited = False
            for message, adopt in call.stream:
                if adopt and not waited:
                    waited = True
                    assigned.wait(STREAM_SECONDS / 2)
                yield _adopt(message, assignments[0]) if adopt and assignments else message
            if call.hold_open:
                done.wait(STREAM_SECONDS * 2)

        stream = self.stubs["ExecutorService"].Attach(requests(), timeout=STREAM_SECONDS)
        try:
            for reply in stream:
                kind = reply.WhichOneof("kind")
                welcomed = welcomed or kind == "welcome"
                if kind == "assignment" and reply.assignment.tasks:
                    assignments.append(reply.assignment.tasks[0])
                    assigned.set()
        except grpc.RpcError as exc:
            return Outcome(None if _client_deadline(exc) else exc, welcomed)
        finally:
            done.set()
            stream.cancel()
        return Outcome(None, welcomed)

    # properties

    def check(self, call: Call) -> list[Failure]:
        try:
            before = self.snapshot()
        except grpc.RpcError as exc:
            raise AssertionError(
                f"reading the state failed ({exc.code().name}: {shorten(exc.details() or '')}) "
                f"after {self.previous}"
            ) from None
        self.previous = repr(call)
        outcome = self.invoke(call, before)
        found: list[Failure] = []
        error = outcome.error
        code = "OK" if error is None else error.code().name
        self.by_code[code] += 1

        def fail(prop: str, detail: str) -> None:
            sent = f"{call.rpc}({show(outcome.sent)})" if outcome.sent is not None else repr(call)
            found.append(Failure(prop, call.rpc, code, detail, sent))

        if error is not None:
            message = shorten(error.details() or "")
            if error.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                fail("internal-or-unknown", message)
            problem = _error_info_problem(error) or _trailers_problem(error)
            if problem:
                fail("error-info", f"{problem}; message {message}")
            if not (call.method == "Attach" and outcome.attached):
                try:
                    changed = _changes(before, self.snapshot(), call)
                except grpc.RpcError as exc:
                    changed = f"reading the state failed: {exc.code().name} {shorten(exc.details() or '')}"
                if changed:
                    fail("state-changed-on-error", f"{changed}; message {message}")
        if not self.alive():
            fail("server-died", "the control plane process exited")
        elif self.examples % HEALTH_EVERY == 0 and not self.serving():
            fail("not-serving", "the health service does not answer SERVING")
        return found

    def run(self, call: Call) -> None:
        self.examples += 1
        self.by_rpc[call.rpc] += 1
        found = self.check(call)
        for failure in found:  # per kind of failure, the shortest reproducer
            kept = self.failures.get(failure.signature)
            if kept is None or len(failure.reproducer) < len(kept.reproducer):
                self.failures[failure.signature] = failure
        if found and not KEEP_GOING:
            raise AssertionError("\n".join(str(f) for f in found))
        if found and not self.alive():
            raise AssertionError(f"the control plane died; failures so far:\n{self.report_failures()}")

    def report_failures(self) -> str:
        return "\n".join(str(f) for f in sorted(self.failures.values(), key=lambda f: f.signature))

    def summary(self) -> str:
        rpcs = ", ".join(f"{rpc.split('.')[1]} {n}" for rpc, n in sorted(self.by_rpc.items()))
        codes = ", ".join(f"{code} {n}" for code, n in self.by_code.most_common())
        mode = f"seed {SEED}" if SEED else "derandomized"
        return (
            f"api fuzz: {self.examples} examples ran ({mode}, limit {EXAMPLES}) in "
            f"{time.monotonic() - self.started:.1f}s; {len(self.failures)} distinct failures\n"
            f"  outcomes: {codes}\n  calls: {rpcs}"
        )

    def clean_up(self) -> None:
        """Deletes every connector the run created."""
        for name in self.snapshot().connectors:
            with contextlib.suppress(grpc.RpcError):
                self.connectors.DeleteConnector(
                    connectors_pb2.DeleteConnectorRequest(name=name), timeout=CALL_TIMEOUT
                )


def _client_deadline(error: grpc.RpcError) -> bool:
    """The client's own deadline ended the stream (the server sent no status of its own)."""
    return error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and _rich_status(error) is None


def _rich_status(error: grpc.RpcError) -> Any:
    try:
        return rpc_status.from_call(error)
    except ValueError as exc:  # the rich status disagrees with the call's code or message
        return exc


def _error_info_problem(error: grpc.RpcError) -> str:
    """Why the error's rich status lacks a proper ErrorInfo; empty when it has one."""
    status = _rich_status(error)
    if status is None:
        return "no rich status (grpc-status-details-bin)"
    if isinstance(status, ValueError):
        return f"inconsistent rich status: {status}"
    infos = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
    if len(infos) != 1:
        return f"{len(infos)} ErrorInfo details"
    if infos[0].domain != "sluiceway":
        return f"ErrorInfo domain {infos[0].domain!r}"
    if infos[0].reason not in KNOWN_REASONS:
        return f"ErrorInfo reason {infos[0].reason!r} is not an ErrorReason"
    return ""


def _trailers_problem(error: grpc.RpcError) -> str:
    """Whether the error's trailers exceed what a client with gRPC's default settings accepts for
    sure (8 KiB; between that and 16 KiB it refuses at random). Sizes as gRPC counts them: name and
    value plus 32 bytes per entry; the message percent-encoded, binary values in base64."""
    size = 0
    for item in error.trailing_metadata() or ():
        raw = item.value if isinstance(item.value, bytes) else str(item.value).encode()
        size += len(item.key) + 32 + (len(base64.b64encode(raw)) if item.key.endswith("-bin") else len(raw))
    message = (error.details() or "").encode()
    size += len("grpc-message") + 32 + sum(1 if 0x20 <= b < 0x7F and b != 0x25 else 3 for b in message)
    return f"trailers of about {size} bytes, more than gRPC's default limit of 8192" if size > 8192 else ""


def _changes(before: Snapshot, after: Snapshot, call: Call) -> str:
    """What differs between the two snapshots, less what a failed call may change by contract."""
    changed: list[str] = []
    for name in sorted(set(before.connectors) | set(after.connectors)):
        old, new = before.connectors.get(name), after.connectors.get(name)
        if old == new:
            continue
        if _stopped_by_delete(call, name, old, new):
            continue
        changed.append(f"{shorten(name)}: {_describe(old)} -> {_describe(new)}")
    for name in sorted(set(before.offsets) & set(after.offsets)):
        if before.offsets[name] != after.offsets[name] and not _stopped_by_delete(call, name, None, None):
            changed.append(f"offsets of {name}")
    return "; ".join(changed)


def _stopped_by_delete(
    call: Call, name: str, old: tuple[str, str, str] | None, new: tuple[str, str, str] | None
) -> bool:
    """DeleteConnector with delete_offsets leaves the connector STOPPED when the reset fails (the
    contract in connectors.proto): the target state may change, the config may not."""
    request = call.request
    if not isinstance(request, connectors_pb2.DeleteConnectorRequest) or not request.delete_offsets:
        return False
    if request.name != name:
        return False
    if old is None and new is None:
        return True
    return old is not None and new is not None and new[1] == "TARGET_STATE_STOPPED" and old[2] == new[2]


def _describe(entry: tuple[str, str, str] | None) -> str:
    if entry is None:
        return "absent"
    etag, state, digest = entry
    return f"(etag {etag[:12]}, {state}, config {digest[:12]})"


def _adopt(
    message: executor_pb2.ExecutorMessage, task: executor_pb2.TaskAssignment
) -> executor_pb2.ExecutorMessage:
    """`message` as about the assigned task, under the generation it was assigned with."""
    adopted = executor_pb2.ExecutorMessage()
    adopted.CopyFrom(message)
    kind = adopted.WhichOneof("kind")
    if kind in ("task_status", "active_topics"):
        body = getattr(adopted, kind)
        body.task = task.task
        body.generation = task.generation
    elif kind == "heartbeat":
        adopted.heartbeat.running_tasks[:] = [task.task]
    elif kind == "revocation_ack":
        adopted.revocation_ack.tasks[:] = [task.task]
    elif kind == "hello":
        del adopted.hello.running_tasks[:]
        adopted.hello.running_tasks.add(
            task=task.task, generation=task.generation, fingerprint=task.fingerprint
        )
    return adopted


@pytest.fixture
def fuzz_plane(control_plane_factory: Callable[..., Any]) -> Any:
    # A plane of its own: the fuzzed connectors and fake executors meet no other test.
    return control_plane_factory()


@pytest.mark.timeout(300 + 2 * EXAMPLES)
# Hypothesis warns when it prints the (nested, lambda-laden) strategies of a failing example.
@pytest.mark.filterwarnings("ignore:Generating overly large repr")
def test_api_fuzz(fuzz_plane: Any, capsys: pytest.CaptureFixture[str]) -> None:
    fuzzer = Fuzzer(fuzz_plane.address, lambda: fuzz_plane.managed.process.poll() is None)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=not SEED,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(call=calls)
    def fuzz(call: Call) -> None:
        fuzzer.run(call)

    if SEED:
        fuzz = seed(int(SEED))(fuzz)
    try:
        fuzz()
        assert fuzzer.serving(), "the health service does not answer SERVING after the run"
    finally:
        # The count goes to the terminal even when pytest captures output.
        with capsys.disabled():
            print(f"\n{fuzzer.summary()}", flush=True)
            if fuzzer.failures:
                print(fuzzer.report_failures(), flush=True)
        if fuzzer.alive():
            with contextlib.suppress(grpc.RpcError):
                fuzzer.clean_up()
        fuzzer.close()
    if fuzzer.failures:  # the summary first: pytest's one-line report of the failure shows the count
        pytest.fail(f"{fuzzer.summary()}\n{fuzzer.report_failures()}", pytrace=False)
