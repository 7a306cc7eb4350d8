"""How large a task's assignment is, against the bounds the coordinator packs assignments into."""

from __future__ import annotations

from typing import Final

from sluiceway.api.v1 import executor_pb2
from sluiceway.common.limits import EXECUTOR_MAX_RECEIVE_BYTES

# What wraps an Assignment into a ControllerMessage (field tag and length), kept free in the bound.
ENVELOPE_BYTES: Final = 16
# Kept free below the executor's receive limit for gRPC's own framing.
FRAMING_MARGIN_BYTES: Final = 64 * 1024


def entry_bytes(item: executor_pb2.TaskAssignment) -> int:
    """A task's share of an Assignment: the field's tag, its length as a varint, the task itself."""
    length = item.ByteSize()
    return 1 + _varint_bytes(length) + length


def oversize_trace(task_name: str, size: int, max_bytes: int) -> str:
    """The FAILED trace of a task whose assignment is too large for any executor."""
    return (
        f"The assignment of {task_name} is {size} bytes, more than the {max_bytes} "
        f"bytes an executor accepts (EXECUTOR_MAX_RECEIVE_BYTES, {EXECUTOR_MAX_RECEIVE_BYTES // 2**20} "
        "MiB, less room for gRPC framing), so it is not sent to any executor. Make the connector "
        "config or this task's config smaller; the task is tried again when the config changes "
        "or the task is restarted."
    )


def _varint_bytes(value: int) -> int:
    """The length of a non-negative protobuf varint."""
    return max(1, (value.bit_length() + 6) // 7)
