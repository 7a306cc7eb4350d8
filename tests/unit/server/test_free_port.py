"""free_port draws from below the kernel's ephemeral range, where nothing but a deliberate bind can
take the port before the server it is for binds it, and lets the OS pick where that range is unknown."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from sluiceway_server import embedded
from sluiceway_server.embedded import free_port


def test_the_port_is_below_the_ephemeral_range_and_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("32768\t60999\n")
    monkeypatch.setattr(embedded, "_PORT_RANGE_FILE", ranges)
    ports = {free_port() for _ in range(20)}
    assert all(20_000 <= port < 32_000 for port in ports)
    assert len(ports) > 1  # drawn, not the same one every time
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports.pop()))


def test_a_taken_port_is_never_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("20002 60999")  # leaves 20000 and 20001
    monkeypatch.setattr(embedded, "_PORT_RANGE_FILE", ranges)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        try:
            taken.bind(("127.0.0.1", 20_000))
        except OSError:
            pytest.skip("port 20000 is in use on this machine")
        taken.listen()
        assert {free_port() for _ in range(10)} <= {20_001} | set(range(32_768, 61_000))


def test_without_the_range_the_os_picks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded, "_PORT_RANGE_FILE", tmp_path / "missing")
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
