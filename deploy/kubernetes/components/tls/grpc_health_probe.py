"""A gRPC health check over TLS, for the exec probes of a control-plane replica whose listener uses
TLS (the kubelet's own gRPC probes speak plain gRPC only).

It asks the replica in its own pod (127.0.0.1) for the status of one service of grpc.health.v1 and
exits 0 when it is SERVING, 1 otherwise. It verifies the replica's certificate against the CA of
`tls.ca.file` under the host name the replica advertises, and shows the replica's own certificate
when the listener asks for one (tls.client.auth=required). It reads the files and the name from
the variables the pod gives the replica itself: SLUICEWAY_TLS_CA_FILE,
SLUICEWAY_ADVERTISED_LISTENERS, SLUICEWAY_TLS_CERTIFICATE_FILE and SLUICEWAY_TLS_KEY_FILE.

    python3 grpc_health_probe.py                               # readiness (service "")
    python3 grpc_health_probe.py --service sluiceway.liveness  # liveness
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

CA_ENV = "SLUICEWAY_TLS_CA_FILE"
ADVERTISED_ENV = "SLUICEWAY_ADVERTISED_LISTENERS"
CERTIFICATE_ENV = "SLUICEWAY_TLS_CERTIFICATE_FILE"
KEY_ENV = "SLUICEWAY_TLS_KEY_FILE"


def server_name(advertised: str) -> str:
    """The host of the first advertised listener (`host:port`, `[v6]:port`, a scheme allowed)."""
    first = advertised.split(",", maxsplit=1)[0].strip().split("://", 1)[-1]
    host = first.rpartition(":")[0] if ":" in first else first
    return host.strip("[]")


def check(port: int, service: str, timeout: float, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether `service` is SERVING on 127.0.0.1:`port`, and what to print about it."""
    ca_file = env.get(CA_ENV, "")
    if not ca_file:
        return False, f"{CA_ENV} is not set"
    host = server_name(env.get(ADVERTISED_ENV, ""))
    if not host:
        return False, f"{ADVERTISED_ENV} is not set"
    certificate_file, key_file = env.get(CERTIFICATE_ENV, ""), env.get(KEY_ENV, "")
    try:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=Path(ca_file).read_bytes(),
            private_key=Path(key_file).read_bytes() if key_file else None,
            certificate_chain=Path(certificate_file).read_bytes() if certificate_file else None,
        )
    except OSError as exc:
        return False, f"cannot read the TLS files: {exc}"
    options = [("grpc.ssl_target_name_override", host), ("grpc.default_authority", host)]
    with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=options) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if isinstance(exc, grpc.Call) else None
            name = code.name if code is not None else "error"
            details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
            return False, f"{name}: {details}"
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, status


def parser() -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(description="gRPC health check of this pod's replica over TLS")
    made.add_argument("--service", default="", help='the health service to ask for (default "")')
    made.add_argument("--port", type=int, default=8083, help="the replica's gRPC port (8083)")
    made.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the answer")
    return made


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    serving, message = check(args.port, args.service, args.timeout, os.environ)
    print(f"service {args.service!r}: {message}")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
