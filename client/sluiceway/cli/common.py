"""What every CLI command shares: global options, the client, output mode and input parsing."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from google.protobuf.message import Message

from sluiceway.cli import output
from sluiceway.client import (
    DEFAULT_TARGET,
    DEFAULT_TIMEOUT,
    TARGET_ENV,
    ConfigFile,
    ConfigInputError,
    SluicewayClient,
    connector_id,
    load_config_file,
    parse_key_values,
    resolve_target,
)
from sluiceway.common.transport import TransportSecurity
from sluiceway.common.transport import add_arguments as add_transport_arguments


class UsageError(Exception):
    """A command line that parsed but makes no sense; reported with usage, exit code 2."""


@dataclasses.dataclass
class Context:
    """One CLI invocation: its options, its (lazily connected) client and output streams."""

    target: str | None
    timeout: float | None
    json: bool
    out: TextIO = dataclasses.field(default_factory=lambda: sys.stdout)
    # TLS and token settings from the flags and environment (None: the environment's alone).
    security: TransportSecurity | None = None
    # The config a command sent, so that the errors found in it can be shown next to its values.
    sent_config: Mapping[str, str] | None = None
    _client: SluicewayClient | None = None

    @property
    def client(self) -> SluicewayClient:
        if self._client is None:
            self._client = SluicewayClient(self.target, timeout=self.timeout, security=self.security)
        return self._client

    @property
    def connected_target(self) -> str:
        """Where calls go: --server, else $SLUICEWAY_SERVER, else the default."""
        return resolve_target(self.target)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def write(self, text: str) -> None:
        self.out.write(text)

    def emit(self, data: Message | dict[str, Any] | list[Any], table: Callable[[], None]) -> None:
        """JSON for `--output json`, else the command's table rendering."""
        if self.json:
            output.print_json(data, self.out)
        else:
            table()


Handler = Callable[[Context, argparse.Namespace], int]


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The global options. Subcommands repeat them with suppressed defaults, so they may
    also follow the command (`sluiceway connectors list -o json`) without resetting a value
    given before it."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("global options")
    group.add_argument(
        "--server",
        metavar="HOST:PORT[,HOST:PORT...]",
        default=default(None),
        help="control-plane address, or the replicas' addresses comma-separated: calls move on to the "
        f"next when one fails (default: ${TARGET_ENV}, else {DEFAULT_TARGET})",
    )
    group.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default=default("table"),
        help="tables for people, protobuf JSON for scripts (default: table)",
    )
    group.add_argument(
        "--timeout",
        type=_positive_float,
        metavar="SECONDS",
        default=default(DEFAULT_TIMEOUT),
        help=f"deadline of each call, retries included (default: {DEFAULT_TIMEOUT:g})",
    )
    # --tls, --tls-ca, --tls-cert, --tls-key, --token, --token-file (flags win over SLUICEWAY_*).
    add_transport_arguments(group, suppress=suppress)


def global_parent() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    add_global_options(parent, suppress=True)
    return parent


def add_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    handler: Handler | None,
    *,
    description: str | None = None,
) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        name,
        help=help_text,
        description=description or help_text,
        parents=[global_parent()],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Usage errors found after parsing are reported by the parser of the command.
    parser.set_defaults(handler=handler, command_parser=parser)
    return parser


def add_group(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    parser = add_command(subparsers, name, help_text, None)
    return parser.add_subparsers(title="commands", metavar="COMMAND", required=True)


def add_config_inputs(parser: argparse.ArgumentParser, *, pairs_help: str = "config entries") -> None:
    parser.add_argument("pairs", nargs="*", metavar="KEY=VALUE", help=pairs_help)
    parser.add_argument(
        "-f",
        "--file",
        metavar="FILE",
        help="JSON object (or Kafka Connect's {'name', 'config'} body) or Java .properties file; "
        "'-' reads stdin; KEY=VALUE arguments override its entries",
    )


def read_config_inputs(pairs: Sequence[str], file: str | None) -> tuple[ConfigFile, dict[str, str]]:
    """The file's contents (empty without one) and the KEY=VALUE arguments."""
    try:
        from_args = parse_key_values(pairs)
    except ConfigInputError as exc:
        raise UsageError(str(exc)) from None
    loaded = load_config_file(file) if file else ConfigFile(config={})
    return loaded, from_args


def config_from_inputs(pairs: Sequence[str], file: str | None, *, required: bool = True) -> dict[str, str]:
    """A complete config for create, replace and validate: the file, then the arguments."""
    loaded, from_args = read_config_inputs(pairs, file)
    config = loaded.values_only(file or "config")
    config.update(from_args)
    if required and not config:
        raise UsageError("no config given: pass KEY=VALUE arguments or --file")
    return config


# --- NAME [KEY=VALUE ...] [-f FILE]: create and validate --------------------------------------


def add_named_config_inputs(parser: argparse.ArgumentParser) -> None:
    """NAME, KEY=VALUE entries and --file, where NAME may be left out when the file names the
    connector (Kafka Connect's {"name", "config"} body, or a `name` entry)."""
    parser.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="the connector's name; may be left out when the file names the connector",
    )
    add_config_inputs(parser)


@dataclasses.dataclass(frozen=True)
class NamedConfig:
    """A connector's name and config as the command line and its file give them."""

    name: str
    config: dict[str, str]
    # The file's initial_state (Kafka Connect's create body), if it has one.
    initial_state: str | None


def named_config_from_inputs(name: str | None, pairs: Sequence[str], file: str | None) -> NamedConfig:
    """The name and config of `[NAME] [KEY=VALUE ...] [-f FILE]`: the file's entries, then the
    arguments'; the name from NAME, the file's "name" or the config's `name` entry, which must agree
    with each other. argparse hands the first positional to NAME, so one that holds a `=` is taken
    as the first KEY=VALUE entry instead."""
    if name is not None and "=" in name:
        pairs = [name, *pairs]
        name = None
    loaded, from_args = read_config_inputs(pairs, file)
    config = loaded.values_only(file or "config")
    config.update(from_args)
    if not config:
        raise UsageError("no config given: pass KEY=VALUE arguments or --file")
    given: list[tuple[str, str]] = []
    if name is not None:
        given.append(("NAME", connector_id(name)))
    if loaded.name is not None:
        given.append(('the file\'s "name"', loaded.name))
    if "name" in config:
        given.append(("the config's name entry", config["name"]))
    if not given:
        raise UsageError('no connector name: pass NAME, or a --file that names the connector (its "name")')
    for where, other in given[1:]:
        if other != given[0][1]:
            raise UsageError(
                f"two different connector names: {given[0][0]} is {given[0][1]!r}, {where} is {other!r}"
            )
    return NamedConfig(given[0][1], config, loaded.initial_state)
