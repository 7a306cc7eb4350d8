"""Request fields of the connector mutations: the connector-name rules, and the BadRequest field
path (AIP-193) a config key of a request maps to."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence

from sluiceway_server.herder.errors import FieldViolation, InvalidArgumentError

_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def validate_connector_name(name: str, field: str) -> None:
    """Kafka's rules (non-empty, no ISO control characters) plus no '/' so resource names stay unambiguous."""
    problem = None
    if not name or not name.strip():
        problem = "must not be empty or blank"
    elif name != name.strip():
        problem = "must not start or end with whitespace"
    elif _CONTROL_CHARS.search(name):
        problem = "must not contain ISO control characters"
    elif "/" in name:
        problem = "must not contain '/'"
    elif len(name) > 249:
        problem = "must be at most 249 characters"
    if problem:
        raise InvalidArgumentError(
            f"Invalid connector name {name!r}: {problem}",
            reason="INVALID_REQUEST",
            violations=[FieldViolation(field, f"connector name {problem}")],
        )


FieldOf = Callable[[str], str]
"""The request field a config key came from, as a BadRequest field path (AIP-193)."""


def map_field(request_field: str) -> FieldOf:
    """Keys of a map field: `connector.config["tasks.max"]`."""
    return lambda key: f"{request_field}[{json.dumps(key)}]"


def patch_field(set_values: Mapping[str, str], remove: Sequence[str]) -> FieldOf:
    """A patch names a key in `set` or in `remove`; a key it did not touch is blamed on `set`, the
    part of the patch that can fix it."""
    return lambda key: (
        f"set[{json.dumps(key)}]" if key in set_values else ("remove" if key in remove else "set")
    )
