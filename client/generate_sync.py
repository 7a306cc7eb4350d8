"""Generate the blocking client, client/sluiceway/client/_sync.py, from the asyncio one, _aio.py.

`AsyncSluicewayClient` in _aio.py is the only hand-written client; `SluicewayClient` is derived
from it, unasync-style, in four steps:

1. The spots where the blocking client deliberately says or does something else (its module
   docstring, a few docstrings, `close()` without a grace period, the typed server stream) are
   swapped for their blocking text. Each one must match exactly once, so editing one of them in
   _aio.py stops generation here instead of going unnoticed.
2. On the tokens: `async` and `await` are dropped, `grpc.aio.X` becomes `grpc.X`, and the names in
   RENAMES take their blocking counterparts (in strings and comments too).
3. Anything asynchronous left over (say a new `*_async` helper or an "async iterator" in a
   docstring) stops generation with its line: it needs a RENAMES or REPLACEMENTS entry.
4. `ruff check --fix-only` (imports re-sorted, a nested yield turned into `yield from`) and
   `ruff format` with the project's settings, so the file passes `make lint` as written.

Run `python client/generate_sync.py` after editing _aio.py; `--check` (run by `make lint` and by
tests/unit/client/test_sync_client_generated.py) fails when _sync.py differs from what it produces.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
CLIENT_DIR = ROOT / "client" / "sluiceway" / "client"
SOURCE = CLIENT_DIR / "_aio.py"
TARGET = CLIENT_DIR / "_sync.py"

HEADER = (
    "# Generated from _aio.py by client/generate_sync.py: do not edit. Change _aio.py and run\n"
    "# `python client/generate_sync.py` (`make lint` fails while this file is stale).\n"
)
MODULE_DOCSTRING = '"""The blocking Sluiceway client."""'

# Names of the asyncio client and their blocking counterparts.
RENAMES: dict[str, str] = {
    "AsyncGenerator": "Generator",
    "AsyncIterator": "Iterator",
    "aclose": "close",
    "AsyncSluicewayClient": "SluicewayClient",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "call_async": "call",
    "AsyncStreamCall": "StreamCall",
}
# Keywords that have no place in blocking code; each goes together with the blank after it.
DROPPED = frozenset({"async", "await"})
# What must not survive into _sync.py, in code, strings or comments alike.
LEFTOVER = re.compile(
    r"""
    \b(?:async|await|asyncio|aio|aclose|anext|aiter)\b  # keywords, modules, methods
    | \bAsync\w*                                        # AsyncIterator, AsyncStreamCall...
    | \w_async\b                                        # call_async, stream_async...
    | \b__a(?:enter|exit|iter|next)__\b                 # the asynchronous protocols
    """,
    re.VERBOSE,
)


class Replacement(NamedTuple):
    """Whole lines of _aio.py (`old`, at any indentation) and the blocking lines that take their
    place (`new`, at the same indentation). Both are written dedented."""

    old: str
    new: str


REPLACEMENTS: tuple[Replacement, ...] = (
    # The class docstring: the blocking client is the plain one, with no event loop to mind.
    Replacement(
        '''
        """The asyncio twin of `SluicewayClient`: a typed, retrying client of the control plane.
        ''',
        '''
        """A typed, retrying client of the Sluiceway control plane.
        ''',
    ),
    Replacement(
        """
        Create it inside a running event loop (gRPC binds the channel to it) and use it as an
        async context manager, or await `close()`.
        """,
        """
        Use it as a context manager, or call `close()`.
        """,
    ),
    # grpc.Channel.close() takes no grace period, so the blocking close() has none either.
    Replacement(
        '''
        async def close(self, grace: float | None = None) -> None:
            """Closes the channels; `grace` seconds let calls in flight finish (None cancels them)."""
            for stubs in self._replicas.opened():
                await stubs.channel.close(grace)
        ''',
        """
        def close(self) -> None:
            for stubs in self._replicas.opened():
                stubs.channel.close()
        """,
    ),
    Replacement(
        '''
        """Every connector, as an async iterator fetching pages as it advances (`timeout` applies to
        ''',
        '''
        """Every connector, fetching pages as the iterator advances (`timeout` applies to
        ''',
    ),
    Replacement(
        '''
        """Status changes of one connector (or all) as an async iterator. The stream is
        opened on first iteration and retried until its first event; it has no deadline
        unless `timeout` is given. Stop iterating and `aclose()` the iterator to cancel it."""
        ''',
        '''
        """Status changes of one connector (or all) as they happen. The stream is opened on
        first iteration and retried until its first event; it has no deadline unless
        `timeout` is given. Stop iterating (or close the iterator) to cancel it."""
        ''',
    ),
    # A blocking stream call is typed by its message; an aio call's messages are checked by
    # Retrier.stream_async as they are read, so it is told their type instead.
    Replacement(
        """
        def open_call(attempt_timeout: float | None) -> AsyncStreamCall:
        """,
        """
        def open_call(attempt_timeout: float | None) -> StreamCall[connectors_pb2.StatusEvent]:
        """,
    ),
    Replacement(
        """
        return _status_events(self._retrier.stream_async(timeout, open_call, connectors_pb2.StatusEvent))
        """,
        """
        return _status_events(self._retrier.stream(timeout, open_call))
        """,
    ),
)


class GenerationError(Exception):
    """_aio.py holds something this script does not know how to make blocking."""


def _lines(block: str) -> list[str]:
    return textwrap.dedent(block).strip("\n").split("\n")


def replace_block(text: str, replacement: Replacement) -> str:
    """`text` with the one occurrence of `replacement.old` swapped for `replacement.new`."""
    old = _lines(replacement.old)
    # The first line sets the indentation; the others must repeat it (blank lines have none).
    parts = [r"^(?P<indent>[ \t]*)" + re.escape(old[0]) + "$"]
    parts += [("(?P=indent)" if line else "") + re.escape(line) + "$" for line in old[1:]]
    matches = list(re.finditer("\n".join(parts), text, flags=re.MULTILINE))
    if len(matches) != 1:
        raise GenerationError(
            f"expected exactly one match in {SOURCE.name}, found {len(matches)}; update REPLACEMENTS "
            f"in {Path(__file__).name} for:\n{textwrap.indent(chr(10).join(old), '    ')}"
        )
    match = matches[0]
    new = "\n".join(match["indent"] + line if line else line for line in _lines(replacement.new))
    return text[: match.start()] + new + text[match.end() :]


def replace_module_docstring(text: str) -> str:
    """`text` with its module docstring swapped for HEADER and MODULE_DOCSTRING."""
    body = ast.parse(text).body
    first = body[0] if body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        raise GenerationError(f"{SOURCE.name} must start with a module docstring")
    lines = text.splitlines(keepends=True)
    assert first.end_lineno is not None
    return "".join([*lines[: first.lineno - 1], HEADER, MODULE_DOCSTRING, "\n", *lines[first.end_lineno :]])


def _rename_words(text: str) -> str:
    return re.sub(r"\b(?:" + "|".join(map(re.escape, RENAMES)) + r")\b", lambda m: RENAMES[m[0]], text)


def desync_tokens(text: str) -> str:
    """Step 2: drops `async` and `await`, turns `grpc.aio.X` into `grpc.X` and applies RENAMES
    (whole words in strings and comments too). Edits go by token position, so nothing else in
    the text moves; ruff format tidies the spacing afterwards."""
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        return line_starts[position[0] - 1] + position[1]

    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    textual = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    edits: list[tuple[int, int, str]] = []
    for index, token in enumerate(tokens):
        start, end = offset(token.start), offset(token.end)
        if token.type == tokenize.NAME and token.string in DROPPED:
            following = tokens[index + 1]
            if following.start[0] != token.start[0]:
                raise GenerationError(f"line {token.start[0]}: `{token.string}` ends its line")
            edits.append((start, offset(following.start), ""))
        elif (
            token.type == tokenize.NAME
            and token.string == "aio"
            and [t.string for t in tokens[index - 2 : index]] == ["grpc", "."]
            and tokens[index + 1].string == "."
        ):
            edits.append((start, offset(tokens[index + 1].end), ""))
        elif token.type == tokenize.NAME and token.string in RENAMES:
            edits.append((start, end, RENAMES[token.string]))
        elif token.type in textual:
            renamed = _rename_words(text[start:end])
            if renamed != text[start:end]:
                edits.append((start, end, renamed))
    for start, end, new in reversed(edits):
        text = text[:start] + new + text[end:]
    return text


def check_leftovers(text: str) -> None:
    """Step 3: fails on anything asynchronous that steps 1 and 2 did not turn blocking."""
    found = [
        f"  line {number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if LEFTOVER.search(line)
    ]
    if found:
        raise GenerationError(
            f"no blocking counterpart known for these lines; add a RENAMES or REPLACEMENTS entry in "
            f"{Path(__file__).name}:\n" + "\n".join(found)
        )


def transform(source: str) -> str:
    """Steps 1 to 3: the blocking client's source, not yet fixed and formatted by ruff."""
    text = replace_module_docstring(source)
    for replacement in REPLACEMENTS:
        text = replace_block(text, replacement)
    text = desync_tokens(text)
    check_leftovers(text)
    return text


def _ruff(*args: str, text: str) -> str:
    # Through stdin, as if the text were _sync.py, so the project's per-file settings apply.
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if result.returncode != 0:
        raise GenerationError(f"ruff {args[0]} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def generate(source: str) -> str:
    """The complete text of _sync.py for the text of _aio.py."""
    text = transform(source)
    # UP028's fix (`yield from`) counts as unsafe only for generators driven with send(), which
    # the client's never are.
    text = _ruff(
        "check", "--fix-only", "--config", "lint.extend-safe-fixes = ['UP028']", "--quiet", text=text
    )
    return _ruff("format", "--quiet", text=text)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="fail if _sync.py is not what _aio.py produces")
    opts = parser.parse_args()
    try:
        produced = generate(SOURCE.read_text(encoding="utf-8"))
    except GenerationError as exc:
        print(f"cannot generate {TARGET.relative_to(ROOT)}: {exc}", file=sys.stderr)
        return 2
    current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else None
    if opts.check:
        if current != produced:
            print(
                f"{TARGET.relative_to(ROOT)} is stale: run `python client/generate_sync.py`",
                file=sys.stderr,
            )
            return 1
        print(f"{TARGET.relative_to(ROOT)} is up to date")
        return 0
    if current != produced:
        TARGET.write_text(produced, encoding="utf-8", newline="\n")
    print(f"generated {TARGET.relative_to(ROOT)} from {SOURCE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
