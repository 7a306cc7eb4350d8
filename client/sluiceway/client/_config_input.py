"""Reading connector configs and offsets the way Kafka Connect users write them:
`key=value` arguments, JSON files (a flat object, or Kafka Connect's request body
`{"name": ..., "config": {...}}`) and Java `.properties` files."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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


# --- Java .properties (java.util.Properties.load / store) --------------------------------

_WHITESPACE = " \t\f"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Joins natural lines ending in an odd number of backslashes, drops comments and blank
    lines, and strips leading whitespace of every natural line, as Properties.load does.
    Yields each logical line with the number of its first natural line."""
    parts: list[str] | None = None
    start = 0
    for number, raw in enumerate(_LINE_BREAK.split(text), start=1):
        line = raw.lstrip(_WHITESPACE)
        if parts is None:
            # Only the first natural line of a logical line can be a comment or blank.
            if not line or line[0] in "#!":
                continue
            parts = []
            start = number
        elif not line:
            # A blank continuation line ends the logical line.
            yield start, "".join(parts)
            parts = None
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, "".join(parts)
        parts = None
    if parts is not None:
        # A continuation at the end of the input continues with nothing.
        yield start, "".join(parts)


def _split_key_value(line: str) -> tuple[str, str]:
    """Splits a logical line, still escaped, at the first unescaped `=`, `:` or whitespace."""
    index = 0
    escaped = False
    has_separator = False
    while index < len(line):
        char = line[index]
        if not escaped and char in "=:":
            has_separator = True
            break
        if not escaped and char in _WHITESPACE:
            break
        escaped = char == "\\" and not escaped
        index += 1
    key = line[:index]
    value_start = index + 1 if index < len(line) else index
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if not has_separator and char in "=:":
                has_separator = True
            else:
                break
        value_start += 1
    return key, line[value_start:]


def _unescape(text: str, line_number: int) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index >= len(text):
            out.append(char)
            continue
        char = text[index]
        index += 1
        if char == "u":
            digits = text[index : index + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigInputError(f"line {line_number}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(char, char))
    result = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in result):
        # Java writes characters beyond the BMP as two \u escapes (a UTF-16 surrogate pair).
        try:
            result = result.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError:
            raise ConfigInputError(f"line {line_number}: unpaired UTF-16 surrogate in a \\u escape") from None
    return result


def parse_properties(text: str) -> dict[str, str]:
    """Parses Java `.properties` text: `#`/`!` comments, `=`, `:` or whitespace separators,
    backslash line continuations and escapes (`\\t`, `\\n`, `\\uXXXX`, `\\=`...). Later keys win."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key_value(line)
        result[_unescape(key, number)] = _unescape(value, number)
    return result


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == " ":
            # Keys end at whitespace; values only lose their leading whitespace.
            out.append("\\ " if is_key or index == 0 else " ")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def format_properties(config: Mapping[str, str]) -> str:
    """Renders a config as `.properties` text (UTF-8; Properties.store escaping) that
    `parse_properties` and Java read back unchanged."""
    return "".join(
        f"{_escape(key, is_key=True)}={_escape(value, is_key=False)}\n" for key, value in config.items()
    )


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
