"""Development certificates: a private CA, a certificate every control-plane replica can use, and one
client certificate per caller, for trying and testing TLS and mutual TLS.

    python -m sluiceway_server.dev_certificates var/dev-certs     # or: make dev-certs

writes, in that directory:

    ca.pem, ca.key                  the CA (trust ca.pem on both sides; keep ca.key to sign more)
    server.pem, server.key          CN=sluiceway-replica, valid for localhost, 127.0.0.1, ::1 and
                                    this host's name; usable as a server certificate and, between
                                    replicas, as a client certificate
    <name>.pem, <name>.key          CN=<name>, client certificates (admin, operator, viewer,
                                    executor, replica by default)
    <name>.pem, <name>.key          with `--uri NAME=URI`: a client certificate whose only
                                    identity is that URI SAN (subject empty), as service meshes
                                    issue them, e.g. spiffe://example.org/ns/prod/sa/deployer

Private keys are readable by their owner only. These certificates are for development and tests:
the CA key sits next to the certificates it signs, and nothing revokes them.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import ipaddress
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "DEFAULT_CLIENTS",
    "SERVER_COMMON_NAME",
    "CertificatePair",
    "DevCertificates",
    "make_dev_certificates",
]

DEFAULT_CLIENTS: Final = ("admin", "operator", "viewer", "executor", "replica")
SERVER_COMMON_NAME: Final = "sluiceway-replica"
CA_COMMON_NAME: Final = "Sluiceway development CA"
CA_DAYS: Final = 3650
LEAF_DAYS: Final = 825
# Client names become file names and common names: keep both simple.
_CLIENT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_RESERVED: Final = frozenset({"ca", "server"})
# What a URI SAN of a client certificate must look like here: a scheme, `://`, no spaces.
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
_DNS_NAME: Final = re.compile(
    r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)


@dataclasses.dataclass(frozen=True)
class CertificatePair:
    """A PEM certificate and the PEM private key that goes with it."""

    certificate: Path
    key: Path


@dataclasses.dataclass(frozen=True)
class DevCertificates:
    """Where `make_dev_certificates` wrote everything."""

    directory: Path
    ca: CertificatePair
    server: CertificatePair
    clients: Mapping[str, CertificatePair]
    # The DNS names and IP addresses the server certificate is valid for.
    server_names: tuple[str, ...]

    @property
    def ca_file(self) -> Path:
        return self.ca.certificate

    def client(self, name: str) -> CertificatePair:
        try:
            return self.clients[name]
        except KeyError:
            raise KeyError(f"no client certificate named {name!r}; made: {', '.join(self.clients)}") from None


def make_dev_certificates(
    directory: Path,
    clients: Sequence[str] = DEFAULT_CLIENTS,
    *,
    hosts: Sequence[str] = (),
    uri_clients: Mapping[str, str] | None = None,
) -> DevCertificates:
    """Writes a fresh CA, server certificate and client certificates into `directory` (created if
    missing; files already there with the same names are replaced). `hosts` adds DNS names or IP
    addresses to the server certificate, e.g. the names replicas have in a container network.
    `uri_clients` maps more client names to a URI each: their certificates have an empty subject
    and that URI as their only (critical) subject alternative name, like a mesh's SPIFFE ones."""
    names = list(dict.fromkeys(clients))
    uri_names = dict(uri_clients or {})
    for name in [*names, *uri_names]:
        if not _CLIENT_NAME.fullmatch(name) or name in _RESERVED:
            raise ValueError(
                f"client name {name!r}: use letters, digits, '.', '_' or '-' (up to 64), "
                f"and not {' or '.join(sorted(_RESERVED))}"
            )
    for name, uri in uri_names.items():
        if name in names:
            raise ValueError(f"client name {name!r} is asked for twice")
        if not _URI.fullmatch(uri):
            raise ValueError(f"client {name!r}: {uri!r} is not a URI (scheme://...) without spaces")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME)])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), now, CA_DAYS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signing=False, ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca = _write(directory, "ca", ca_cert, ca_key)

    server_names = _server_names(hosts)
    server = _write(
        directory,
        "server",
        *_leaf(
            SERVER_COMMON_NAME,
            ca_cert,
            ca_key,
            now,
            usages=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
            alt_names=[_general_name(name) for name in server_names],
        ),
    )
    client_pairs = {
        name: _write(
            directory,
            name,
            *_leaf(name, ca_cert, ca_key, now, usages=[ExtendedKeyUsageOID.CLIENT_AUTH], alt_names=[]),
        )
        for name in names
    }
    for name, uri in uri_names.items():
        client_pairs[name] = _write(
            directory,
            name,
            *_leaf(
                None,
                ca_cert,
                ca_key,
                now,
                usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
                alt_names=[x509.UniformResourceIdentifier(uri)],
            ),
        )
    return DevCertificates(
        directory=directory, ca=ca, server=server, clients=client_pairs, server_names=server_names
    )


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    now: datetime.datetime,
    days: int,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        # A little slack for clocks that run behind this one.
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _key_usage(*, signing: bool, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=signing,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf(
    common_name: str | None,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: datetime.datetime,
    *,
    usages: list[x509.ObjectIdentifier],
    alt_names: list[x509.GeneralName],
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name is not None else []
    )
    builder = (
        _builder(subject, ca_cert.subject, key.public_key(), now, LEAF_DAYS)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signing=True, ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if alt_names:
        # RFC 5280 4.2.1.6: with an empty subject the SAN extension is the identity and is critical.
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=common_name is None)
    return builder.sign(ca_key, hashes.SHA256()), key


def _server_names(hosts: Sequence[str]) -> tuple[str, ...]:
    candidates = ["localhost", "127.0.0.1", "::1", *hosts]
    for local in (socket.gethostname(), socket.getfqdn()):
        # A host name that is not a valid DNS name (rare, but possible) is left out.
        if local and _DNS_NAME.fullmatch(local):
            candidates.append(local.lower())
    for host in hosts:
        if not _is_ip(host) and not _DNS_NAME.fullmatch(host):
            raise ValueError(f"host {host!r} is neither an IP address nor a DNS name")
    return tuple(dict.fromkeys(candidates))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _general_name(name: str) -> x509.GeneralName:
    if _is_ip(name):
        return x509.IPAddress(ipaddress.ip_address(name))
    return x509.DNSName(name)


def _write(
    directory: Path, stem: str, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey
) -> CertificatePair:
    cert_path = directory / f"{stem}.pem"
    key_path = directory / f"{stem}.key"
    _write_private(
        key_path,
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return CertificatePair(certificate=cert_path, key=key_path)


def _write_private(path: Path, data: bytes) -> None:
    """Writes `data` to a file only its owner can read, never leaving it readable by others."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluiceway_server.dev_certificates",
        description="Write a development CA, a replica certificate and client certificates "
        "(for TLS and mutual TLS tests; not for production).",
    )
    parser.add_argument("directory", type=Path, help="where to write them (created if missing)")
    parser.add_argument(
        "--client",
        action="append",
        metavar="NAME",
        help=f"a client certificate to make, CN=NAME; repeatable (default: {', '.join(DEFAULT_CLIENTS)})",
    )
    parser.add_argument(
        "--uri",
        action="append",
        default=[],
        metavar="NAME=URI",
        help="a client certificate NAME.pem with an empty subject and URI as its only identity "
        "(e.g. a SPIFFE id); repeatable",
    )
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="NAME",
        help="another DNS name or IP address for the replica certificate; repeatable",
    )
    args = parser.parse_args(argv)
    uri_clients: dict[str, str] = {}
    for item in args.uri:
        name, sep, uri = item.partition("=")
        if not sep:
            parser.error(f"--uri takes NAME=URI, not {item!r}")
        uri_clients[name] = uri
    # Asking only for URI clients makes no CN=... ones.
    clients = args.client or (() if uri_clients else DEFAULT_CLIENTS)
    try:
        made = make_dev_certificates(args.directory, clients, hosts=args.host, uri_clients=uri_clients)
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    out = sys.stdout
    out.write(f"wrote development certificates to {made.directory}/\n")
    out.write(f"  CA:      {made.ca.certificate.name} (key {made.ca.key.name})\n")
    out.write(
        f"  replica: {made.server.certificate.name} (key {made.server.key.name}), CN={SERVER_COMMON_NAME}, "
        f"for {', '.join(made.server_names)}\n"
    )
    for name, pair in made.clients.items():
        identity = f"URI {uri_clients[name]}, empty subject" if name in uri_clients else f"CN={name}"
        out.write(f"  client:  {pair.certificate.name} (key {pair.key.name}), {identity}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
