"""A connector's transform chain as its config sets it up, with Kafka Connect's keys:
``transforms`` (aliases, in the order they apply), ``transforms.<alias>.type`` (the class),
``transforms.<alias>.predicate`` and ``.negate``, the transform's own keys under
``transforms.<alias>.``; ``predicates``, ``predicates.<alias>.type`` and the predicate's own keys.

``configured_chain`` makes and configures each plugin (no Spark is needed); the control plane uses
it to validate a config, and the executor to run the chain (``sluiceway_executor.transforms``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sluiceway.connect.config import ConfigException
from sluiceway.connect.plugins import PluginNotFoundError
from sluiceway.connect.transform_plugins import TransformPlugins
from sluiceway.connect.transforms import AnyTransformation, DataFrameTransformation, Predicate

__all__ = ["PREDICATES", "TRANSFORMS", "ChainStep", "chain_problems", "configured_chain"]

TRANSFORMS: Final = "transforms"
PREDICATES: Final = "predicates"
_TYPE: Final = "type"
_PREDICATE: Final = "predicate"
_NEGATE: Final = "negate"
# Keys under transforms.<alias>. that the chain reads itself; the rest are the transform's.
_CHAIN_KEYS: Final = frozenset({_TYPE, _PREDICATE, _NEGATE})


@dataclass(frozen=True)
class ChainStep:
    """One transform of the chain, with the predicate that decides where it applies."""

    alias: str
    transform: AnyTransformation
    predicate: Predicate | None = None
    predicate_alias: str = ""
    negate: bool = False
    # The transform's own keys (under transforms.<alias>., without that prefix), as it was given.
    props: Mapping[str, str] = field(default_factory=dict)


def _aliases(props: Mapping[str, str], key: str) -> list[str]:
    aliases = [item.strip() for item in props.get(key, "").split(",") if item.strip()]
    repeated = sorted({a for a in aliases if aliases.count(a) > 1})
    if repeated:
        raise ConfigException(key, props.get(key), f"{', '.join(repeated)} appear more than once")
    return aliases


def _own(props: Mapping[str, str], prefix: str, skip: frozenset[str]) -> dict[str, str]:
    return {
        k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix) and k[len(prefix) :] not in skip
    }


def _made(
    props: Mapping[str, str], prefix: str, resolve: Callable[[str], type[Any]], skip: frozenset[str]
) -> Any:
    """The plugin of ``prefix``type, configured with its own keys; a ConfigException names the key
    at fault by its full name."""
    key = prefix + _TYPE
    name = props.get(key, "").strip()
    if not name:
        raise ConfigException(key, None, "the class of this alias is missing")
    try:
        plugin = resolve(name)()
    except PluginNotFoundError as e:
        raise ConfigException(key, name, str(e)) from e
    try:
        plugin.configure(_own(props, prefix, skip))
    except ConfigException as e:
        full = f"{prefix}{e.name}" if e.name else key
        raise ConfigException(full, e.value, e.reason or e.detail) from e
    return plugin


def configured_chain(
    props: Mapping[str, str], plugins: TransformPlugins, problems: list[ConfigException] | None = None
) -> list[ChainStep]:
    """The configured transforms of ``props`` (a connector config), in order. The first key at
    fault raises a ConfigException naming it; with ``problems``, each is added there instead and
    the alias it belongs to is left out."""

    def fail(error: ConfigException) -> None:
        if problems is None:
            raise error
        problems.append(error)

    predicates: dict[str, Predicate] = {}
    steps: list[ChainStep] = []
    try:
        predicate_aliases = _aliases(props, PREDICATES)
        transform_aliases = _aliases(props, TRANSFORMS)
    except ConfigException as e:
        fail(e)
        return steps
    for alias in predicate_aliases:
        try:
            predicates[alias] = _made(props, f"{PREDICATES}.{alias}.", plugins.predicate, frozenset({_TYPE}))
        except ConfigException as e:
            fail(e)
    for alias in transform_aliases:
        prefix = f"{TRANSFORMS}.{alias}."
        predicate_alias = props.get(prefix + _PREDICATE, "").strip()
        negate = props.get(prefix + _NEGATE, "false").strip().lower()
        try:
            transform: AnyTransformation = _made(props, prefix, plugins.transform, _CHAIN_KEYS)
            if negate not in ("true", "false"):
                raise ConfigException(prefix + _NEGATE, props.get(prefix + _NEGATE), "true or false")
            if predicate_alias and predicate_alias not in predicates:
                raise ConfigException(
                    prefix + _PREDICATE,
                    predicate_alias,
                    f"no predicate of that alias is listed in {PREDICATES}",
                )
            if predicate_alias and isinstance(transform, DataFrameTransformation):
                raise ConfigException(
                    prefix + _PREDICATE,
                    predicate_alias,
                    "this transform takes no predicate: its own settings choose the records it changes",
                )
            if negate == "true" and not predicate_alias:
                raise ConfigException(prefix + _NEGATE, "true", "negate needs a predicate to negate")
        except ConfigException as e:
            fail(e)
            continue
        steps.append(
            ChainStep(
                alias,
                transform,
                predicates.get(predicate_alias),
                predicate_alias,
                negate == "true",
                _own(props, prefix, _CHAIN_KEYS),
            )
        )
    return steps


def chain_problems(props: Mapping[str, str], plugins: TransformPlugins) -> list[ConfigException]:
    """Every key of the chain's config at fault, each as a ConfigException naming it."""
    problems: list[ConfigException] = []
    configured_chain(props, plugins, problems)
    return problems
