"""The worker's settings declared once (sluiceway.connect.worker_settings): what the control plane and
executors derive from the declarations, and the settings tables of docs/CONFIGURATION.md made from them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from sluiceway.connect.config import ConfigException
from sluiceway.connect.framework_config import source_config_def
from sluiceway.connect.restart_config import WORKER_RESTART_CONFIG_DEF, RestartPolicy
from sluiceway.connect.worker_policy import STORAGE_TOPIC_KEYS, WorkerPolicy
from sluiceway.connect.worker_settings import (
    EXECUTOR_CONFIG_DEF,
    WORKER_CONFIG_DEF,
    check_worker_settings,
    worker_default,
    worker_defaults,
)
from sluiceway_executor.heartbeats import DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_HEARTBEAT_TOPIC
from sluiceway_executor.own_config import ENV_KEYS, ENV_PREFIXES
from sluiceway_server.config import DEFAULTS, PASSTHROUGH_PREFIXES, WorkerConfig
from tests.unit.scripts import load_script

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "client" / "generate_settings_doc.py"


def _generator() -> ModuleType:
    return load_script(SCRIPT)


def test_the_readme_settings_tables_are_current() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_generated_text_replaces_only_what_lies_between_the_markers() -> None:
    generator = _generator()
    generated = generator.settings_text()
    assert generated.startswith(generator.BEGIN) and generated.endswith(generator.END + "\n")
    readme = f"before\n{generator.BEGIN}\nstale\n{generator.END}\nafter\n"
    assert generator.replace_settings(readme, generated) == f"before\n{generated}after\n"
    for broken in ("no markers\n", f"{generator.END}\n{generator.BEGIN}\n", f"{generator.BEGIN}\n" * 2):
        with pytest.raises(generator.MarkersError):
            generator.replace_settings(broken, generated)
    # Every key of both definitions has a row, documented.
    for name, key in {**WORKER_CONFIG_DEF.keys(), **EXECUTOR_CONFIG_DEF.keys()}.items():
        assert f"| `{name}` |" in generated
        assert key.documentation.strip(), name


def test_the_control_plane_takes_its_keys_and_defaults_from_the_declarations() -> None:
    assert dict(DEFAULTS) == worker_defaults()
    assert list(DEFAULTS) == list(WORKER_CONFIG_DEF.keys())
    assert PASSTHROUGH_PREFIXES == ("producer.", "consumer.", "admin.")
    # The secret's default is empty text, not the hidden form of a password.
    assert DEFAULTS["replica.auth.token"] == ""
    check_worker_settings(DEFAULTS)
    check_worker_settings({})


def test_the_executor_reads_the_same_variables_as_before() -> None:
    # The key set an executor takes from SLUICEWAY_* variables, as it was when it was written out.
    assert (
        frozenset(
            {
                "bootstrap.servers",
                "client.dns.lookup",
                "security.protocol",
                "config.storage.topic",
                "offset.storage.topic",
                "status.storage.topic",
                "cluster.storage.topic",
                "topic.tracking.enable",
                "topic.creation.enable",
                "heartbeat.interval.ms",
                "heartbeat.records.topic",
                "task.restart.enable",
                "task.restart.backoff.initial.ms",
                "task.restart.backoff.max.ms",
                "task.restart.max.attempts",
                "plugin.path",
                "connector.allowed.paths",
                "connector.client.config.override.policy",
                "connector.client.config.override.allowlist",
                "config.providers",
                "key.converter",
                "value.converter",
                "header.converter",
                # Since issue 35: the executor's own /metrics endpoint, its switch for the counts
                # Spark takes inside each batch's job, and the collector its spans go to.
                "metrics.listeners",
                "metrics.task.counts.enable",
                "tracing.otlp.endpoint",
            }
        )
        == ENV_KEYS
    )
    assert ENV_PREFIXES[:3] == PASSTHROUGH_PREFIXES
    assert {"ssl.", "sasl.", "config.providers."} <= set(ENV_PREFIXES)
    # A key both read is one declaration, not two that could drift apart.
    worker = WORKER_CONFIG_DEF.keys()
    for name, key in EXECUTOR_CONFIG_DEF.keys().items():
        if name in worker:
            assert key is worker[name], name


def test_every_former_copy_of_a_default_reads_the_declaration() -> None:
    assert DEFAULT_HEARTBEAT_TOPIC == worker_default("heartbeat.records.topic") == "connect-heartbeats"
    assert DEFAULT_HEARTBEAT_INTERVAL_MS == int(worker_default("heartbeat.interval.ms")) == 0
    assert sorted(STORAGE_TOPIC_KEYS) == sorted(
        f"{topic}.storage.topic" for topic in ("config", "offset", "status", "cluster")
    )
    for topic_key, default in STORAGE_TOPIC_KEYS.items():
        assert default == worker_default(topic_key)
    assert WorkerPolicy() == WorkerPolicy.from_worker_config(DEFAULTS) == WorkerPolicy.from_worker_config({})
    assert RestartPolicy() == RestartPolicy.from_configs({}) == RestartPolicy.from_configs(DEFAULTS)
    for name, restart_key in WORKER_RESTART_CONFIG_DEF.keys().items():
        assert WORKER_CONFIG_DEF.keys()[name] is restart_key
    # The connector key's documentation names the worker's default it falls back to.
    connector_doc = source_config_def().keys()["heartbeat.records.topic"].documentation
    assert f"default {worker_default('heartbeat.records.topic')}" in connector_doc


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("offset.storage.partitions", "0", "offset.storage.partitions: must be at least 1"),
        ("status.storage.replication.factor", "0", "must be -1 (broker default) or at least 1"),
        ("request.timeout.ms", "1.5", "request.timeout.ms: expected an integer, got '1.5'"),
        ("reflection.internal.enable", " Yes ", "expected true or false, got 'yes'"),
        ("tls.client.auth", "Optional", "tls.client.auth: expected none or required, got 'optional'"),
        ("group.id", "  ", "group.id: must not be empty"),
    ],
)
def test_a_bad_value_is_refused_in_the_control_planes_words(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigException, match=re.escape(message)) as raised:
        check_worker_settings({key: value})
    assert raised.value.name == key
    # WorkerConfig says the same, naming the key.
    with pytest.raises(ValueError, match=re.escape(message)):
        WorkerConfig.load(overrides={key: value}, env={})
