"""Rendering for the CLI: aligned tables and readable states for people, protobuf JSON for
scripts, and the one error format."""

from __future__ import annotations

import datetime
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, TextIO

import grpc
from google.protobuf import json_format, timestamp_pb2
from google.protobuf.message import Message

from sluiceway.api.v1 import common_pb2, connectors_pb2, plugins_pb2
from sluiceway.common.secrets import masked_config
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import Reason, SluicewayError


def message_to_json(message: Message) -> dict[str, Any]:
    """Protobuf JSON with the proto field names and every field present (scripts need not guess
    defaults)."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def print_json(data: Any, out: TextIO | None = None) -> None:
    stream = out if out is not None else sys.stdout
    if isinstance(data, Message):
        data = message_to_json(data)
    stream.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def compact_json(data: Any) -> str:
    """One-line JSON for table cells (partitions and offsets)."""
    return json.dumps(data, sort_keys=True, separators=(", ", ": "), ensure_ascii=False)


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    # One row per line: a newline or tab inside a value would break the columns.
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def render_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Columns aligned with two spaces between them and no trailing whitespace."""
    cells = [[_cell(value) for value in row] for row in rows]
    all_rows = [list(headers), *cells]
    widths = [max(len(row[i]) if i < len(row) else 0 for row in all_rows) for i in range(len(headers))]
    lines = []
    for row in all_rows:
        padded = [value.ljust(widths[i]) for i, value in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines) + "\n"


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]], out: TextIO | None = None) -> None:
    (out if out is not None else sys.stdout).write(render_table(headers, rows))


def render_fields(fields: Sequence[tuple[str, object]]) -> str:
    """`Label:  value` lines with the values aligned."""
    width = max((len(label) for label, _ in fields), default=0) + 1
    return "".join(f"{(label + ':').ljust(width)}  {_cell(value)}\n" for label, value in fields)


def generation_label(generation: int) -> str:
    """A generation as `EPOCH.COUNT`, the form logs and client objects use too (one formatter,
    sluiceway.common.generations); a connector's reads as its epoch alone, 0 as "-"."""
    from sluiceway.common.generations import generation_label as shared_label

    return shared_label(generation)


def truncate(text: str, width: int) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


# --- readable enum values -----------------------------------------------------------------


def _value_name(enum_type: Any, value: int, prefix: str) -> str | None:
    """The value's name without its enum's prefix; None when unset or unknown to this client."""
    if value == 0 or value not in enum_type.values():
        return None
    return str(enum_type.Name(value)).removeprefix(prefix)


def state_label(state: common_pb2.State.ValueType) -> str:
    """STATE_RUNNING -> RUNNING; unknown or unset -> "-"."""
    return _value_name(common_pb2.State, state, "STATE_") or "-"


def target_state_label(state: common_pb2.TargetState.ValueType) -> str:
    """TARGET_STATE_PAUSED -> PAUSED."""
    return _value_name(common_pb2.TargetState, state, "TARGET_STATE_") or "-"


def connector_type_label(kind: common_pb2.ConnectorType.ValueType) -> str:
    """Kafka Connect's lower-case "source" / "sink"."""
    name = _value_name(common_pb2.ConnectorType, kind, "CONNECTOR_TYPE_")
    return name.lower() if name else "-"


def plugin_type_label(kind: plugins_pb2.PluginType.ValueType) -> str:
    """PLUGIN_TYPE_SINK_CONNECTOR -> sink."""
    name = _value_name(plugins_pb2.PluginType, kind, "PLUGIN_TYPE_")
    return name.removesuffix("_CONNECTOR").lower() if name else "-"


def enum_label(enum_type: Any, value: int, prefix: str = "") -> str:
    """Any other enum: its name without `prefix`, or "-" when unset."""
    return _value_name(enum_type, value, prefix) or "-"


def progress_labels(task: connectors_pb2.TaskStatus) -> tuple[str, str]:
    """A task's RATE and LAG cells: records per second over the last minute, and a sink's records
    not yet committed; "-" where the status has none (no executor runs the task, or it is a source's
    lag)."""
    if not task.HasField("progress"):
        return "-", "-"
    progress = task.progress
    per_second = progress.records_per_second
    rate = f"{per_second:,.0f}/s" if per_second >= 10 else f"{per_second:.1f}/s"
    return rate, f"{progress.lag:,}" if progress.HasField("lag") else "-"


