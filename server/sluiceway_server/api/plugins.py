"""PluginService: installed connector plugins (and transforms and predicates), their config
definitions, config validation."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from sluiceway.api.v1 import plugins_pb2, plugins_pb2_grpc
from sluiceway.connect.framework_config import common_config_def
from sluiceway.connect.plugins import PluginNotFoundError
from sluiceway.connect.validation import secret_keys
from sluiceway_server.api import convert
from sluiceway_server.api.deadline import call_timeout
from sluiceway_server.api.errors import invalid_request, mapped
from sluiceway_server.api.names import plugin_name
from sluiceway_server.api.paging import page_request, take
from sluiceway_server.errors import NotFoundError, ServerError
from sluiceway_server.herder.config_checks import check_config_input
from sluiceway_server.herder.deadlines import with_deadline
from sluiceway_server.herder.fields import map_field
from sluiceway_server.herder.herder import Herder

Context = grpc.aio.ServicerContext[Any, Any]


class PluginServicer(plugins_pb2_grpc.PluginServiceServicer):
    """PluginService on the control plane: the installed connector plugins, their config
    definitions, and the validation of a connector config.

    Owns nothing but the deadline of calls that come without one (`request.timeout.ms`); plugins are
    found, described and validated through the Herder.

    Threading: every method is a coroutine on the control plane's event loop. Plugin code (a plugin's
    `config()` and `validate()`) does not run on the loop: the Herder runs it on a small thread pool
    of its own, each call limited by `plugin.callback.timeout.ms`.

    Guarantees: each call is limited by the caller's remaining time, or by the default deadline. A
    plugin named in the request that is not installed answers NOT_FOUND. Validation never starts a
    connector; its answer hides the values of secret keys (those typed PASSWORD in the plugin's
    definition, or, when that definition cannot be had, those whose names look secret). `ListPlugins`
    lists connector plugins, and with `include_all_types` transforms and predicates too, whose own
    keys `GetPluginConfigDefinition` gives as well.
    """

    def __init__(self, herder: Herder, default_timeout: float) -> None:
        self.herder = herder
        self.default_timeout = default_timeout

    @mapped
    async def ListPlugins(
        self, request: plugins_pb2.ListPluginsRequest, context: Context
    ) -> plugins_pb2.ListPluginsResponse:
        # Connector plugins; with include_all_types also transforms and predicates (converters
        # are built in and chosen by name, not plugins here).
        query = ("plugins", request.include_all_types)
        page = page_request(request.page_size, request.page_token, *query)
        listed = [convert.plugin(d) for d in self.herder.plugins.connectors()]
        if request.include_all_types:
            found = self.herder.plugins.transforms
            listed += [convert.transform_plugin(cls, predicate=False) for cls in found.transforms()]
            listed += [convert.transform_plugin(cls, predicate=True) for cls in found.predicates()]
        listed.sort(key=lambda p: p.class_name)
        chosen, next_token = take(listed, lambda p: p.class_name, page, *query)
        return plugins_pb2.ListPluginsResponse(plugins=chosen, next_page_token=next_token)

    @mapped
    async def GetPluginConfigDefinition(
        self, request: plugins_pb2.GetPluginConfigDefinitionRequest, context: Context
    ) -> plugins_pb2.PluginConfigDefinition:
        name = plugin_name(request.name)
        try:
            desc = self.herder.plugin(name)
        except NotFoundError:
            found = self._transform_or_predicate(name)
            if found is None:
                raise
            cls, predicate = found
            # A plugin's config() is its own code: off the loop, within the call's time.
            definition = await with_deadline(
                asyncio.to_thread(lambda: cls().config()), self._timeout(context)
            )
            return plugins_pb2.PluginConfigDefinition(
                plugin=convert.transform_plugin(cls, predicate),
                keys=[convert.config_key(k) for k in definition.keys().values()],
            )
        definition = await with_deadline(self.herder.plugin_definition(desc), self._timeout(context))
        keys = common_config_def().merge(definition).keys()
        return plugins_pb2.PluginConfigDefinition(
            plugin=convert.plugin(desc), keys=[convert.config_key(k) for k in keys.values()]
        )

    def _transform_or_predicate(self, name: str) -> tuple[type[Any], bool] | None:
        """The transform or predicate ``name`` gives, and whether it is a predicate; None when it
        gives neither."""
        plugins = self.herder.plugins.transforms
        for resolve, predicate in ((plugins.transform, False), (plugins.predicate, True)):
            try:
                return resolve(name), predicate
            except PluginNotFoundError:
                continue
        return None

    @mapped
    async def ValidateConnectorConfig(
        self, request: plugins_pb2.ValidateConnectorConfigRequest, context: Context
    ) -> plugins_pb2.ValidateConnectorConfigResponse:
        config = dict(request.config)
        plugin = plugin_name(request.plugin, "plugin") if request.plugin else None
        if plugin is None and not config.get("connector.class"):
            installed = ", ".join(self.herder.plugins.short_names()) or "none"
            raise invalid_request(
                "config", f"connector.class is required when no plugin is named. Installed: {installed}"
            )
        # The limits of a stored config hold here too: the answer repeats every value it is given.
        check_config_input(config.get("name", ""), config, "config", map_field("config"))
        desc = self.herder.plugin(plugin) if plugin is not None else None  # NOT_FOUND when unknown
        # Validation runs the plugin's config() and validate() off the loop, within its time limit.
        infos = await with_deadline(self.herder.validate(config, plugin), self._timeout(context))
        definition = None
        try:
            desc = desc or self.herder.plugin(infos.plugin_class_name)
            definition = await with_deadline(self.herder.plugin_definition(desc), self._timeout(context))
        except ServerError:
            pass  # an unknown or failing plugin: secret_keys falls back to keys that look secret
        return convert.validation(infos, secret_keys(config, definition))

    def _timeout(self, context: Context) -> float:
        return call_timeout(context, self.default_timeout)
