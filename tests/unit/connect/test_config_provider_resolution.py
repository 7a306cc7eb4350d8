"""Config providers (sluiceway.connect.config_providers): ${env:...} and ${file:...} references,
their worker keys, allow-lists, failures that name no value, and validation answers that keep the
raw values."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway.connect.config_providers import (
    ConfigProviders,
    ConfigProvidersError,
    ConfigReferenceError,
    check_config_providers,
    has_references,
    hide_resolved,
    references,
    reverse_transform,
    with_raw_values,
)
from sluiceway.connect.plugins import PluginRegistry
from sluiceway.connect.validation import NOT_SUPPORTED_YET, validate_connector_config
from sluiceway_executor.connectors.filestream import FileStreamSinkConnector

ENV = {"DB_PASSWORD": "hunter2-secret", "APP_USER": "app", "TASKS": "2"}


def both() -> ConfigProviders:
    return ConfigProviders.from_worker_config({"config.providers": "env, file"}, ENV)


def test_references_follow_kafkas_pattern() -> None:
    found = references("a ${env:X} b ${file:/p/q.properties:k} ${vault:a:b:c}")
    assert [(r.provider, r.path, r.key) for r in found] == [
        ("env", "", "X"),
        ("file", "/p/q.properties", "k"),
        ("vault", "a", "b:c"),
    ]
    assert has_references("${env:X}")
    assert not has_references("${X}")
    assert not has_references(None)


def test_env_references_resolve() -> None:
    resolved = both().resolve({"url": "jdbc:x://${env:APP_USER}@h", "n": "${env:TASKS}", "plain": "v"})
    assert resolved == {"url": "jdbc:x://app@h", "n": "2", "plain": "v"}


def test_file_references_resolve(tmp_path: Path) -> None:
    secrets = tmp_path / "db.properties"
    secrets.write_text("# comment\nuser = app\npassword=s3cr\\u0065t\n", encoding="utf-8")
    resolved = both().resolve({"a": f"${{file:{secrets}:password}}", "b": f"${{file:{secrets}:user}}!"})
    assert resolved == {"a": "s3cret", "b": "app!"}


def test_resolution_is_not_recursive() -> None:
    env = {"A": "${env:B}", "B": "no"}
    resolved = ConfigProviders.from_worker_config({"config.providers": "env"}, env).resolve({"k": "${env:A}"})
    assert resolved == {"k": "${env:B}"}


def test_no_provider_enabled_refuses_references() -> None:
    with pytest.raises(ConfigReferenceError) as caught:
        ConfigProviders(environ=ENV).resolve({"pw": "${env:DB_PASSWORD}", "ok": "x"})
    assert list(caught.value.problems) == ["pw"]
    (message,) = caught.value.problems["pw"]
    assert "'env'" in message and "config.providers" in message and "not enable" in message
    assert "hunter2" not in str(caught.value)


def test_unknown_provider_in_a_reference() -> None:
    resolution = both().try_resolve({"k": "${vault:secret/db:pw}"})
    assert resolution.config == {"k": "${vault:secret/db:pw}"}
    assert "'vault'" in resolution.problems["k"][0] and "does not have" in resolution.problems["k"][0]


def test_env_problems() -> None:
    env_only = ConfigProviders.from_worker_config(
        {"config.providers": "env", "config.providers.env.param.allowlist.pattern": "APP_.*"}, ENV
    )
    resolution = env_only.try_resolve(
        {
            "a": "${env:DB_PASSWORD}",
            "b": "${env:APP_MISSING}",
            "c": "${env:x:APP_USER}",
            "d": "${env:APP_USER}",
        }
    )
    assert resolution.config["d"] == "app"
    assert "not allowed by config.providers.env.param.allowlist.pattern" in resolution.problems["a"][0]
    assert "is not set" in resolution.problems["b"][0]
    assert "takes no path" in resolution.problems["c"][0]
    # Without the pattern, every variable may be read.
    assert both().resolve({"a": "${env:DB_PASSWORD}"}) == {"a": "hunter2-secret"}


def test_file_problems(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    inside = allowed / "s.properties"
    inside.write_text("k=v\n", encoding="utf-8")
    outside = tmp_path / "o.properties"
    outside.write_text("k=secret-outside\n", encoding="utf-8")
    link = allowed / "link.properties"
    link.symlink_to(outside)
    files = ConfigProviders.from_worker_config(
        {"config.providers": "file", "config.providers.file.param.allowed.paths": str(allowed)}
    )
    resolution = files.try_resolve(
        {
            "ok": f"${{file:{inside}:k}}",
            "missing.key": f"${{file:{inside}:nope}}",
            "missing.file": f"${{file:{allowed}/none.properties:k}}",
            "outside": f"${{file:{outside}:k}}",
            "escape": f"${{file:{allowed}/../o.properties:k}}",
            "symlink": f"${{file:{link}:k}}",
            "relative": "${file:s.properties:k}",
            "no.path": "${file:k}",
        }
    )
    assert resolution.config["ok"] == "v"
    problems = resolution.problems
    assert set(problems) == {
        "missing.key",
        "missing.file",
        "outside",
        "escape",
        "symlink",
        "relative",
        "no.path",
    }
    assert "has no key 'nope'" in problems["missing.key"][0]
    assert "cannot read file" in problems["missing.file"][0]
    for key in ("outside", "escape", "symlink"):
        assert "outside the directories of config.providers.file.param.allowed.paths" in problems[key][0]
    assert "not an absolute path" in problems["relative"][0]
    assert "needs a path" in problems["no.path"][0]
    assert "secret-outside" not in repr(problems)


def test_worker_keys_are_checked() -> None:
    with pytest.raises(ConfigProvidersError) as caught:
        ConfigProviders.from_worker_config({"config.providers": "env,vault"})
    assert caught.value.key == "config.providers" and "'vault'" in caught.value.message
    with pytest.raises(ConfigProvidersError) as caught:
        ConfigProviders.from_worker_config(
            {"config.providers": "file", "config.providers.file.class": "org.example.Provider"}
        )
    assert caught.value.key == "config.providers.file.class"
    with pytest.raises(ConfigProvidersError) as caught:
        ConfigProviders.from_worker_config({"config.providers.env.param.allowlist.pattern": "("})
    assert caught.value.key == "config.providers.env.param.allowlist.pattern"
    with pytest.raises(ConfigProvidersError) as caught:
        ConfigProviders.from_worker_config({"config.providers.file.param.allowed.paths": "/ok, relative"})
    assert caught.value.key == "config.providers.file.param.allowed.paths"

    class RefusedError(ValueError):
        def __init__(self, key: str, message: str) -> None:
            super().__init__(key)
            self.key = key

    with pytest.raises(RefusedError) as refused:
        check_config_providers({"config.providers": "secrets-manager"}, RefusedError)
    assert refused.value.key == "config.providers"
    check_config_providers(
        {"config.providers": " env , file ", "config.providers.env.param.x": "y"}, RefusedError
    )
    assert ConfigProviders.from_worker_config({"config.providers": ""}).enabled == frozenset()


def test_reverse_transform_restores_references() -> None:
    raw = {"file": "${env:OUT}", "topics": "t", "pw": "x${env:PW}"}
    tasks = [{"file": "/tmp/out", "topics": "t", "task.only": "1"}, {"pw": "xsecret"}]
    assert reverse_transform(raw, tasks) == [
        {"file": "${env:OUT}", "topics": "t", "task.only": "1"},
        {"pw": "x${env:PW}"},
    ]


def test_hide_resolved_turns_values_back_into_references() -> None:
    resolution = both().try_resolve({"pw": "${env:DB_PASSWORD}", "n": "${env:TASKS}"})
    trace = "login failed for password hunter2-secret at jdbc:x://u:p@h (tasks 2)"
    hidden = hide_resolved(trace, resolution.substituted)
    assert hidden == "login failed for password ${env:DB_PASSWORD} at jdbc:x://u:[hidden]@h (tasks 2)"


def test_validation_answers_with_raw_values(tmp_path: Path) -> None:
    registry = PluginRegistry.of(FileStreamSinkConnector)
    raw = {
        "connector.class": "FileStreamSink",
        "topics": "${env:APP_USER}",
        "file": str(tmp_path / "out.txt"),
        "tasks.max": "${env:DB_PASSWORD}",  # resolves, but is no integer: the message keeps the reference
        "batch.size": "${env:NOT_SET}",
    }
    resolution = both().try_resolve(raw)
    infos = validate_connector_config(registry, resolution.config)
    answer = with_raw_values(infos, raw, resolution)
    values = {info.value.name: info.value for info in answer.configs}
    assert values["topics"].value == "${env:APP_USER}" and not values["topics"].errors
    assert values["tasks.max"].value == "${env:DB_PASSWORD}"
    assert values["tasks.max"].errors and "hunter2" not in repr(values["tasks.max"].errors)
    assert values["batch.size"].errors and "is not set" in values["batch.size"].errors[0]
    assert "hunter2" not in repr(answer)
    assert answer.error_count == sum(len(v.errors) for v in values.values())


def test_connector_class_reference_is_refused() -> None:
    registry = PluginRegistry.of(FileStreamSinkConnector)
    env = dict(ENV, CLS="FileStreamSink")
    raw = {"connector.class": "${env:CLS}", "topics": "t", "file": "/tmp/x"}
    resolution = ConfigProviders.from_worker_config({"config.providers": "env"}, env).try_resolve(raw)
    answer = with_raw_values(validate_connector_config(registry, resolution.config), raw, resolution)
    errors = answer.errors()
    assert "connector.class" in errors and "not a config provider reference" in errors["connector.class"][0]


def test_reload_action_message_no_longer_says_there_are_no_providers() -> None:
    message = NOT_SUPPORTED_YET["config.action.reload"]
    assert "no config providers" not in message and "never report a change" in message
