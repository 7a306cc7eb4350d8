#!/opt/sluiceway/bin/python
"""The container image's health check (the HEALTHCHECK of deploy/image/Dockerfile, installed as
/usr/local/bin/sluiceway-healthcheck; `docker exec CONTAINER sluiceway-healthcheck` runs it by hand).
The exec probes of the Kubernetes TLS component (deploy/kubernetes/components/tls) run it too.

    sluiceway-healthcheck                               # readiness: the health service ""
    sluiceway-healthcheck --service=sluiceway.liveness  # liveness: another health service

One image runs three kinds of process, so the check first looks at the command lines under /proc to
see which one the container runs, then checks that one:

- `sluiceway server`: the replica's gRPC health service must answer SERVING for the service that
  --service names, "" (readiness) by default. The address is the one the replica listens on, worked
  out from its own arguments and the container's environment as `sluiceway server` does (an address
  bound to every interface is asked on 127.0.0.1); SLUICEWAY_HEALTHCHECK_ADDRESS (host:port)
  replaces it. When the listener uses TLS, the check connects as one replica calls another
  (trusting tls.ca.file, presenting the listener's certificate, which a listener with
  tls.client.auth=required demands) and expects the certificate to name the host of the advertised
  address (advertised.listeners; the container's host name when that is unset).
- a Spark Connect server (sluiceway-spark-connect): its gRPC port (spark.connect.grpc.binding.port
  on its command line, 15002 when absent) must accept a TCP connection.
- `sluiceway executor`: it listens on no port, so a running executor is healthy (the container
  stops when it exits).

--service only means something to a control plane: the other processes have no gRPC health
service. It is refused (exit status 2, saying why) when the container runs no control plane, so that
a probe written for the control plane and copied to another container fails visibly rather than
passing without asking anything; next to a control plane, the other processes are checked as
without it.

Exit status 0 when healthy, 1 otherwise, with one line saying why on stdout (Docker keeps it with
the check's result: `docker inspect --format '{{json .State.Health}}' CONTAINER`; the kubelet shows
it in the pod's events when a probe fails). Exit status 2 for arguments it does not take, and for
--service where no control plane runs (Docker reserves 2, but its HEALTHCHECK passes no arguments)."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from sluiceway.common.transport import TransportSecurity

PROC: Final = Path("/proc")
ADDRESS_ENV: Final = "SLUICEWAY_HEALTHCHECK_ADDRESS"
TIMEOUT_S: Final = 3.0
# The control plane's health service for readiness (what --service asks when not given).
READINESS_SERVICE: Final = ""
HEALTHY: Final = 0
UNHEALTHY: Final = 1
USAGE_ERROR: Final = 2
SPARK_CONNECT_CLASS: Final = "org.apache.spark.sql.connect.service.SparkConnectServer"
SPARK_CONNECT_PORT_CONF: Final = "spark.connect.grpc.binding.port"
SPARK_CONNECT_ADDRESS_CONF: Final = "spark.connect.grpc.binding.address"
DEFAULT_SPARK_CONNECT_PORT: Final = 15002
# Hosts that mean "every interface" when bound; the check reaches such a listener on loopback.
_EVERY_INTERFACE: Final = frozenset({"", "0.0.0.0", "::", "[::]"})

Kind = Literal["server", "executor", "spark-connect"]
# `sluiceway COMMAND` through the console script, and the packages' own `python -m` entry points.
_COMMANDS: Final[dict[str, Kind]] = {"server": "server", "executor": "executor"}
_MODULES: Final[dict[str, Kind]] = {"sluiceway_server": "server", "sluiceway_executor": "executor"}


@dataclass(frozen=True)
class Role:
    """A process of the container this check knows: its kind and the arguments that configure it
    (after the command for a server or an executor; the whole Java command line for Spark)."""

    kind: Kind
    pid: int
    arguments: tuple[str, ...]


def role_of(argv: Sequence[str]) -> tuple[Kind, tuple[str, ...]] | None:
    """Which Sluiceway process a command line starts, and its arguments; None for any other."""
    if SPARK_CONNECT_CLASS in argv:
        return "spark-connect", tuple(argv)
    for index, token in enumerate(argv[:-1]):
        following = argv[index + 1]
        if Path(token).name == "sluiceway" and following in _COMMANDS:
            return _COMMANDS[following], tuple(argv[index + 2 :])
        if token == "-m" and following in _MODULES:
            return _MODULES[following], tuple(argv[index + 2 :])
    return None


def find_roles(proc: Path = PROC) -> Iterator[Role]:
    """The known processes under `proc` (a /proc file system), this check's own excepted."""
    own = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == own:
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        argv = [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]
        found = role_of(argv)
        if found is not None:
            yield Role(found[0], int(entry.name), found[1])


def _loopback_if_wildcard(host: str) -> str:
    return "127.0.0.1" if host in _EVERY_INTERFACE else host


def host_of(address: str) -> str:
    """The host of `host:port`, `[v6]:port`, a bare `host` or `[v6]`, without brackets."""
    if address.startswith("["):
        return address[1:].partition("]")[0]
    return address.rpartition(":")[0] if ":" in address else address


@dataclass(frozen=True)
class ServerTarget:
    """How to reach a replica's health service: the address, the channel's security and options."""

    address: str
    security: TransportSecurity
    options: tuple[tuple[str, str], ...]


