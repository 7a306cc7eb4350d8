"""Secret config values hidden in every read the API answers (the rules: sluiceway.common.secrets)."""

from __future__ import annotations

from collections.abc import Mapping

from sluiceway.common.secrets import HIDDEN, masked_config, redact_url_credentials
from sluiceway.connect.config import ConfigDef
from sluiceway.connect.plugins import PluginDesc, PluginNotFoundError, PluginRegistry
from sluiceway.connect.validation import framework_config_def, secret_keys
from sluiceway_server.errors import ServerError
from sluiceway_server.herder.plugin_calls import PluginDefinitions

__all__ = ["HIDDEN", "masked"]


async def masked(
    plugins: PluginRegistry,
    definitions: PluginDefinitions,
    values: Mapping[str, str],
    connector_config: Mapping[str, str],
) -> dict[str, str]:
    """`values` with the secret keys (`secret_keys`: typed PASSWORD by the connector's plugin, or
    looking secret) replaced by "[hidden]", and credentials inside URLs in the other values too.

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
        except ServerError:
            framework = framework_config_def(desc.type).keys()
            return {k: (redact_url_credentials(v) if k in framework else HIDDEN) for k, v in values.items()}
    return masked_config(values, secret_keys(connector_config, definition))
