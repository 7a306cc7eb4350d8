"""Request fields of the connector mutations: the connector-name rules, and the BadRequest field
path (AIP-193) a config key of a request maps to."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence

from sluiceway.common.limits import MAX_CONNECTOR_NAME_LENGTH, echo
from sluiceway.errors import Reason
from sluiceway_server.errors import FieldViolation, InvalidArgumentError, LimitExceededError

# Control (Cc), format (Cf: bidi overrides, zero-width characters), line and paragraph separators
# and surrogates: characters that make a name look like another one, or break a table it is shown in.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})


def has_hidden_characters(text: str) -> bool:
    """Whether `text` has a character that is invisible or changes how the text around it shows."""
    return any(unicodedata.category(c) in _HIDDEN_CATEGORIES for c in text)


def validate_connector_name(name: str, field: str) -> None:
    """Kafka's rules (non-empty, no ISO control characters), no '/' so resource names stay
    unambiguous, and no invisible or direction-changing characters. The length goes first, so an
    over-long name is refused without being looked at further."""
    if len(name) > MAX_CONNECTOR_NAME_LENGTH:
        raise LimitExceededError(
            "max.connector.name.length",
            MAX_CONNECTOR_NAME_LENGTH,
            len(name),
            field,
            "the connector name length",
        )
    problem = None
    if not name or not name.strip():
        problem = "must not be empty or blank"
    elif name != name.strip():
        problem = "must not start or end with whitespace"
    elif has_hidden_characters(name):
        problem = "must not contain control, format (e.g. bidi override) or separator characters"
    elif "/" in name:
        problem = "must not contain '/'"
    if problem:
        raise InvalidArgumentError(
            f"Invalid connector name {echo(name)}: {problem}",
            reason=Reason.INVALID_REQUEST,
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
