"""The documented limits of the API and the executor protocol, all but one in one place
(`max.plugin.name.length` is in server/sluiceway_server/api/names.py).

The server enforces them and answers INVALID_ARGUMENT with ErrorInfo reason `LIMIT_EXCEEDED`,
metadata `limit` (one of the names below, lower-cased with dots, e.g. `max.config.bytes`), `max` and
`actual`; docs/API.md lists them. The executor protocol uses the message sizes so that
one connector's size can never make an Assignment too large for an executor.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ASSIGNMENT_MESSAGE_BYTES",
    "ERROR_ECHO_CHARS",
    "EXECUTOR_MAX_RECEIVE_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_KEYS",
    "MAX_CONFIG_KEY_LENGTH",
    "MAX_CONNECTOR_NAME_LENGTH",
    "MAX_EXECUTOR_ID_LENGTH",
    "MAX_REQUEST_BYTES",
    "MAX_TASKS",
    "MAX_TASK_CONFIGS_BYTES",
    "MAX_TASK_CONFIG_RECORD_BYTES",
    "SERVER_MAX_RECEIVE_BYTES",
    "echo",
    "shorten",
]

KIB: Final = 1024
MIB: Final = 1024 * KIB

# A request message, serialized. Larger requests are answered INVALID_ARGUMENT (LIMIT_EXCEEDED).
MAX_REQUEST_BYTES: Final = 4 * MIB
# What the server's gRPC transport accepts at all: beyond it, gRPC itself refuses the message with
# RESOURCE_EXHAUSTED before any of our code sees it. Twice the API limit, so that a request a little
# too large still gets our answer naming the limit.
SERVER_MAX_RECEIVE_BYTES: Final = 2 * MAX_REQUEST_BYTES

# A connector name (Kafka's topic-name bound; resource names add the `connectors/` prefix).
MAX_CONNECTOR_NAME_LENGTH: Final = 249
# An executor id (it appears in statuses and in GetServerInfo).
MAX_EXECUTOR_ID_LENGTH: Final = 249
# A connector config: the UTF-8 bytes of all its keys and values together. Stored as JSON, which at
# most doubles it (quotes and backslashes), so it stays well under the 1 MB records Kafka's config
# topic takes by default.
MAX_CONFIG_BYTES: Final = 256 * KIB
# Keys in one connector config.
MAX_CONFIG_KEYS: Final = 1000
# Characters in one config key.
MAX_CONFIG_KEY_LENGTH: Final = 256
# The largest `tasks.max` a connector may have.
MAX_TASKS: Final = 1000
# One task config as stored in the config topic (JSON); a connector whose task_configs() produce a
# larger one is FAILED with a message naming this limit.
MAX_TASK_CONFIG_RECORD_BYTES: Final = 900 * KIB
# All task configs of one connector together, as stored: what its assignments repeat to executors.
MAX_TASK_CONFIGS_BYTES: Final = 32 * MIB

# The executor accepts messages up to this size from the control plane ...
EXECUTOR_MAX_RECEIVE_BYTES: Final = 64 * MIB
# ... and the control plane packs task assignments into messages of about this size; a single task
# larger than this is sent on its own, and one larger than EXECUTOR_MAX_RECEIVE_BYTES is not sent:
# that task is FAILED with a message naming the limit.
ASSIGNMENT_MESSAGE_BYTES: Final = 2 * MIB

# How much of a value taken from the request an error message, ErrorInfo metadata or BadRequest
# description repeats; the rest is cut and marked, so an error always fits gRPC's metadata limit.
ERROR_ECHO_CHARS: Final = 64


def shorten(text: str, limit: int = ERROR_ECHO_CHARS) -> str:
    """`text` cut after `limit` characters with its full length named: `abc… (4096 characters)`."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def echo(value: str, limit: int = ERROR_ECHO_CHARS) -> str:
    """`value` quoted for an error message, cut as `shorten` does: `'abc'… (4096 characters)`.
    Errors repeat what the caller sent through this, never whole."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"
