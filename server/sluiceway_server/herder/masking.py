"""Secret config values hidden in every read the API answers."""

from __future__ import annotations

from collections.abc import Mapping

from sluiceway.connect.config import ConfigDef
from sluiceway.connect.plugins import PluginDesc, PluginNotFoundError, PluginRegistry
from sluiceway.connect.validation import framework_config_def, secret_keys
from sluiceway_server.herder.errors import HerderError
from sluiceway_server.herder.plugin_calls import PluginDefinitions

# Kafka masks password values with this literal.
HIDDEN = "[hidden]"


async def masked(
    plugins: PluginRegistry,
    definitions: PluginDefinitions,
    values: Mapping[str, str],
    connector_config: Mapping[str, str],
) -> dict[str, str]:
    """`values` with the password-typed keys of the connector's plugin replaced by "[hidden]".

    The plugin's definition comes from the cache (its config() never runs on the loop). An
    uninstalled plugin has none: keys that look secret are hidden. An installed plugin whose
    config() fails or hangs: every key but the framework's is hidden, as any may be a secret.
    """
    try:
        desc: PluginDesc | None = plugins.resolve(connector_config.get("connector.class", ""))
    except PluginNotFoundError:
        desc = None
    definition: ConfigDef | None = None
    if desc is not None:
        try:
            definition = await definitions.get(desc)
        except HerderError:
            framework = framework_config_def(desc.type).keys()
            return {k: (v if k in framework else HIDDEN) for k, v in values.items()}
    secret = secret_keys(connector_config, definition)
    return {k: (HIDDEN if k in secret else v) for k, v in values.items()}