def timestamp_label(ts: timestamp_pb2.Timestamp) -> str:
    if ts.seconds == 0 and ts.nanos == 0:
        return "-"
    moment = ts.ToDatetime(tzinfo=datetime.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def short_name(name: str) -> str:
    """`connectors/x` -> `x`, `connectors/x/tasks/3` -> `task 3`, `plugins/p` -> `p`."""
    if "/tasks/" in name:
        return "task " + name.rsplit("/", 1)[1]
    return name.removeprefix("connectors/").removeprefix("plugins/")


# --- errors ---------------------------------------------------------------------------------


# The columns of config errors, from `connectors validate` and from a refused create, replace or patch.
CONFIG_ERROR_HEADERS: Final = ("KEY", "VALUE", "ERROR")

# A BadRequest field that names one key of a request's config map: `connector.config["tasks.max"]`,
# `config["topic"]`, `set["topic"]` (the key is JSON-quoted).
_CONFIG_KEY_FIELD: Final = re.compile(r'^[\w.]*\[(?P<key>".*")\]$')


def _config_key(field: str) -> str | None:
    match = _CONFIG_KEY_FIELD.match(field)
    if match is None:
        return None
    try:
        key = json.loads(match["key"])
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _config_errors(error: SluicewayError, config: Mapping[str, str]) -> str | None:
    """An INVALID_CONFIG error as `validate` shows errors: a KEY, VALUE, ERROR table under a one-line
    summary (values of secret-looking keys hidden). None when its violations name no config key."""
    shown = masked_config(config)
    rows: list[list[str]] = []
    other: list[str] = []
    for violation in error.field_violations:
        key = _config_key(violation.field)
        if key is None:
            other.append(f"  {violation.field}: {violation.description}")
        else:
            rows.append([key, shown.get(key, ""), violation.description.removeprefix(f"{key}: ")])
    if not rows:
        return None
    count = len(rows) + len(other)
    connector = error.metadata.get("connector")
    where = f"the config of connector {connector}" if connector else "the config"
    head = f"error: {error.code.name} {error.reason}: {count} error{'s' if count != 1 else ''} in {where}"
    return "\n".join([head, "", render_table(CONFIG_ERROR_HEADERS, rows).rstrip("\n"), *other]) + "\n"


def format_error(
    error: SluicewayError,
    target: str | None = None,
    security: TransportSecurity | None = None,
    config: Mapping[str, str] | None = None,
) -> str:
    """`error: <CODE> <reason>: <message>` and one indented line per field violation; errors in a
    config as a table with the `config` that was sent. `security`, the settings the call was made
    with, lets the hints for TLS and authentication failures name what was missing."""
    if error.reason == Reason.INVALID_CONFIG:
        table = _config_errors(error, config or {})
        if table is not None:
            return table
    head = str(error)
    if error.reason == error.code.name:
        # UNAUTHENTICATED's reason repeats its code.
        head = f"{error.code.name}: {error.message}" if error.message else error.code.name
    sent_nothing = security is not None and security.token is None and not security.mutual_tls
    if error.code == grpc.StatusCode.UNAUTHENTICATED and sent_nothing:
        head += " (no credentials were sent: pass --token-file, --token or --tls-cert/--tls-key)"
    lines = [f"error: {head}"]
    # Errors the client raises itself already name their one violation in the message.
    lines.extend(
        f"  {v.field}: {v.description}" for v in error.field_violations if v.description not in error.message
    )
    if error.code == grpc.StatusCode.UNAVAILABLE and error.reason is None and target:
        # No ErrorInfo: the call never reached a Sluiceway server.
        lines.append(_unreachable_hint(error.message, target, security))
    return "\n".join(lines) + "\n"


def _unreachable_hint(message: str, target: str, security: TransportSecurity | None) -> str:
    """A guess at why no Sluiceway server answered, from gRPC's connection error text."""
    text = message.lower()
    uses_tls = security is not None and security.uses_tls
    if "wrong_version_number" in text:
        return f"  ({target} does not answer over TLS: check --server, or drop --tls and --tls-ca.)"
    if "handshake" in text or "certificate" in text:
        return (
            f"  (the TLS handshake with {target} failed: does --tls-ca hold the CA that signed "
            "the server's certificate, and does the certificate name this host?)"
        )
    if "socket closed" in text and not uses_tls:
        return f"  ({target} closed the connection: if the server uses TLS, pass --tls-ca or --tls.)"
    if "socket closed" in text and security is not None and not security.mutual_tls:
        return (
            f"  ({target} closed the TLS connection: if it asks for a client certificate, "
            "pass --tls-cert and --tls-key.)"
        )
    return f"  (is a Sluiceway server listening on {target}? Set --server or $SLUICEWAY_SERVER.)"
