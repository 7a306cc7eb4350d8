"""Reading connector configs and offsets the way Kafka Connect users write them:
`key=value` arguments, JSON files (a flat object, or Kafka Connect's request body
`{"name": ..., "config": {...}}`) and Java `.properties` files."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sluiceway.common import properties
from sluiceway.common.properties import format_properties

__all__ = [
    "ConfigFile",
    "ConfigInputError",
    "format_properties",
    "load_config_file",
    "load_offsets_file",
    "parse_config_json",
    "parse_key_values",
    "parse_offsets_json",
    "parse_properties",
]


class ConfigInputError(ValueError):
    """Config or offsets input that cannot be read; the message says where and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigFile:
    """A config read from a file. A None value is JSON null: "remove this key" in a patch."""

    config: dict[str, str | None]
    # From Kafka Connect's create body, when the file is one.
    name: str | None = None
    initial_state: str | None = None

    def values_only(self, source: str) -> dict[str, str]:
        """The config without removals, for create and replace, where null means nothing."""
        nulls = sorted(key for key, value in self.config.items() if value is None)
        if nulls:
            raise ConfigInputError(
                f"{source}: null values are only meaningful for a patch: {', '.join(nulls)}"
            )
        return {key: value for key, value in self.config.items() if value is not None}


def parse_key_values(items: Iterable[str]) -> dict[str, str]:
    """`["a=1", "b=x=y"]` -> `{"a": "1", "b": "x=y"}`; the first `=` separates."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigInputError(f"expected key=value, got {item!r}")
        if not key.strip():
            raise ConfigInputError(f"empty key in {item!r}")
        result[key.strip()] = value
    return result


# --- Java .properties (sluiceway.common.properties) ----------------------------------------------


def parse_properties(text: str) -> dict[str, str]:
    """Parses Java `.properties` text: `#`/`!` comments, `=`, `:` or whitespace separators,
    backslash line continuations and escapes (`\\t`, `\\n`, `\\uXXXX`, `\\=`...). Later keys win."""
    try:
        return properties.parse_properties(text)
    except properties.PropertiesSyntaxError as exc:
        raise ConfigInputError(str(exc)) from None


# --- JSON ---------------------------------------------------------------------------------


def _json_value(source: str, key: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    raise ConfigInputError(f"{source}: value of {key!r} must be a string, number, boolean or null")


def parse_config_json(text: str, source: str = "<json>") -> ConfigFile:
    """A flat JSON object of config keys, or Kafka Connect's create body / GET response
    (`{"name": ..., "config": {...}, "initial_state": ...}`; other keys are ignored)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigInputError(f"{source}: invalid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigInputError(f"{source}: expected a JSON object")
    name: str | None = None
    initial_state: str | None = None
    if isinstance(data.get("config"), dict):
        body = data
        data = body["config"]
        if body.get("name") is not None:
            if not isinstance(body["name"], str):
                raise ConfigInputError(f"{source}: 'name' must be a string")
            name = body["name"].removeprefix("connectors/")
        if body.get("initial_state") is not None:
            initial_state = str(body["initial_state"])
    config = {str(key): _json_value(source, str(key), value) for key, value in data.items()}
    return ConfigFile(config=config, name=name, initial_state=initial_state)


def _read(path: str | Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Properties.load(InputStream) reads ISO-8859-1; older files are written that way.
        return raw.decode("latin-1")


def load_config_file(path: str | Path) -> ConfigFile:
    """Reads a config from a JSON or `.properties` file (`-` reads stdin). `.json` and
    `.properties` suffixes decide; otherwise content starting with `{` is JSON."""
    text = _read(path)
    suffix = Path(str(path)).suffix.lower()
    if suffix == ".json" or (suffix != ".properties" and text.lstrip().startswith("{")):
        return parse_config_json(text, str(path))
    return ConfigFile(config=dict(parse_properties(text)))


def parse_offsets_json(text: str, source: str = "<json>") -> list[dict[str, Any]]:
    """Kafka Connect's offsets body `{"offsets": [{"partition": {...}, "offset": {...} |
    null}]}` (as `offsets get --output json` prints it), or just the list."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigInputError(f"{source}: invalid JSON: {exc}") from None
    if isinstance(data, dict):
        if "offsets" not in data:
            raise ConfigInputError(f"{source}: expected an object with an 'offsets' list")
        data = data["offsets"]
    if not isinstance(data, list):
        raise ConfigInputError(f"{source}: 'offsets' must be a list")
    for index, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("partition"), dict):
            raise ConfigInputError(f"{source}: offsets[{index}] needs a 'partition' object")
        if item.get("offset") is not None and not isinstance(item["offset"], dict):
            raise ConfigInputError(f"{source}: offsets[{index}].offset must be an object or null")
    return data


def load_offsets_file(path: str | Path) -> list[dict[str, Any]]:
    return parse_offsets_json(_read(path), str(path))
