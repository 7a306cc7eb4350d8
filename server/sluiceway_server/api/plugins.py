"""PluginService: installed connector plugins, their config definitions, config validation."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from sluiceway.api.v1 import plugins_pb2, plugins_pb2_grpc
from sluiceway.connect.framework_config import common_config_def, sink_config_def, source_config_def
from sluiceway.connect.plugins import PluginType
from sluiceway.connect.validation import password_keys
from sluiceway_server.api import convert
from sluiceway_server.api.errors import invalid_request, mapped
from sluiceway_server.api.names import plugin_name
from sluiceway_server.herder.herder import Herder, with_deadline

Context = grpc.aio.ServicerContext[Any, Any]


class PluginServicer(plugins_pb2_grpc.PluginServiceServicer):
    def __init__(self, herder: Herder, default_timeout: float) -> None:
        self.herder = herder
        self.default_timeout = default_timeout

    @mapped
    async def ListPlugins(
        self, request: plugins_pb2.ListPluginsRequest, context: Context
    ) -> plugins_pb2.ListPluginsResponse:
        # Connector plugins only, whatever include_all_types says: converters are built in, and
        # transforms and predicates are not implemented.
        return plugins_pb2.ListPluginsResponse(
            plugins=[convert.plugin(d) for d in self.herder.plugins.connectors()]
        )

    @mapped
    async def GetPluginConfigDefinition(
        self, request: plugins_pb2.GetPluginConfigDefinitionRequest, context: Context
    ) -> plugins_pb2.PluginConfigDefinition:
        desc = self.herder.plugin(plugin_name(request.name))
        framework = source_config_def() if desc.type is PluginType.SOURCE else sink_config_def()
        own = desc.new_instance().config()
        keys = common_config_def().merge(framework).merge(own).keys()
        return plugins_pb2.PluginConfigDefinition(
            plugin=convert.plugin(desc), keys=[convert.config_key(k) for k in keys.values()]
        )

    @mapped
    async def ValidateConnectorConfig(
        self, request: plugins_pb2.ValidateConnectorConfigRequest, context: Context
    ) -> plugins_pb2.ValidateConnectorConfigResponse:
        config = dict(request.config)
        plugin = plugin_name(request.plugin, "plugin") if request.plugin else None
        if plugin is None and not config.get("connector.class"):
            raise invalid_request("config", "connector.class is required when no plugin is named")
        if plugin is not None:
            self.herder.plugin(plugin)  # NOT_FOUND for an unknown plugin
        remaining = context.time_remaining()
        # Plugin validate() may be slow: run it off the event loop, within the deadline.
        infos = await with_deadline(
            asyncio.to_thread(self.herder.validate, config, plugin),
            self.default_timeout if remaining is None else remaining,
        )
        try:
            secret = password_keys(
                self.herder.plugins, {**config, "connector.class": infos.plugin_class_name}
            )
        except Exception:
            secret = set()
        return convert.validation(infos, secret)
