"""Entry point of the `sluiceway` console script."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from sluiceway import __version__
from sluiceway.cli import cluster, connectors, offsets, output, plugins, topics
from sluiceway.cli.common import Context, Handler, UsageError, add_global_options
from sluiceway.client import TARGET_ENV, ConfigInputError, resolve_target
from sluiceway.common.targets import parse_targets
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import SluicewayError

__all__ = ["build_parser", "main"]

# Commands implemented by the server and executor packages: (module, help). Imported only
# when used, so client commands work where those packages' dependencies are not installed.
_DELEGATES: dict[str, tuple[str, str]] = {
    "server": ("sluiceway_server.main", "run a control-plane replica"),
    "executor": ("sluiceway_executor.main", "run an executor attached to the control plane"),
    "dev": (
        "sluiceway_server.dev",
        "run the all-in-one local stack (broker, Spark Connect, server, executor)",
    ),
}

_DESCRIPTION = """\
Sluiceway: Kafka Connect-style data integration with a gRPC control plane and
executors running every pipeline on Spark.

Client commands talk to the control plane at --server ($SLUICEWAY_SERVER,
default localhost:8083; several replicas as HOST:PORT,HOST:PORT,...) and print
tables, or protobuf JSON with --output json.
Over TLS: --tls-ca (and --tls-cert/--tls-key for mutual TLS); a bearer token:
--token-file or --token. Each has an environment variable ($SLUICEWAY_TLS_CA...).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sluiceway",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"sluiceway {__version__}")
    add_global_options(parser, suppress=False)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for module in (connectors, plugins, offsets, topics, cluster):
        module.register(subparsers)
    for name, (_, help_text) in _DELEGATES.items():
        # Only listed here for --help: main() hands these commands over before parsing.
        subparsers.add_parser(name, help=help_text, add_help=False)
    return parser


_GLOBAL_WITH_VALUE = (
    "--server",
    "-o",
    "--output",
    "--timeout",
    "--tls-ca",
    "--tls-cert",
    "--tls-key",
    "--token",
    "--token-file",
)
_GLOBAL_FLAGS = ("--tls",)
# The same options with their value attached: --server=h:1, -ojson.
_GLOBAL_ATTACHED = (*(f"{option}=" for option in _GLOBAL_WITH_VALUE if option.startswith("--")), "-o")


def _delegate_after_global_options(arguments: Sequence[str]) -> str | None:
    """The delegated command if one follows global options (`sluiceway -o json dev`)."""
    index = 0
    while index < len(arguments):
        token = arguments[index]
        if token in _GLOBAL_WITH_VALUE:
            index += 2
        elif token in _GLOBAL_FLAGS or token.startswith(_GLOBAL_ATTACHED):
            index += 1
        else:
            return token if token in _DELEGATES else None
    return None


def _delegate(command: str, argv: Sequence[str]) -> int:
    module_name, _ = _DELEGATES[command]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        sys.stderr.write(
            f"error: `sluiceway {command}` is not available: cannot import {module_name} ({exc}).\n"
            "  It ships with the sluiceway distribution; check the installation.\n"
        )
        return 1
    entry = getattr(module, "main", None)
    if not callable(entry):
        sys.stderr.write(f"error: `sluiceway {command}` is not available: {module_name} has no main().\n")
        return 1
    result = entry(list(argv))
    return result if isinstance(result, int) else 0


def _parse(parser: argparse.ArgumentParser, arguments: Sequence[str]) -> argparse.Namespace:
    """parse_args, except that KEY=VALUE pairs may also follow options (`create c -f x k=v`):
    argparse ends a positional list at the first option, and cannot intermix with subcommands."""
    args, extras = parser.parse_known_args(arguments)
    if extras:
        command_parser: argparse.ArgumentParser = getattr(args, "command_parser", parser)
        if hasattr(args, "pairs") and not any(extra.startswith("-") for extra in extras):
            args.pairs = [*args.pairs, *extras]
        else:
            command_parser.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _check_targets(server: str | None) -> None:
    """A malformed replica list is a usage error naming where it came from, not a failed call."""
    try:
        parse_targets(resolve_target(server))
    except ValueError as exc:
        raise ValueError(f"{'--server' if server else '$' + TARGET_ENV}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one command; returns the exit code (0 ok, 1 failed call, 2 usage error)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in _DELEGATES:
        return _delegate(arguments[0], arguments[1:])
    parser = build_parser()
    misplaced = _delegate_after_global_options(arguments)
    if misplaced is not None:
        # Client options mean nothing to a server or executor, which have their own.
        try:
            parser.error(
                f"`{misplaced}` takes no sluiceway options before it: run `sluiceway {misplaced} ...`"
            )
        except SystemExit as exc:
            return _exit_code(exc)
    try:
        args = _parse(parser, arguments)
    except SystemExit as exc:
        return _exit_code(exc)

    handler: Handler = args.handler
    command_parser: argparse.ArgumentParser = args.command_parser
    try:
        security = TransportSecurity.from_arguments(args)
        _check_targets(args.server)
    except ValueError as exc:
        try:
            command_parser.error(str(exc))
        except SystemExit as usage_exit:
            return _exit_code(usage_exit)
    ctx = Context(target=args.server, timeout=args.timeout, json=args.output == "json", security=security)
    try:
        return handler(ctx, args)
    except UsageError as exc:
        try:
            command_parser.error(str(exc))
        except SystemExit as usage_exit:
            return _exit_code(usage_exit)
    except SluicewayError as exc:
        sys.stderr.write(output.format_error(exc, ctx.connected_target, security, ctx.sent_config))
        return 1
    except ConfigInputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter from
        # failing again while flushing stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1
    finally:
        ctx.close()
    return 2
