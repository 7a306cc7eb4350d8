"""Write the worker settings tables of docs/CONFIGURATION.md from their declarations in
client/sluiceway/connect/worker_settings.py.

The text between `<!-- worker-settings:begin -->` and `<!-- worker-settings:end -->` in
docs/CONFIGURATION.md is made here, and only there: the control plane's keys with their defaults
and documentation, its pass-through prefixes, which keys executors take from `SLUICEWAY_<KEY>`
variables, and the keys the control plane passes on to executors without declaring them itself.
Edit a key's declaration (not the document), then run `python client/generate_settings_doc.py`;
`--check` (run by `make lint` and by tests/unit/connect/test_worker_settings.py) fails when the
document holds something else.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

from sluiceway.connect.config import ConfigKey
from sluiceway.connect.worker_settings import (
    EXECUTOR_CONFIG_DEF,
    EXECUTOR_PASSTHROUGH_PREFIXES,
    PASSTHROUGH_DOC,
    WORKER_CONFIG_DEF,
    WORKER_PASSTHROUGH_PREFIXES,
    worker_defaults,
)

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "docs" / "CONFIGURATION.md"
BEGIN = "<!-- worker-settings:begin -->"
END = "<!-- worker-settings:end -->"
NOTE = (
    "<!-- Made by client/generate_settings_doc.py from client/sluiceway/connect/worker_settings.py: "
    "edit the declarations there, then run the script. -->"
)
_SHOWN = "docs/CONFIGURATION.md"
HEADER = ("| key | default | what it does today |", "|---|---|---|")


class MarkersError(ValueError):
    """The document does not hold the two markers once each, in order."""


def _code(text: str) -> str:
    return f"`{text}`"


def _cell(text: str) -> str:
    """Table cell text: a `|` would end the cell, and a line break the row."""
    return text.replace("|", "\\|").replace("\n", " ")


def _row(*cells: str) -> str:
    return "|" + "|".join(f" {_cell(cell)} " if cell else " " for cell in cells) + "|"


def _rows(keys: Iterable[ConfigKey]) -> list[str]:
    defaults = worker_defaults()
    rows: list[str] = []
    for key in keys:
        default = defaults.get(key.name, "")
        rows.append(_row(_code(key.name), _code(default) if default else "", key.documentation))
    return rows


def _listed(items: Iterable[str], last: str = "and") -> str:
    coded = [_code(item) for item in items]
    return ", ".join(coded[:-1]) + f" {last} " + coded[-1] if len(coded) > 1 else "".join(coded)


def settings_text() -> str:
    """The generated part of the document, markers included, ending in a line break."""
    worker = WORKER_CONFIG_DEF.keys()
    executor = EXECUTOR_CONFIG_DEF.keys()
    passed_on = [key for name, key in executor.items() if name not in worker]
    prefixes = ", ".join(_code(f"{prefix}*") for prefix in WORKER_PASSTHROUGH_PREFIXES)
    lines = [
        BEGIN,
        NOTE,
        *HEADER,
        *_rows(worker.values()),
        _row(prefixes, "", PASSTHROUGH_DOC),
        "",
        "An executor takes `SLUICEWAY_<KEY>` variables for fewer keys: of the table above, "
        + _listed(name for name in executor if name in worker)
        + "; the keys of the table below; and the keys that start with "
        + _listed(EXECUTOR_PASSTHROUGH_PREFIXES, "or")
        + ". Its `--config` file may set any key. The keys below reach executors with the rest of "
        "the control plane's configuration, which takes them from its file or `--set` only, not from "
        "variables:",
        "",
        *HEADER,
        *_rows(passed_on),
        END,
    ]
    return "\n".join(lines) + "\n"


def replace_settings(document: str, generated: str) -> str:
    """``document`` with the text from the begin marker's line to the end marker's line replaced."""
    begin, end = document.find(BEGIN), document.find(END)
    if begin < 0 or end < begin or document.count(BEGIN) != 1 or document.count(END) != 1:
        raise MarkersError(f"{_SHOWN} needs {BEGIN} and then {END}, once each")
    start = document.rfind("\n", 0, begin) + 1
    stop = document.find("\n", end)
    stop = len(document) if stop < 0 else stop + 1
    return document[:start] + generated + document[stop:]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help=f"fail if {_SHOWN}'s settings tables are not current"
    )
    opts = parser.parse_args()
    current = DOCUMENT.read_text(encoding="utf-8")
    try:
        produced = replace_settings(current, settings_text())
    except MarkersError as exc:
        print(exc, file=sys.stderr)
        return 2
    if opts.check:
        if current != produced:
            print(
                f"{_SHOWN}'s worker settings are stale: run `python client/generate_settings_doc.py`",
                file=sys.stderr,
            )
            return 1
        print(f"{_SHOWN}'s worker settings are up to date")
        return 0
    if current != produced:
        DOCUMENT.write_text(produced, encoding="utf-8", newline="\n")
    print(f"wrote {_SHOWN}'s worker settings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
