"""Which converter a connector uses: converter names resolved as Kafka Connect resolves plugin
aliases, and the connector's settings over the worker's (`converter_for`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from sluiceway_executor.converters.base import (
    JSON_CONVERTER,
    STRING_CONVERTER,
    Converter,
    ConverterError,
    Role,
)
from sluiceway_executor.converters.json_converter import SCHEMA_SETTING, JsonConverter
from sluiceway_executor.converters.simple import ByteArrayConverter, StringConverter

DEFAULT_KEY_CONVERTER: Final = STRING_CONVERTER
DEFAULT_VALUE_CONVERTER: Final = JSON_CONVERTER
WORKER_CONVERTER_DEFAULTS: Final[Mapping[str, str]] = {
    "key.converter": DEFAULT_KEY_CONVERTER,
    "value.converter": DEFAULT_VALUE_CONVERTER,
    "value.converter.schemas.enable": "false",
}
"""The worker's converters when its config names none: keys as strings, values as plain JSON."""

_CONVERTERS: Final[tuple[type[Converter], ...]] = (JsonConverter, StringConverter, ByteArrayConverter)


def _aliases(cls: type[Converter]) -> list[str]:
    simple = cls.class_name.rsplit(".", 1)[-1]
    return [
        cls.class_name,
        simple,
        simple.removesuffix("Converter"),
        f"sluiceway.converters.{simple}",
        # Our module paths: the package's (accepted since converters were one module) and the class's own.
        f"sluiceway_executor.converters.{simple}",
        f"{cls.__module__}.{cls.__name__}",
    ]


CONVERTER_ALIASES: Final[Mapping[str, type[Converter]]] = {
    alias: cls for cls in _CONVERTERS for alias in _aliases(cls)
}
"""Every accepted converter name (case-sensitive, as Java class names are) → its converter."""


def converter_class(name: str) -> type[Converter]:
    cls = CONVERTER_ALIASES.get(name.strip())
    if cls is None:
        known = ", ".join(c.class_name for c in _CONVERTERS)
        raise ConverterError(f"unknown converter {name!r}; available: {known} (or their simple names)")
    return cls


def converter_for(
    connector_config: Mapping[str, str], role: Role, worker_defaults: Mapping[str, str] | None = None
) -> Converter:
    """The `role` converter of a connector, resolved as Kafka Connect's Worker does: the connector's
    `{role}.converter` with the connector's `{role}.converter.*` settings when it names one, else the
    worker's converter with the worker's settings. `worker_defaults` is the worker config; where it
    names no converter, WORKER_CONVERTER_DEFAULTS applies (the worker's own prefixed settings still
    override those defaults, e.g. `value.converter.schemas.enable=true`). The connector's
    `{role}.schema`, when set, reaches the converter as its `schema` setting."""
    if role not in ("key", "value"):
        raise ConverterError(f"converter role must be 'key' or 'value', got {role!r}")
    class_key = f"{role}.converter"
    prefix = f"{class_key}."
    source: Mapping[str, str]
    if str(connector_config.get(class_key) or "").strip():
        source = connector_config
    else:
        worker = dict(worker_defaults or {})
        if not str(worker.get(class_key) or "").strip():
            defaults = {
                k: v for k, v in WORKER_CONVERTER_DEFAULTS.items() if k == class_key or k.startswith(prefix)
            }
            worker = {**defaults, **{k: v for k, v in worker.items() if k != class_key}}
        source = worker
    settings = {k[len(prefix) :]: str(v) for k, v in source.items() if k.startswith(prefix)}
    # A sink's declared schema of plain JSON (value.schema / key.schema) is a converter setting.
    declared = str(connector_config.get(f"{role}.schema") or "").strip()
    if declared:
        settings[SCHEMA_SETTING] = declared
    return converter_class(str(source[class_key]))(role, settings)


__all__ = [
    "CONVERTER_ALIASES",
    "DEFAULT_KEY_CONVERTER",
    "DEFAULT_VALUE_CONVERTER",
    "WORKER_CONVERTER_DEFAULTS",
    "converter_class",
    "converter_for",
]
