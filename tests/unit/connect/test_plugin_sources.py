"""Where plugin code may come from: installed plugins (entry points) and modules in the worker's
plugin.path directories; any other dotted name is refused before anything is imported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from sluiceway.connect import PluginNotFoundError, PluginRegistry, PluginType
from sluiceway.connect.plugins import PluginSourceError, import_class
from sluiceway_executor.connectors.datagen import DataGenSourceConnector

CONNECTOR_SOURCE = """
from collections.abc import Mapping

from sluiceway.connect import ConfigDef, SourceConnector, Task
from sluiceway_executor.connectors.datagen import DataGenSourceTask


class {name}(SourceConnector):
    def version(self) -> str:
        return "9.9"

    def start(self, props: Mapping[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[Task]:
        return DataGenSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict()]

    def config(self) -> ConfigDef:
        return ConfigDef()


class LocalTask(DataGenSourceTask):
    pass
"""


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resolving from plugin.path makes its directories importable; keep that to each test.
    monkeypatch.setattr(sys, "path", list(sys.path))


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def _plugin_module(directory: Path, module: str, cls: str = "LocalConnector") -> Path:
    path = directory / f"{module}.py"
    path.write_text(CONNECTOR_SOURCE.format(name=cls))
    return path


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60, check=False
    )


def test_a_module_in_plugin_path_resolves(tmp_path: Path) -> None:
    module = _unique("plugin_mod")
    _plugin_module(tmp_path, module)
    registry = PluginRegistry.of(DataGenSourceConnector, plugin_path=[str(tmp_path)])
    desc = registry.resolve(f"{module}.LocalConnector")
    assert desc.type is PluginType.SOURCE
    assert desc.version == "9.9"
    assert desc.cls.__module__ == module
    # The same registry without the plugin path refuses it.
    with pytest.raises(
        PluginNotFoundError, match=r"neither an installed connector plugin nor in plugin\.path"
    ):
        registry.with_plugin_path(()).resolve(f"{module}.LocalConnector")


def test_a_package_in_plugin_path_resolves_its_submodules(tmp_path: Path) -> None:
    package = _unique("plugin_pkg")
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    _plugin_module(tmp_path / package, "connectors", "NestedConnector")
    registry = PluginRegistry.of(plugin_path=[str(tmp_path)])
    assert registry.resolve(f"{package}.connectors.NestedConnector").cls.__name__ == "NestedConnector"
    with pytest.raises(PluginNotFoundError, match="no such class"):
        registry.resolve(f"{package}.connectors.Missing")
    with pytest.raises(PluginNotFoundError, match="LocalTask is not a subclass"):
        registry.resolve(f"{package}.connectors.LocalTask")


def test_a_module_not_in_plugin_path_is_refused(tmp_path: Path) -> None:
    registry = PluginRegistry.of(DataGenSourceConnector, plugin_path=[str(tmp_path)])
    with pytest.raises(PluginNotFoundError) as refused:
        registry.resolve("sluiceway_executor.connectors.datagen.DataGenSourceTask")
    message = str(refused.value)
    assert "neither an installed connector plugin nor in plugin.path" in message
    assert f"no module sluiceway_executor in {tmp_path}" in message
    assert message.endswith("Installed: DataGenSource")


def test_a_namesake_of_an_imported_module_is_refused(tmp_path: Path) -> None:
    # json is already imported from the standard library: a plugin.path json.py is never used.
    assert "json" in sys.modules
    _plugin_module(tmp_path, "json")
    with pytest.raises(PluginNotFoundError, match="already loaded"):
        PluginRegistry.of(plugin_path=[str(tmp_path)]).resolve("json.LocalConnector")


def test_a_namespace_package_is_refused(tmp_path: Path) -> None:
    package = _unique("plugin_ns")
    (tmp_path / package).mkdir()
    _plugin_module(tmp_path / package, "connectors")
    with pytest.raises(PluginNotFoundError, match="namespace package"):
        PluginRegistry.of(plugin_path=[str(tmp_path)]).resolve(f"{package}.connectors.LocalConnector")


def test_this_zen_is_refused_without_importing_it() -> None:
    result = _run(
        """
        import sys
        from sluiceway.connect import PluginNotFoundError, PluginRegistry

        try:
            PluginRegistry.discover().resolve("this.Zen")
        except PluginNotFoundError as e:
            print("REFUSED", e)
        print("IMPORTED" if "this" in sys.modules else "NOT IMPORTED")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "REFUSED this.Zen is neither an installed connector plugin nor in plugin.path" in result.stdout
    assert "NOT IMPORTED" in result.stdout
    assert "Beautiful is better than ugly" not in result.stdout + result.stderr


def test_a_plugin_path_namesake_of_a_standard_module_is_refused_without_importing_either(
    tmp_path: Path,
) -> None:
    # tmp_path/this.py would be found in plugin.path, but an import of `this` would run the
    # standard library's: neither runs.
    (tmp_path / "this.py").write_text("print('PLUGIN THIS RAN')\n")
    result = _run(
        f"""
        import sys
        from sluiceway.connect import PluginNotFoundError, PluginRegistry

        try:
            PluginRegistry.discover(plugin_path=[{str(tmp_path)!r}]).resolve("this.Zen")
        except PluginNotFoundError as e:
            print("REFUSED", e)
        print("IMPORTED" if "this" in sys.modules else "NOT IMPORTED")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "also the name of a module outside plugin.path" in result.stdout
    assert "NOT IMPORTED" in result.stdout
    assert "PLUGIN THIS RAN" not in result.stdout
    assert "Beautiful is better than ugly" not in result.stdout


def test_import_class_sources(tmp_path: Path) -> None:
    module = _unique("plugin_cls")
    _plugin_module(tmp_path, module)
    # An installed package is allowed when listed, and only then.
    task = "sluiceway_executor.connectors.datagen.DataGenSourceTask"
    assert (
        getattr(import_class(task, packages={"sluiceway_executor"}), "__name__", None) == "DataGenSourceTask"
    )
    with pytest.raises(PluginSourceError, match=r"no plugin\.path is set"):
        import_class(task)
    found = import_class(f"{module}.LocalTask", plugin_path=[str(tmp_path)])
    assert getattr(found, "__name__", None) == "LocalTask"
    assert import_class(f"{module}.Nope", plugin_path=[str(tmp_path)]) is None
    # A directory that does not exist holds nothing.
    with pytest.raises(PluginSourceError, match="no module"):
        import_class(f"{module}_x.Thing", plugin_path=[str(tmp_path / "missing")])


def test_with_plugin_path_keeps_the_plugins() -> None:
    registry = PluginRegistry.of(DataGenSourceConnector)
    assert registry.with_plugin_path(()) is registry
    other = registry.with_plugin_path(["/opt/plugins"])
    assert other.plugin_path == ("/opt/plugins",)
    assert registry.plugin_path == ()
    assert [d.class_name for d in other.connectors()] == [d.class_name for d in registry.connectors()]
    assert other.installed_packages() == frozenset({"sluiceway_executor"})