def server_target(arguments: Sequence[str]) -> ServerTarget:
    """The address and credentials to check the replica started with `arguments` (what follows
    `sluiceway server`), from its config as it loads it. Raises ValueError when the arguments or the
    config are wrong (the replica itself would then have refused to start)."""
    from sluiceway_server.config import WorkerConfigError
    from sluiceway_server.main import load_config, parse_args
    from sluiceway_server.security.setup import replica_transport
    from sluiceway_server.security.tls import listener_tls

    try:
        args = parse_args(list(arguments))
    except SystemExit:  # argparse has printed why on stderr
        raise ValueError(f"cannot read the server's arguments: {' '.join(arguments)}") from None
    try:
        config = load_config(args)
        tls = listener_tls(config)
    except WorkerConfigError as exc:
        raise ValueError(f"invalid worker configuration: {exc}") from None
    host, _, port = config.listen_address().rpartition(":")
    address = os.environ.get(ADDRESS_ENV, "").strip() or f"{_loopback_if_wildcard(host)}:{port}"
    options: tuple[tuple[str, str], ...] = ()
    if tls is not None:
        # Other replicas and executors reach this one by its advertised name, so its certificate names
        # that host, not the loopback address the check connects to; the call carries that name too.
        advertised_host = host_of(config.advertised_address())
        if not advertised_host:
            raise ValueError(
                f"advertised.listeners {config.get('advertised.listeners')!r} names no host to verify "
                "the listener's certificate against"
            )
        options = (
            ("grpc.ssl_target_name_override", advertised_host),
            ("grpc.default_authority", advertised_host),
        )
    return ServerTarget(address, replica_transport(config, tls), options)


def check_server(
    target: ServerTarget, service: str = READINESS_SERVICE, timeout: float = TIMEOUT_S
) -> str | None:
    """None when the replica's health service `service` is SERVING, else why not."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        channel = target.security.channel(target.address, target.options)
    except ValueError as exc:  # a TLS file that cannot be read
        return f"control plane at {target.address}: {exc}"
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            if code == grpc.StatusCode.NOT_FOUND:
                return f"control plane at {target.address} has no health service {service!r}"
            reason = f"{exc.code().name}: {exc.details()}" if isinstance(exc, grpc.Call) else repr(exc)
            return (
                f"control plane at {target.address} did not answer the health check of service "
                f"{service!r} ({reason})"
            )
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return f"control plane at {target.address} is {status} (health service {service!r})"
    return None


def spark_connect_address(java_argv: Sequence[str]) -> str:
    """The host:port a Spark Connect server started with `java_argv` listens on, to check from
    inside its container."""
    settings: dict[str, str] = {}
    for index, token in enumerate(java_argv):
        if token == "--conf" and index + 1 < len(java_argv):
            key, _, value = java_argv[index + 1].partition("=")
        elif token.startswith("--conf="):
            key, _, value = token.removeprefix("--conf=").partition("=")
        else:
            continue
        settings[key.strip()] = value.strip()
    port = settings.get(SPARK_CONNECT_PORT_CONF) or str(DEFAULT_SPARK_CONNECT_PORT)
    host = _loopback_if_wildcard(settings.get(SPARK_CONNECT_ADDRESS_CONF, ""))
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def check_tcp(address: str, timeout: float = TIMEOUT_S) -> str | None:
    """None when `address` (host:port) accepts a TCP connection, else why not."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except (OSError, ValueError) as exc:
        return f"Spark Connect at {address} does not accept connections ({exc})"


def check(role: Role, service: str = READINESS_SERVICE) -> str | None:
    """None when the process of `role` is healthy, else why not; `service` is the health service a
    control plane is asked for (the other kinds have none)."""
    if role.kind == "server":
        try:
            target = server_target(role.arguments)
        except ValueError as exc:
            return f"control plane (pid {role.pid}): {exc}"
        return check_server(target, service)
    if role.kind == "spark-connect":
        return check_tcp(spark_connect_address(role.arguments))
    return None  # an executor: running is all it can show here


def parser() -> argparse.ArgumentParser:
    """The command line: --service only; a usage error exits with status 2."""
    made = argparse.ArgumentParser(
        prog="sluiceway-healthcheck",
        description="Checks the Sluiceway process this container runs (see deploy/README.md).",
    )
    made.add_argument(
        "--service",
        metavar="NAME",
        default=None,
        help='the control plane\'s gRPC health service to ask: "" (readiness, the default) or '
        "sluiceway.liveness; refused where no control plane runs",
    )
    return made


def describe(role: Role, service: str) -> str:
    """How the report names a process it checked (with the health service asked, if not readiness)."""
    if role.kind == "server" and service != READINESS_SERVICE:
        return f"{role.kind} (pid {role.pid}, health service {service!r})"
    return f"{role.kind} (pid {role.pid})"


def main(argv: Sequence[str] | None = None, proc: Path = PROC) -> int:
    try:
        args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # --help (0) or a usage error (2); argparse has printed it
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    roles = list(find_roles(proc))
    if not roles:
        print("unhealthy: no sluiceway server, sluiceway executor or Spark Connect server runs here")
        return UNHEALTHY
    if args.service is not None and not any(role.kind == "server" for role in roles):
        found = ", ".join(describe(role, READINESS_SERVICE) for role in roles)
        print(
            f"--service names a health service of the control plane (sluiceway server), which does not "
            f"run here ({found}): drop --service to check this container"
        )
        return USAGE_ERROR
    service: str = READINESS_SERVICE if args.service is None else args.service
    problems = [problem for problem in (check(role, service) for role in roles) if problem is not None]
    if problems:
        print("unhealthy: " + "; ".join(problems))
        return UNHEALTHY
    print("healthy: " + ", ".join(describe(role, service) for role in roles))
    return HEALTHY


if __name__ == "__main__":
    sys.exit(main())
