"""The DataGen record format, shared by the `DataGenSource` connector (`connectors/datagen.py`, whose
record-level task builds records one poll at a time) and the `sluiceway-datagen` data source
(`datasources/datagen.py`, which builds them inside Spark). Both import this module and neither
imports the other. No Spark here: the control plane loads the connector to validate configs.
"""

from __future__ import annotations

import string
from typing import Final

__all__ = ["DATA_SOURCE_NAME", "datagen_record"]

DATA_SOURCE_NAME: Final = "sluiceway-datagen"
"""The short name under which the DataGen data source is registered on a Spark session."""

_ALPHABET = string.ascii_letters + string.digits
# A long run of the alphabet so most paddings are one slice of it.
_PAD_SOURCE = _ALPHABET * (65536 // len(_ALPHABET) + 2)


def _padding(seq: int, length: int) -> str:
    start = seq % len(_ALPHABET)
    if start + length <= len(_PAD_SOURCE):
        return _PAD_SOURCE[start : start + length]
    repeated = _ALPHABET * (length // len(_ALPHABET) + 2)
    return repeated[start : start + length]


def datagen_record(task: int, seq: int, ts_ms: int, size: int) -> tuple[str, str]:
    """The key and JSON value of record ``seq`` of task ``task``.

    The value is ``{"task":t,"seq":n,"ts":ms,"payload":"…"}`` with the payload (ASCII letters and digits,
    varying with ``seq``) sized so the value is ``size`` bytes, or as short as possible when the other
    fields already need more.
    """
    head = f'{{"task":{task},"seq":{seq},"ts":{ts_ms},"payload":"'
    pad = size - len(head) - 2
    return f"{task}-{seq}", head + (_padding(seq, pad) if pad > 0 else "") + '"}'
