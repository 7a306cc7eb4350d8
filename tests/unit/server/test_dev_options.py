"""`sluiceway dev` refuses bad options before it starts anything."""

from __future__ import annotations

import socket

import pytest

from sluiceway_server.dev import main


def test_replicas_must_be_at_least_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--replicas", "0"]) == 2
    assert "--replicas must be at least 1" in capsys.readouterr().err


def test_every_replica_port_must_be_free(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # The second replica's port is the taken one.
        assert main(["--port", str(port - 1), "--replicas", "2"]) == 2
    assert "is already in use; choose another with --port" in capsys.readouterr().err
