"""How a generation reads where people see it: tables, logs and the client's objects.

A task's generation packs the leader epoch into the high 32 bits and that leader's assignment
counter into the low 32; it reads `EPOCH.COUNT` (`1.1`, where the API carries 4294967297). A
connector's generation is the epoch alone and reads as that number; 0 (none yet) reads `-`.
"""

from __future__ import annotations

__all__ = ["generation_label"]


def generation_label(generation: int) -> str:
    if generation <= 0:
        return "-"
    epoch, count = generation >> 32, generation & 0xFFFFFFFF
    return f"{epoch}.{count}" if epoch else str(count)
