"""Log levels in Kafka Connect's words on Python's loggers."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import pytest

from sluiceway_server.log_levels import LogLevelError, LogLevels, UnknownLoggerError


@pytest.fixture
def family() -> Iterator[str]:
    """A fresh logger tree `x.<random>` with a child that has a level and one that has none."""
    name = f"x{uuid.uuid4().hex[:8]}"
    logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger(f"{name}.child").setLevel(logging.ERROR)
    logging.getLogger(f"{name}.plain")
    yield name
    for logger in (name, f"{name}.child", f"{name}.plain", f"{name}.new"):
        logging.getLogger(logger).setLevel(logging.NOTSET)


def test_set_reaches_the_loggers_below_with_their_own_level(family: str) -> None:
    levels = LogLevels()
    assert levels.get(family).level == "INFO"
    assert levels.get(family).last_modified_ms is None
    assert levels.set(family, "debug") == [family, f"{family}.child"]
    assert levels.get(f"{family}.child").level == "DEBUG"
    assert levels.get(f"{family}.plain").level == "DEBUG"  # inherits
    assert levels.get(family).last_modified_ms is not None
    assert levels.set(family, "TRACE") == [family, f"{family}.child"]
    assert logging.getLogger(family).isEnabledFor(5)
    assert levels.set(family, "OFF")
    assert not logging.getLogger(family).isEnabledFor(logging.CRITICAL)
    assert levels.get(family).level == "OFF"


def test_all_lists_root_first_and_the_loggers_with_a_level(family: str) -> None:
    names = [entry.name for entry in LogLevels().all()]
    assert names[0] == "root"
    assert family in names and f"{family}.child" in names
    assert f"{family}.plain" not in names


def test_bad_levels_and_unknown_loggers_change_nothing(family: str) -> None:
    levels = LogLevels()
    with pytest.raises(LogLevelError):
        levels.set(family, "VERBOSE")
    with pytest.raises(LogLevelError):
        levels.set(f" {family}", "INFO")
    assert levels.get(family).level == "INFO"
    with pytest.raises(UnknownLoggerError):
        levels.get(f"{family}.never-made")
    assert levels.set(f"{family}.new", "WARN") == [f"{family}.new"]  # created, as Kafka Connect does
    assert levels.get(f"{family}.new").level == "WARN"
    assert levels.get("root").name == "root"
