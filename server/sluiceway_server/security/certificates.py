"""A client certificate's identities, as the tokens file names them: its subject, written the way gRPC
reports it (the `x509_subject` of a call's auth context), and its URI subject alternative names
(SPIFFE ids and the like, gRPC's `peer_uri`).

gRPC writes the subject in the RFC 2253 form of its TLS library (BoringSSL, `XN_FLAG_RFC2253`): the
last relative distinguished name first, the attributes of a multi-valued one joined by `+` (also
in reverse), short attribute names (`CN`, `O`, `OU`, `C`, `L`, `ST`, `DC`, `UID`, `emailAddress`,
...), `,+"\\<>;` escaped with a backslash, a leading `#` or space and a trailing space escaped
likewise, and control characters and every byte of a non-ASCII character (in UTF-8) as `\\XX`. An
attribute type the library has no name for is written as its dotted OID and `#` with the hex of its
DER value; `peer_certificate_identity` assumes a UTF8String there, so a subject holding such an
attribute of another string type is not reproduced exactly (name such a client by a URI SAN)."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["describe_identity", "peer_certificate_identity", "rfc2253_subject"]

# Python's getpeercert() names attributes by OpenSSL's long names; these are the short names gRPC's
# BoringSSL prints for them (checked against a real gRPC server). Others are printed as OIDs.
_SHORT_NAMES: Final[Mapping[str, str]] = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "street",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "domainComponent": "DC",
    "userId": "UID",
    "surname": "SN",
    "givenName": "GN",
    "emailAddress": "emailAddress",
    "serialNumber": "serialNumber",
    "title": "title",
    "initials": "initials",
    "generationQualifier": "generationQualifier",
    "pseudonym": "pseudonym",
    "dnQualifier": "dnQualifier",
    "x500UniqueIdentifier": "x500UniqueIdentifier",
    "name": "name",
    "description": "description",
    "postalCode": "postalCode",
    "postalAddress": "postalAddress",
    "businessCategory": "businessCategory",
    "telephoneNumber": "telephoneNumber",
    "unstructuredName": "unstructuredName",
}
_ALWAYS_ESCAPED: Final = frozenset(',+"\\<>;')
_UTF8_STRING_TAG: Final = 0x0C


def _escape(value: str) -> str:
    out: list[str] = []
    last = len(value) - 1
    for index, char in enumerate(value):
        code = ord(char)
        if code > 0x7F:
            out.extend(f"\\{byte:02X}" for byte in char.encode("utf-8"))
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:02X}")
        elif char in _ALWAYS_ESCAPED or (index == 0 and char in " #") or (index == last and char == " "):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _der_utf8_hex(value: str) -> str:
    data = value.encode("utf-8")
    if len(data) < 0x80:
        length = bytes([len(data)])
    else:
        size = len(data).to_bytes((len(data).bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return (bytes([_UTF8_STRING_TAG]) + length + data).hex().upper()


def _attribute(long_name: str, value: str) -> str:
    short = _SHORT_NAMES.get(long_name)
    if short is not None:
        return f"{short}={_escape(value)}"
    oid = long_name
    if not long_name[:1].isdigit():
        # A name Python's OpenSSL knows but BoringSSL does not (organizationIdentifier, ...).
        with contextlib.suppress(ValueError):
            oid = ssl._ASN1Object.fromname(long_name).oid
    return f"{oid}=#{_der_utf8_hex(value)}"


def rfc2253_subject(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """The `subject` of a getpeercert() dict (a tuple of relative distinguished names, each a tuple of
    (long name, value)) as gRPC's x509_subject writes it; "" for an empty subject."""
    flat = [(rdn, name, value) for rdn, attributes in enumerate(subject) for name, value in attributes]
    parts: list[str] = []
    previous: int | None = None
    for rdn, name, value in reversed(flat):
        if previous is not None:
            parts.append("+" if rdn == previous else ",")
        parts.append(_attribute(name, value))
        previous = rdn
    return "".join(parts)


def peer_certificate_identity(peercert: Mapping[str, Any] | None) -> tuple[str | None, list[str]]:
    """(subject, URI SANs) of a verified peer certificate from `ssl.SSLObject.getpeercert()`, for
    `TokensFile.by_certificate_identity`: the subject as gRPC writes it ("" when the certificate has
    an empty one), None and [] without a certificate (an empty dict: the peer sent none)."""
    if not peercert:
        return None, []
    subject = rfc2253_subject(peercert.get("subject", ()))
    uris = [str(value) for kind, value in peercert.get("subjectAltName", ()) if kind == "URI"]
    return subject, uris


def describe_identity(subject: str | None, uris: Sequence[str]) -> str:
    """The identities of a certificate in words, for error messages and logs."""
    shown = f"subject {subject!r}" if subject else "an empty subject"
    if not uris:
        return f"{shown} and no URI SAN"
    return f"{shown} and URI SAN{'s' if len(uris) > 1 else ''} {', '.join(uris)}"
