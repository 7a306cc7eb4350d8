"""Checks of a connector config in a request that need no plugin: the documented limits, characters
that have no place in a config, the `name` key, and the normalised form that is stored. The plugin's
own validation (validation.py) runs after these pass; its errors become INVALID_CONFIG here too."""

from __future__ import annotations

import re
from collections.abc import Mapping

from sluiceway.common.limits import MAX_CONFIG_BYTES, MAX_CONFIG_KEY_LENGTH, MAX_CONFIG_KEYS, MAX_TASKS, echo
from sluiceway.connect.config import ConfigDef, ConfigType, java_trim
from sluiceway.connect.validation import ConfigInfos
from sluiceway.errors import Reason
from sluiceway_server.errors import FieldViolation, InvalidArgumentError, LimitExceededError
from sluiceway_server.herder.fields import FieldOf

# Keys hold no control characters at all; values may hold tabs and line breaks (SQL, JAAS texts)
# but no other C0 control character: NUL in particular ends strings in the JVM tools that read
# the config topic.
_KEY_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]")
_VALUE_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
# Values of these types are parsed with surrounding whitespace dropped (as Kafka's ConfigDef does);
# they are stored the way they are parsed.
_TRIMMED_TYPES = frozenset(
    {
        ConfigType.BOOLEAN,
        ConfigType.INT,
        ConfigType.SHORT,
        ConfigType.LONG,
        ConfigType.DOUBLE,
        ConfigType.CLASS,
    }
)


def _invalid(connector: str, field: str, key: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Config of connector {echo(connector)}: key {echo(key)} {problem}",
        reason=Reason.INVALID_CONFIG,
        violations=[FieldViolation(field, problem)],
        metadata={"connector": connector, "config_keys": key},
    )


def check_config_input(connector: str, config: Mapping[str, str], field: str, field_of: FieldOf) -> None:
    """LIMIT_EXCEEDED or INVALID_CONFIG for what no connector may have: too many keys, too many
    bytes, a key too long, an empty key, control characters, `tasks.max` over MAX_TASKS. `field` is
    the request's map field as a whole, `field_of` names one of its keys."""
    if len(config) > MAX_CONFIG_KEYS:
        raise LimitExceededError("max.config.keys", MAX_CONFIG_KEYS, len(config), field, "the number of keys")
    size = 0
    for key, value in config.items():
        if len(key) > MAX_CONFIG_KEY_LENGTH:
            raise LimitExceededError(
                "max.config.key.length", MAX_CONFIG_KEY_LENGTH, len(key), field_of(key), "the key length"
            )
        if not key.strip():
            raise _invalid(connector, field_of(key), key, "must not be empty or blank")
        if _KEY_FORBIDDEN.search(key):
            raise _invalid(connector, field_of(key), key, "must not contain control characters")
        if _VALUE_FORBIDDEN.search(value):
            raise _invalid(
                connector,
                field_of(key),
                key,
                "has a value with control characters (only tab, line feed and carriage return are allowed)",
            )
        size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    if size > MAX_CONFIG_BYTES:
        raise LimitExceededError(
            "max.config.bytes",
            MAX_CONFIG_BYTES,
            size,
            field,
            "the size of the config's keys and values in bytes",
        )
    tasks = java_trim(config.get("tasks.max", ""))
    # Only a well-formed number is checked here; anything else is the validation's to report.
    if tasks.isascii() and tasks.isdigit() and len(tasks) <= 18 and int(tasks) > MAX_TASKS:
        raise LimitExceededError("max.tasks", MAX_TASKS, int(tasks), field_of("tasks.max"), "tasks.max")


def normalized(config: Mapping[str, str], definition: ConfigDef | None) -> dict[str, str]:
    """The config as it is stored: values of numeric, boolean and class keys without the
    surrounding whitespace their parsing ignores anyway (`tasks.max=" 2 "` is stored as `"2"`)."""
    if definition is None:
        return dict(config)
    typed = {key.name for key in definition.keys().values() if key.type in _TRIMMED_TYPES}
    return {key: (java_trim(value) if key in typed else value) for key, value in config.items()}


def with_name(name: str, config: Mapping[str, str], field: str, field_of: FieldOf) -> dict[str, str]:
    """The config with `name` set to the connector's name; INVALID_CONFIG if it names another."""
    if "name" in config and config["name"] != name:
        raise InvalidArgumentError(
            f"The config's name {echo(config['name'])} differs from the connector name {echo(name)} "
            "of the request",
            reason=Reason.INVALID_CONFIG,
            violations=[
                FieldViolation(field_of("name"), f"must equal the connector name {echo(name)} ({field})")
            ],
            metadata={"connector": name, "config_keys": "name"},
        )
    return {**config, "name": name}


def raise_config_errors(name: str, infos: ConfigInfos, field_of: FieldOf) -> None:
    """INVALID_ARGUMENT when validation found errors: a BadRequest violation per error naming the
    request field (`field_of(key)`), the config keys in the ErrorInfo metadata."""
    if not infos.error_count:
        return
    errors = infos.errors()
    violations = [
        FieldViolation(field_of(key), message) for key, messages in errors.items() for message in messages
    ]
    summary = "; ".join(f"{key}: {message}" for key, messages in errors.items() for message in messages)
    raise InvalidArgumentError(
        f"Config of connector {echo(name)} has {infos.error_count} error(s): {summary}",
        reason=Reason.INVALID_CONFIG,
        violations=violations,
        metadata={
            "connector": name,
            "error_count": str(infos.error_count),
            "config_keys": ",".join(sorted(errors)),
        },
    )
