"""The executor's own worker settings: a properties file (`sluiceway executor --config`) and
`SLUICEWAY_*` environment variables, laid over the worker config the leader sends in Welcome.

The control plane does not send its secrets (e.g. `producer.sasl.password`) over the attach stream,
so an executor that needs Kafka credentials, or any other worker key with a value of its own, reads
it here. Later sources win: Welcome's worker config, then the file, then the environment.

The worker keys that connectors fall back to when they leave their own empty (heartbeat.*,
task.restart.*) may not be empty here either: laid over Welcome's, an empty value would hide the
control plane's without a word.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from sluiceway.common.properties import PropertiesSyntaxError, env_overrides, load_properties
from sluiceway.connect.worker_fallbacks import WORKER_FALLBACK_KEYS
from sluiceway.connect.worker_settings import EXECUTOR_CONFIG_DEF, EXECUTOR_PASSTHROUGH_PREFIXES

__all__ = [
    "ENV_KEYS",
    "ENV_PREFIXES",
    "OwnConfigError",
    "load_own_config",
    "merge_worker_config",
]

# The worker keys an executor reads whole, and the prefixes of those it reads by family, both declared
# in sluiceway.connect.worker_settings; a SLUICEWAY_* variable counts only when it names one of them,
# so the executor's other variables (SLUICEWAY_SERVER, SLUICEWAY_SPARK_REMOTE, SLUICEWAY_TLS_CA,
# SLUICEWAY_TOKEN...) never become worker settings. A file may set any key.
ENV_KEYS: Final = frozenset(EXECUTOR_CONFIG_DEF.keys())
ENV_PREFIXES: Final = EXECUTOR_PASSTHROUGH_PREFIXES


class OwnConfigError(ValueError):
    """The executor's config file cannot be read or is malformed; the message names the file."""


def load_own_config(file: Path | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The executor's own worker settings: `file`'s entries (values trimmed), then the
    `SLUICEWAY_*` variables of `env` (default: the process environment) that name a worker key."""
    settings: dict[str, str] = {}
    if file is not None:
        try:
            from_file = load_properties(file)
        except OSError as exc:
            raise OwnConfigError(f"--config: cannot read {file}: {exc.strerror or exc}") from None
        except PropertiesSyntaxError as exc:
            raise OwnConfigError(f"--config: {file}: {exc}") from None
        _check_not_empty(from_file, f"--config {file}")
        settings.update(from_file)
    from_env = env_overrides(os.environ if env is None else env, ENV_KEYS, ENV_PREFIXES)
    _check_not_empty(from_env, "a SLUICEWAY_* variable")
    settings.update(from_env)
    return settings


def _check_not_empty(settings: Mapping[str, str], source: str) -> None:
    for key in sorted(WORKER_FALLBACK_KEYS & settings.keys()):
        if not settings[key].strip():
            raise OwnConfigError(
                f"{source}: {key} must not be empty (an empty value would hide the control plane's); "
                "remove it to use the control plane's value"
            )


def merge_worker_config(received: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """The worker config a task runs with: the leader's (from Welcome) with the executor's own
    settings laid over it, key by key."""
    merged = dict(received)
    merged.update(own)
    return merged
