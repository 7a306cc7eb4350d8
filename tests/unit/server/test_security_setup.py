"""The exposure warning and the replica's transport, from worker configs."""

from __future__ import annotations

import logging

import pytest

from sluiceway.connect.worker_policy import WorkerPolicy
from sluiceway_server.config import WorkerConfig, WorkerConfigError
from sluiceway_server.security.setup import (
    note_confined_paths,
    replica_transport,
    tokens_file,
    warn_if_exposed,
)


def config(**overrides: str) -> WorkerConfig:
    return WorkerConfig.load(overrides={k.replace("_", "."): v for k, v in overrides.items()}, env={})


@pytest.mark.parametrize(
    ("listeners", "authenticated", "encrypted", "expected"),
    [
        ("127.0.0.1:8083", False, False, None),
        ("localhost:8083", False, False, None),
        ("[::1]:8083", False, False, None),
        ("0.0.0.0:8083", False, False, "WITHOUT AUTHENTICATION"),
        ("10.0.0.7:8083", False, True, "WITHOUT AUTHENTICATION"),
        ("0.0.0.0:8083", True, False, "without TLS"),
        ("0.0.0.0:8083", True, True, None),
    ],
)
def test_exposure_warning(
    caplog: pytest.LogCaptureFixture,
    listeners: str,
    authenticated: bool,
    encrypted: bool,
    expected: str | None,
) -> None:
    with caplog.at_level(logging.WARNING):
        warn_if_exposed(config(listeners=listeners), authenticated, encrypted)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if expected is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and expected in warnings[0]


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        ({}, False),
        ({"listeners": "0.0.0.0:8083"}, True),
        ({"listeners": "0.0.0.0:8083", "connector.allowed.paths": "/data"}, False),
        ({"auth.tokens.file": "/etc/tokens"}, True),
    ],
)
def test_the_operator_learns_that_file_connectors_need_allowed_paths(
    caplog: pytest.LogCaptureFixture, settings: dict[str, str], warned: bool
) -> None:
    with caplog.at_level(logging.WARNING):
        note_confined_paths(WorkerPolicy.from_worker_config(settings))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == int(warned)
    if warned:
        assert "Set connector.allowed.paths" in warnings[0] and "FileStreamSource" in warnings[0]


def test_tls_settings_are_checked_together() -> None:
    with pytest.raises(WorkerConfigError) as raised:
        config(**{"tls.certificate.file": "/x.pem"})
    assert raised.value.key == "tls.key.file"
    with pytest.raises(WorkerConfigError) as raised:
        config(**{"tls.client.auth": "required"})
    assert raised.value.key == "tls.client.auth"
    with pytest.raises(WorkerConfigError) as raised:
        config(**{"tls.client.auth": "requested"})
    assert raised.value.key == "tls.client.auth"


def test_tokens_file_errors_name_the_key() -> None:
    assert tokens_file(config()) is None
    with pytest.raises(WorkerConfigError) as raised:
        tokens_file(config(**{"auth.tokens.file": "/nonexistent/tokens"}))
    assert raised.value.key == "auth.tokens.file"


def test_replica_transport_follows_the_listener() -> None:
    plain = replica_transport(config(**{"replica.auth.token": "replica-token-0123456789"}), None)
    assert not plain.uses_tls
    assert plain.metadata() == (("authorization", "Bearer replica-token-0123456789"),)
