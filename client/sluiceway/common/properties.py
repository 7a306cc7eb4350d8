"""Java `.properties` text (java.util.Properties.load and store), as Kafka Connect reads worker and
connector configs, and `SLUICEWAY_*` environment variables naming config keys.

Shared by the CLI and client library (connector config files), the control plane (its worker
config) and executors (their own worker config), so all three read a file the same way.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

__all__ = [
    "ENV_PREFIX",
    "PropertiesSyntaxError",
    "env_key",
    "env_overrides",
    "format_properties",
    "load_properties",
    "parse_properties",
]

ENV_PREFIX = "SLUICEWAY_"


class PropertiesSyntaxError(ValueError):
    """Text that is not valid `.properties` (a malformed escape); the message names the line."""


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
                raise PropertiesSyntaxError(f"line {line_number}: malformed \\uxxxx escape")
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
            raise PropertiesSyntaxError(
                f"line {line_number}: unpaired UTF-16 surrogate in a \\u escape"
            ) from None
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


def load_properties(path: Path) -> dict[str, str]:
    """A worker's properties file (UTF-8), with surrounding whitespace trimmed from every value as
    Kafka's ConfigDef trims what it parses. Raises OSError when the file cannot be read and
    PropertiesSyntaxError when it is malformed."""
    return {key: value.strip() for key, value in parse_properties(path.read_text(encoding="utf-8")).items()}


def env_key(name: str, prefix: str = ENV_PREFIX) -> str | None:
    """The config key an environment variable names: `SLUICEWAY_PRODUCER_LINGER_MS` ->
    `producer.linger.ms` (lower case, `_` -> `.`); None for a variable without the prefix."""
    if not name.startswith(prefix) or len(name) == len(prefix):
        return None
    return name[len(prefix) :].lower().replace("_", ".")


def env_overrides(
    env: Mapping[str, str],
    keys: Collection[str],
    prefixes: tuple[str, ...] = (),
    *,
    prefix: str = ENV_PREFIX,
) -> dict[str, str]:
    """The config entries `SLUICEWAY_*` variables of `env` give, for the known `keys` and the keys
    starting with one of `prefixes` only, so unrelated variables (SLUICEWAY_SERVER,
    SLUICEWAY_TOKEN...) are ignored."""
    out: dict[str, str] = {}
    for name, value in env.items():
        key = env_key(name, prefix)
        if key is not None and (key in keys or key.startswith(prefixes)):
            out[key] = value
    return out
