"""Typed configuration definitions for connectors: Kafka's ConfigDef, ConfigValue and AbstractConfig.

Parsing follows Kafka's rules (``ConfigDef.parseType``) so that a connector config accepted by
Kafka Connect parses the same way here: values are trimmed, BOOLEAN is ``true``/``false`` in any
case, INT/SHORT/LONG are range-checked decimal integers, LIST is comma-separated with the spaces
around commas removed, and PASSWORD values are wrapped so they never print.
"""

from __future__ import annotations

import abc
import enum
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

from sluiceway.common.limits import shorten

__all__ = [
    "NO_DEFAULT",
    "AbstractConfig",
    "Composite",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConfigType",
    "ConfigValidator",
    "ConfigValue",
    "Importance",
    "Lambda",
    "ListOf",
    "NonEmptyString",
    "NonEmptyStringWithoutControlChars",
    "NonNull",
    "Nullable",
    "Password",
    "PathKind",
    "Range",
    "Recommender",
    "RegexValidator",
    "UniqueItems",
    "ValidString",
    "Validator",
    "Width",
    "convert_to_string",
    "java_trim",
    "parse_value",
]


class ConfigType(enum.Enum):
    """Kafka's ConfigDef.Type."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(enum.Enum):
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class PathKind(enum.Enum):
    """How a key whose value names a place on disk is read, so the worker can confine it to
    ``connector.allowed.paths``.

    ``FILE``: an operating-system path that the connector's own code opens. ``URI``: a path or URI
    handed to Spark (Hadoop's file systems): a ``file:`` URI is local, any other scheme names a
    remote store that no local directory can confine.
    """

    FILE = "FILE"
    URI = "URI"


class _NoDefault:
    """Type of the NO_DEFAULT sentinel; one instance only, so identity comparison is safe."""

    _instance: ClassVar[_NoDefault | None] = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Final = _NoDefault()
"""Default of a key that has none: the key is required."""


_DISPLAY_CHARS = 200


def _display(value: Any) -> str:
    """A value as Java's toString would print it (null, true/false, [a, b])."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_display(v) for v in value) + "]"
    # A value is repeated in errors only in part: an error must stay readable and small.
    return shorten(str(value), _DISPLAY_CHARS)


class ConfigException(Exception):  # noqa: N818 - Kafka's name, kept for familiarity
    """A config value that is missing or cannot be accepted.

    ``ConfigException(name, value, reason)`` reads "NAME: REASON (got VALUE)", the value left out
    when it is None; ``message=`` sets the whole text instead. ``detail`` is the text without the
    "NAME: " in front, for places that already show which key it is about.
    """

    def __init__(
        self,
        name: str | None,
        value: Any = None,
        reason: str | None = None,
        *,
        message: str | None = None,
    ) -> None:
        if message is None:
            if name is None:
                message = reason if reason is not None else "configuration not accepted"
            else:
                detail = reason if reason is not None else "value not accepted"
                if value is not None:
                    detail += f" (got {_display(value) if value != '' else 'an empty string'})"
                message = f"{name}: {detail}"
        super().__init__(message)
        self.name = name
        self.value = value
        self.reason = reason
        self.detail = message.removeprefix(f"{name}: ") if name else message

    @property
    def message(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, repr=False)
class Password:
    """A secret config value; it prints as ``[hidden]`` so it cannot leak into logs or messages."""

    value: str
    HIDDEN: ClassVar[str] = "[hidden]"

    def __repr__(self) -> str:
        return self.HIDDEN

    def __str__(self) -> str:
        return self.HIDDEN


Validator = Callable[[str, Any], None]
"""Checks one parsed value; raises ``ConfigException(name, value, reason)`` when it is invalid."""


@runtime_checkable
class Recommender(Protocol):
    """Kafka's ConfigDef.Recommender: valid values and visibility given the other parsed values."""

    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]: ...

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool: ...


