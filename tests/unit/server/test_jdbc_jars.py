"""Which JDBC driver jars Spark Connect is started with: those that exist, from
SLUICEWAY_JDBC_JARS when it is set (empty: none), else Debian's PostgreSQL driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluiceway_server.embedded import DEFAULT_JDBC_JARS, JDBC_JARS_ENV, jdbc_jars


def test_the_setting_lists_jars_and_only_those_on_disk_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a.jar", tmp_path / "b.jar"
    first.write_bytes(b"PK")
    second.write_bytes(b"PK")
    monkeypatch.setenv(JDBC_JARS_ENV, f"{first}, {tmp_path / 'missing.jar'},{second},")
    assert jdbc_jars() == [first, second]


def test_an_empty_setting_means_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JDBC_JARS_ENV, "")
    assert jdbc_jars() == []


def test_without_the_setting_the_debian_driver_counts_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JDBC_JARS_ENV, raising=False)
    assert jdbc_jars() == [Path(jar) for jar in DEFAULT_JDBC_JARS if Path(jar).is_file()]
