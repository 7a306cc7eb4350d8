"""The `sluiceway` command line: client commands for the control plane (`connectors`,
`plugins`, `offsets`, `topics`, `cluster`) and the entry points of `server`, `executor` and
`dev`, which live in their own packages."""

from sluiceway.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