class ConfigValidator(abc.ABC):
    """A validator that can describe what it accepts (shown as a key's ``valid_values``)."""

    @abc.abstractmethod
    def __call__(self, name: str, value: Any) -> None: ...

    @abc.abstractmethod
    def describe(self) -> str: ...

    def __str__(self) -> str:
        return self.describe()


def _describe(validator: Validator | None) -> str:
    if validator is None:
        return ""
    describe = getattr(validator, "describe", None)
    if callable(describe):
        return str(describe())
    return ""


class Range(ConfigValidator):
    """A number between two optional bounds, both inclusive; None never passes (as in Kafka)."""

    def __init__(self, minimum: int | float | None, maximum: int | float | None) -> None:
        self.minimum = minimum
        self.maximum = maximum

    @classmethod
    def at_least(cls, minimum: int | float) -> Range:
        return cls(minimum, None)

    @classmethod
    def between(cls, minimum: int | float, maximum: int | float) -> Range:
        return cls(minimum, maximum)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, None, "a number is required here")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigException(name, value, "expected a number")
        if self.minimum is not None and value < self.minimum:
            raise ConfigException(name, value, f"the lowest accepted value is {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ConfigException(name, value, f"the highest accepted value is {self.maximum}")

    def describe(self) -> str:
        if self.minimum is None and self.maximum is None:
            return "[...]"
        if self.minimum is None:
            return f"[...,{self.maximum}]"
        if self.maximum is None:
            return f"[{self.minimum},...]"
        return f"[{self.minimum},...,{self.maximum}]"


class ValidString(ConfigValidator):
    """One of a fixed set of strings, optionally compared without regard to case."""

    def __init__(self, values: Sequence[str], case_insensitive: bool = False) -> None:
        self.values = tuple(values)
        self.case_insensitive = case_insensitive
        self._folded = frozenset(v.casefold() for v in self.values)

    @classmethod
    def in_(cls, *values: str, case_insensitive: bool = False) -> ValidString:
        return cls(values, case_insensitive)

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        if self.case_insensitive:
            return value.casefold() in self._folded
        return value in self.values

    def __call__(self, name: str, value: Any) -> None:
        if not self.accepts(value):
            qualifier = ", in any case" if self.case_insensitive else ""
            raise ConfigException(name, value, f"expected one of {', '.join(self.values)}{qualifier}")

    def describe(self) -> str:
        listed = "[" + ", ".join(self.values) + "]"
        return f"{listed}, any case" if self.case_insensitive else listed


class NonEmptyString(ConfigValidator):
    """Rejects the empty string; None (an unset optional key) passes, as with Kafka's NonEmptyString."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value == "":
            raise ConfigException(name, value, "an empty string is not accepted")

    def describe(self) -> str:
        return "non-empty string"


def _is_iso_control(ch: str) -> bool:
    # Java's Character.isISOControl: U+0000..U+001F and U+007F..U+009F.
    code = ord(ch)
    return code <= 0x1F or 0x7F <= code <= 0x9F


class NonEmptyStringWithoutControlChars(ConfigValidator):
    """For connector names (Kafka's rule): not empty, and no ISO control characters."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            # A missing required value is reported by the required-key check, not here (as in Kafka).
            return
        if value == "":
            raise ConfigException(name, value, "an empty string is not accepted")
        illegal = [str(ord(ch)) for ch in str(value) if _is_iso_control(ch)]
        if illegal:
            raise ConfigException(
                name,
                value,
                "control characters are not accepted; found character codes " + ", ".join(illegal),
            )

    def describe(self) -> str:
        return "non-empty, no control characters"


class RegexValidator(ConfigValidator):
    """The value (a string, or each item of a list) must compile as a Python regular expression."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        patterns = value if isinstance(value, list) else [value]
        for pattern in patterns:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as e:
                raise ConfigException(name, value, f"not a valid Python regular expression: {e}") from e

    def describe(self) -> str:
        return "valid regex"


class ListOf(ConfigValidator):
    """Applies an item validator to every element of a LIST value."""

    def __init__(self, item: Validator) -> None:
        self.item = item

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        for element in value:
            self.item(name, element)

    def describe(self) -> str:
        inner = _describe(self.item)
        return f"list of {inner}" if inner else "list"


class UniqueItems(ConfigValidator):
    """A LIST value in which no item repeats (aliases of transforms and predicates, group names)."""

    def __init__(self, description: str, message: str = "an alias appears more than once") -> None:
        self.description = description
        self.message = message

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and len(value) > len(set(value)):
            raise ConfigException(name, value, self.message)

    def describe(self) -> str:
        return self.description


class NonNull(ConfigValidator):
    """Rejects None (a key whose value must always be present)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            raise ConfigException(name, "null", "a value is required here")

    def describe(self) -> str:
        return "not null"


class Nullable(ConfigValidator):
    """Lets a missing value through and checks any other with ``inner`` (optional numeric keys)."""

    def __init__(self, inner: Validator) -> None:
        self.inner = inner

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            self.inner(name, value)

    def describe(self) -> str:
        return _describe(self.inner)


class Composite(ConfigValidator):
    """All validators in order; the first failure is reported."""

    def __init__(self, validators: Sequence[Validator]) -> None:
        self.validators = tuple(validators)

    @classmethod
    def of(cls, *validators: Validator) -> Composite:
        return cls(validators)

    def __call__(self, name: str, value: Any) -> None:
        for validator in self.validators:
            validator(name, value)

    def describe(self) -> str:
        return ", ".join(d for d in (_describe(v) for v in self.validators) if d)


class Lambda(ConfigValidator):
    """Wraps a check function and the text that describes what it accepts (Kafka's LambdaValidator)."""

    def __init__(self, check: Validator, description: str) -> None:
        self.check = check
        self.description = description

    def __call__(self, name: str, value: Any) -> None:
        self.check(name, value)

    def describe(self) -> str:
        return self.description


# Java's String.trim() removes every char <= U+0020, not Unicode whitespace.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """`text` without what Java's String.trim() drops at either end: every character up to the space.
    Kafka trims values this way before parsing them."""
    return text.strip(_JAVA_TRIM)


_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble for decimal input, including its optional f/d suffix and NaN/Infinity.
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")
# Class names may be Python dotted paths or Java binary names (with '$' for nested classes).
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
_INT_BOUNDS: Final = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def _parse_integer(name: str, raw: str, trimmed: str, type_: ConfigType) -> int:
    low, high = _INT_BOUNDS[type_]
    if not _INTEGER.fullmatch(trimmed):
        raise ConfigException(name, raw, "not a decimal integer")
    # More digits than any bound has: int() of a very long string would refuse it anyway.
    if len(trimmed.lstrip("+-").lstrip("0")) > 20 or not low <= int(trimmed) <= high:
        raise ConfigException(name, raw, f"does not fit in {type_.value}, which holds {low} to {high}")
    return int(trimmed)


def _parse_double(name: str, raw: str, trimmed: str) -> float:
    if not _DOUBLE.fullmatch(trimmed):
        raise ConfigException(name, raw, "not a decimal number")
    text = trimmed.rstrip("fFdD") if not trimmed.endswith("Infinity") else trimmed
    return float(text.replace("Infinity", "inf"))


def parse_type(name: str, raw: str, type_: ConfigType) -> Any:
    """The Python value of a raw string for a key of type ``type_``, by Kafka's ConfigDef.parseType rules."""
    trimmed = java_trim(raw)
    if type_ is ConfigType.BOOLEAN:
        lowered = trimmed.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise ConfigException(name, raw, "expected true or false")
    if type_ is ConfigType.PASSWORD:
        return Password(trimmed)
    if type_ is ConfigType.STRING:
        return trimmed
    if type_ in _INT_BOUNDS:
        return _parse_integer(name, raw, trimmed, type_)
    if type_ is ConfigType.DOUBLE:
        return _parse_double(name, raw, trimmed)
    if type_ is ConfigType.LIST:
        if not trimmed:
            return []
        return _LIST_SPLIT.split(trimmed)
    if type_ is ConfigType.CLASS:
        # Class names are checked for form only: importing user-named modules in the control plane
        # would run their code, and converters/transforms are resolved by the executors.
        if not _CLASS_NAME.fullmatch(trimmed):
            raise ConfigException(
                name, raw, "expected a class name: a dotted Python path or a Java class name"
            )
        return trimmed
    raise ConfigException(name, raw, f"no parser for type {type_}")


def parse_value(key: ConfigKey, raw: str) -> Any:
    """``raw`` parsed for ``key`` (see ``parse_type``); a bad value raises ConfigException naming the key."""
    return parse_type(key.name, raw, key.type)


def _coerce_default(name: str, type_: ConfigType, default: Any) -> Any:
    """Accepts a default given either as a string (parsed like user input) or as a typed value."""
    if default is NO_DEFAULT or default is None:
        return default
    if isinstance(default, str) and type_ is not ConfigType.PASSWORD:
        return parse_type(name, default, type_)
    ok: bool
    if type_ is ConfigType.BOOLEAN:
        ok = isinstance(default, bool)
    elif type_ in _INT_BOUNDS:
        low, high = _INT_BOUNDS[type_]
        ok = isinstance(default, int) and not isinstance(default, bool) and low <= default <= high
    elif type_ is ConfigType.DOUBLE:
        ok = isinstance(default, int | float) and not isinstance(default, bool)
        if ok:
            default = float(default)
    elif type_ is ConfigType.LIST:
        ok = isinstance(default, list | tuple) and all(isinstance(v, str) for v in default)
        if ok:
            default = list(default)
    elif type_ is ConfigType.PASSWORD:
        if isinstance(default, str):
            default = Password(default)
        ok = isinstance(default, Password)
    else:
        ok = False
    if not ok:
        raise ValueError(f"default {default!r} of {name} does not fit type {type_.value}")
    return default


def convert_to_string(value: Any, type_: ConfigType | None) -> str | None:
    """A parsed value back as config text (Kafka's ConfigDef.convertToString); passwords stay hidden."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Password):
        return str(value)
    if isinstance(value, list | tuple) or type_ is ConfigType.LIST:
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ConfigKey:
    """The definition of one key."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None
    importance: Importance
    documentation: str
    group: str | None
    order_in_group: int
    width: Width
    display_name: str
    dependents: tuple[str, ...]
    recommender: Recommender | None
    internal: bool = False
    # Set when the value names a place on disk (see PathKind); the worker confines such values.
    path_kind: PathKind | None = None

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    def default_as_string(self) -> str | None:
        if self.required:
            return None
        return convert_to_string(self.default, self.type)

    def valid_values(self) -> str:
        return _describe(self.validator)

    def default_copy(self) -> Any:
        """The default, copied when mutable so callers cannot change the definition."""
        return list(self.default) if isinstance(self.default, list) else self.default


@dataclass
class ConfigValue:
    """The validated value of one key: parsed value, recommended values and error messages."""

    name: str
    value: Any | None = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def add_error(self, message: str) -> None:
        self.errors.append(message)


_MISSING = "required, and not set"
# At most this many characters of a key's documentation go into the message about its absence.
_PURPOSE_CHARS = 160
# Where a sentence ends: after . ! or ? and before a capital, a digit or an opening quote or bracket,
# unless the full stop ends "e.g." or "i.e.".
_SENTENCE_END = re.compile(r"(?<![ei]\.[ge]\.)(?<=[.!?])\s+(?=[A-Z0-9\"'(`])")


def _purpose(documentation: str) -> str:
    """The first sentence of a key's documentation, spaces collapsed, ending in its punctuation;
    past _PURPOSE_CHARS it is cut at a space and ends in "…". Empty documentation gives ""."""
    text = " ".join(documentation.split())
    if not text:
        return ""
    first = _SENTENCE_END.split(text, maxsplit=1)[0]
    if len(first) > _PURPOSE_CHARS:
        head = first[:_PURPOSE_CHARS]
        head = head.rsplit(" ", 1)[0] if " " in head else head
        return head.rstrip(" ,;:") + "…"
    return first if first[-1] in ".!?" else first + "."


def _missing_message(key: ConfigKey) -> str:
    """What validation says of a required key that is not set: that it is required, and what it
    is for (the first sentence of its documentation), or that it has no default when undocumented."""
    what = _purpose(key.documentation)
    return f"{_MISSING}: {what}" if what else f"{_MISSING} (it has no default)"


class ConfigDef:
    """An ordered set of key definitions (Kafka's ConfigDef)."""

    def __init__(self) -> None:
        self._keys: dict[str, ConfigKey] = {}
        self._groups: list[str] = []

    def define(
        self,
        name: str,
        type: ConfigType,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        documentation: str = "",
        group: str | None = None,
        order_in_group: int = -1,
        width: Width = Width.NONE,
        display_name: str | None = None,
        dependents: Iterable[str] = (),
        recommender: Recommender | None = None,
        *,
        internal: bool = False,
        path_kind: PathKind | None = None,
    ) -> ConfigDef:
        """Adds a key; chainable. A default is parsed like user input and must pass the validator.
        ``path_kind`` declares that the value names a local file or directory (see PathKind)."""
        parsed_default = _coerce_default(name, type, default)
        if validator is not None and parsed_default is not NO_DEFAULT:
            # As Kafka: a definition whose own default is invalid is a programming error.
            validator(name, parsed_default)
        return self.define_key(
            ConfigKey(
                name=name,
                type=type,
                default=parsed_default,
                validator=validator,
                importance=importance,
                documentation=documentation,
                group=group,
                order_in_group=order_in_group,
                width=width,
                display_name=display_name if display_name is not None else name,
                dependents=tuple(dependents),
                recommender=recommender,
                internal=internal,
                path_kind=path_kind,
            )
        )

    def define_key(self, key: ConfigKey) -> ConfigDef:
        """Adds a ready-made key; duplicate names are a ValueError."""
        if key.name in self._keys:
            raise ValueError(f"key {key.name} already has a definition")
        self._keys[key.name] = key
        if key.group is not None and key.group not in self._groups:
            self._groups.append(key.group)
        return self

    def keys(self) -> Mapping[str, ConfigKey]:
        return MappingProxyType(self._keys)

    def groups(self) -> list[str]:
        return list(self._groups)

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new definition: this one's keys, then ``other``'s keys not already defined here."""
        merged = ConfigDef()
        for key in self._keys.values():
            merged.define_key(key)
        for key in other.keys().values():
            if key.name not in merged._keys:
                merged.define_key(key)
        return merged

    def _undefined_dependents(self) -> list[str]:
        missing: list[str] = []
        for key in self._keys.values():
            for dependent in key.dependents:
                if dependent not in self._keys and dependent not in missing:
                    missing.append(dependent)
        return missing

    def parse(self, props: Mapping[str, str]) -> dict[str, Any]:
        """Typed values of every key; raises ConfigException on the first bad or missing value."""
        undefined = self._undefined_dependents()
        if undefined:
            raise ConfigException(
                None,
                message="keys named as dependents have no definition: " + ",".join(undefined),
            )
        values: dict[str, Any] = {}
        for key in self._keys.values():
            if key.name in props:
                value = parse_value(key, props[key.name])
            elif key.required:
                raise ConfigException(key.name, message=f"{key.name}: {_missing_message(key)}")
            else:
                value = key.default_copy()
            if key.validator is not None:
                key.validator(key.name, value)
            values[key.name] = value
        return values

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        """A ConfigValue for every key, in definition order, with every error collected."""
        results: dict[str, ConfigValue] = {name: ConfigValue(name) for name in self._keys}
        parsed: dict[str, Any] = {}
        for key in self._keys.values():
            result = results[key.name]
            value: Any = None
            if key.name in props:
                try:
                    value = parse_value(key, props[key.name])
                except ConfigException as e:
                    result.add_error(e.detail)
            elif key.required:
                result.add_error(_missing_message(key))
            else:
                value = key.default_copy()
            if key.validator is not None and not result.errors:
                try:
                    key.validator(key.name, value)
                except ConfigException as e:
                    result.add_error(e.detail)
            result.value = value
            parsed[key.name] = value
        # Recommenders see every parsed value, as in Kafka where they run after parsing.
        for key in self._keys.values():
            if key.recommender is None:
                continue
            result = results[key.name]
            try:
                result.recommended_values = list(key.recommender.valid_values(key.name, parsed))
                result.visible = key.recommender.visible(key.name, parsed)
            except ConfigException as e:
                result.add_error(e.detail)
        for undefined in self._undefined_dependents():
            results[undefined] = ConfigValue(
                undefined,
                errors=[f"{undefined}: named as a dependent but has no definition"],
                visible=False,
            )
        return list(results.values())


class AbstractConfig:
    """Parsed configuration with typed getters, for plugins."""

    def __init__(self, definition: ConfigDef, props: Mapping[str, str]) -> None:
        self._definition = definition
        self._originals = dict(props)
        self._values = definition.parse(props)

    @property
    def definition(self) -> ConfigDef:
        return self._definition

    def originals(self) -> dict[str, str]:
        return dict(self._originals)

    def originals_with_prefix(self, prefix: str, strip: bool = True) -> dict[str, str]:
        return {
            (k[len(prefix) :] if strip else k): v for k, v in self._originals.items() if k.startswith(prefix)
        }

    def values(self) -> dict[str, Any]:
        return dict(self._values)

    def get(self, name: str) -> Any:
        if name not in self._values:
            raise ConfigException(None, message=f"{name}: not a defined key")
        return self._values[name]

    def _typed(self, name: str, *types: ConfigType) -> Any:
        key = self._definition.keys().get(name)
        if key is None:
            raise ConfigException(None, message=f"{name}: not a defined key")
        if key.type not in types:
            expected = " or ".join(t.value for t in types)
            raise ConfigException(
                None, message=f"Configuration '{name}' is of type {key.type.value}, not {expected}"
            )
        return self._values[name]

    def _present(self, name: str, *types: ConfigType) -> Any:
        value = self._typed(name, *types)
        if value is None:
            raise ConfigException(None, message=f"Configuration '{name}' has no value")
        return value

    def get_string(self, name: str) -> str | None:
        value: str | None = self._typed(name, ConfigType.STRING, ConfigType.CLASS)
        return value

    def get_class_name(self, name: str) -> str | None:
        value: str | None = self._typed(name, ConfigType.CLASS)
        return value

    def get_int(self, name: str) -> int:
        value: int = self._present(name, ConfigType.INT)
        return value

    def get_short(self, name: str) -> int:
        value: int = self._present(name, ConfigType.SHORT)
        return value

    def get_long(self, name: str) -> int:
        value: int = self._present(name, ConfigType.LONG, ConfigType.INT)
        return value

    def get_optional_long(self, name: str) -> int | None:
        value: int | None = self._typed(name, ConfigType.LONG, ConfigType.INT)
        return value

    def get_double(self, name: str) -> float:
        value: float = self._present(name, ConfigType.DOUBLE)
        return value

    def get_boolean(self, name: str) -> bool:
        value: bool = self._present(name, ConfigType.BOOLEAN)
        return value

    def get_list(self, name: str) -> list[str]:
        value: list[str] = self._present(name, ConfigType.LIST)
        return list(value)

    def get_password(self, name: str) -> Password | None:
        value: Password | None = self._typed(name, ConfigType.PASSWORD)
        return value
