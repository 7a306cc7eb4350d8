"""Where a client finds the control plane: one gRPC target, or a comma list of replica addresses.

    parse_targets("cp1.example:8083,cp2.example:8083,[fd00::3]:8083")
    -> ("cp1.example:8083", "cp2.example:8083", "[fd00::3]:8083")

The client library, the CLI (`--server`, $SLUICEWAY_SERVER) and executors (`sluiceway executor
--server`) read the same syntax:

- Without a comma the text is one gRPC target, handed to gRPC unchanged: `host:port` (a name is
  resolved by gRPC's DNS resolver, every address it returns is used, see `LB_POLICY`), or a target
  with a gRPC scheme (`dns:///name:port`, `ipv4:…`, `unix:…`).
- With commas (and no scheme), each item is one replica, `HOST:PORT`: an IPv4 address, an IPv6
  address in brackets, or a host name. Every item gets a channel of its own, and the caller moves
  from one to the next when a replica fails.

Why not hand the comma list to gRPC: its default resolver (DNS) takes the whole text for one host
name and fails every call ("Misformatted domain name", grpcio 1.85). Its `ipv4:`/`ipv6:` schemes
take lists of literal addresses only, of one family, and a TLS channel then checks a single
name, the channel's authority, against every replica's certificate. A channel per replica
checks each replica's certificate against that replica's own host name, accepts host names and
mixed families, and opens one connection per client at a time.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

__all__ = ["LB_POLICY", "parse_targets"]

# The load-balancing policy of every client channel: one connection, to the first address that
# answers, moving on when it breaks. Every replica answers every call (mutations are forwarded to
# the leader, reads wait for `min_config_position`), so spreading calls buys no correctness, while
# round_robin would keep a connection (and a TLS session) to every address of a DNS name from each
# client and CLI run. Either way, calls in flight on a replica that dies fail UNAVAILABLE and are
# retried under the same request id.
LB_POLICY: Final = "pick_first"

# gRPC's own target schemes: such a target is passed through whole, commas included.
_SCHEMES: Final = ("dns:", "ipv4:", "ipv6:", "unix:", "unix-abstract:", "vsock:", "xds:", "google-c2p:")
_HOST_NAME: Final = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?"
)


def parse_targets(text: str) -> tuple[str, ...]:
    """The addresses in `text`: one gRPC target as given, or each replica of a comma list
    (duplicates dropped, order kept). Raises ValueError naming the item that is not HOST:PORT."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("no control-plane address given")
    if "," not in stripped or stripped.lower().startswith(_SCHEMES):
        return (stripped,)
    items = [item.strip() for item in stripped.split(",")]
    if not all(items):
        raise ValueError(f"empty address in the list {text!r}: separate HOST:PORT items by single commas")
    return tuple(dict.fromkeys(_replica_address(item) for item in items))


def _replica_address(item: str) -> str:
    """`item` as HOST:PORT, IPv6 in brackets; ValueError if it is not that."""
    if item.startswith("["):
        host, close, rest = item[1:].partition("]")
        if not close or not rest.startswith(":"):
            raise ValueError(f"{item!r}: an IPv6 address is written [ADDRESS]:PORT")
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{item!r}: {host!r} is not an IPv6 address") from None
        return f"[{address.compressed}]:{_port(item, rest[1:])}"
    host, colon, port = item.rpartition(":")
    if not colon:
        raise ValueError(f"{item!r}: every address in a list needs its port, HOST:PORT")
    if ":" in host:
        raise ValueError(f"{item!r}: put an IPv6 address in brackets, [ADDRESS]:PORT")
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{item!r}: {host!r} is not an IPv4 address") from None
    elif not _HOST_NAME.fullmatch(host):
        raise ValueError(f"{item!r}: {host!r} is neither an IPv4 address nor a host name")
    return f"{host}:{_port(item, port)}"


def _port(item: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{item!r}: the port must be a number from 1 to 65535")
    return int(text)
