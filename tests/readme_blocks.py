"""The README's fenced code blocks, found by the heading they sit under, so tests can run them as a
reader would."""

from __future__ import annotations

import dataclasses
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


@dataclasses.dataclass(frozen=True)
class Block:
    heading: str  # the nearest `## ` heading above the block
    language: str
    text: str


def code_blocks(readme: Path = README) -> list[Block]:
    blocks: list[Block] = []
    heading = ""
    fence: tuple[str, list[str]] | None = None
    for line in readme.read_text(encoding="utf-8").splitlines():
        if fence is not None:
            if line.startswith("```"):
                blocks.append(Block(heading, fence[0], "\n".join(fence[1]) + "\n"))
                fence = None
            else:
                fence[1].append(line)
        elif line.startswith("```"):
            fence = (line[3:].strip(), [])
        elif line.startswith("## "):
            heading = line[3:].strip()
    return blocks


def blocks_under(heading: str, language: str, readme: Path = README) -> list[Block]:
    """The blocks in `language` under the `## heading`, in order; at least one, or the README has
    changed under the test."""
    found = [b for b in code_blocks(readme) if b.heading == heading and b.language == language]
    if not found:
        raise LookupError(f"README.md has no {language} block under '## {heading}'")
    return found


def commands(block: Block) -> list[str]:
    """A shell block's command lines, comments and blank lines left out."""
    lines = []
    for line in block.text.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            lines.append(command)
    return lines
