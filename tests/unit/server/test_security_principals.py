"""The tokens file, the role table and the authenticator's decisions, without a server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluiceway.api.v1 import connectors_pb2, executor_pb2
from sluiceway_server.api.auth import Authenticator, _connector_of, _is_loopback
from sluiceway_server.api.forwarding import FORWARDED_BY, FORWARDED_PRINCIPAL, FORWARDED_ROLE
from sluiceway_server.errors import PermissionDeniedError, UnauthenticatedError
from sluiceway_server.rpc_methods import AUDITED, READS
from sluiceway_server.security.access import ADMIN_CALLS, ATTACH, OPERATOR_CALLS, REFLECTION, allowed
from sluiceway_server.security.principals import Principal, Role, TokensFile, TokensFileError, token_digest

ADMIN_TOKEN = "admin-token-0123456789"
EXECUTOR_TOKEN = "executor-token-0123456789"
REPLICA_TOKEN = "replica-token-0123456789"
CREATE = "/sluiceway.api.v1.ConnectorService/CreateConnector"
PAUSE = "/sluiceway.api.v1.ConnectorService/PauseConnector"
GET = "/sluiceway.api.v1.ConnectorService/GetConnector"

TOKENS = f"""
# role      token      principal
admin       {ADMIN_TOKEN}   alice
operator    sha256:{token_digest("operator-token-0123456789")}   ops bot
executor    {EXECUTOR_TOKEN}   exec-a
executor    -          executor-b
replica     {REPLICA_TOKEN}   replicas
viewer      -          CN=carol,O=Example
"""


class FakeContext:
    def __init__(self, peer: str = "ipv4:10.0.0.5:4000", subject: str | None = None) -> None:
        self._peer = peer
        self._subject = subject

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_subject": [self._subject.encode()]} if self._subject else {}


def _tokens() -> TokensFile:
    return TokensFile.parse(TOKENS.splitlines())


def test_tokens_file_maps_tokens_digests_and_subjects() -> None:
    tokens = _tokens()
    assert tokens.by_token(ADMIN_TOKEN) == Principal("alice", Role.ADMIN, "token")
    assert tokens.by_token("operator-token-0123456789") == Principal("ops bot", Role.OPERATOR, "token")
    assert tokens.by_token("admin-token-012345678") is None
    assert tokens.by_certificate("CN=executor-b") == Principal("executor-b", Role.EXECUTOR, "certificate")
    assert tokens.by_certificate("CN=carol,O=Example") is not None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("admin short alice", "at least 16"),
        ("boss 0123456789abcdef alice", "unknown role"),
        ("admin 0123456789abcdef", "role token principal"),
        ("admin sha256:abc alice", "64 hex"),
        ("admin 0123456789abcdef alice\nviewer - alice", "two roles"),
        ("admin 0123456789abcdef a\nviewer 0123456789abcdef b", "twice"),
    ],
)
def test_tokens_file_refuses_bad_lines_naming_them(text: str, problem: str) -> None:
    with pytest.raises(TokensFileError, match=problem) as raised:
        TokensFile.parse(text.splitlines(), "tokens.txt")
    assert "tokens.txt line" in str(raised.value)


def test_tokens_file_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(TokensFileError, match="cannot read"):
        TokensFile.load(tmp_path / "missing")


def test_roles_cover_every_call_and_nest() -> None:
    assert OPERATOR_CALLS | ADMIN_CALLS == AUDITED
    assert not OPERATOR_CALLS & ADMIN_CALLS
    for method in READS | REFLECTION:
        assert all(allowed(role, method) for role in (Role.VIEWER, Role.OPERATOR, Role.ADMIN, Role.REPLICA))
        assert not allowed(Role.EXECUTOR, method)
    for method in OPERATOR_CALLS:
        assert allowed(Role.OPERATOR, method) and allowed(Role.ADMIN, method)
        assert not allowed(Role.VIEWER, method) and not allowed(Role.REPLICA, method)
    for method in ADMIN_CALLS:
        assert allowed(Role.ADMIN, method) and not allowed(Role.OPERATOR, method)
    assert [role for role in Role if allowed(role, ATTACH)] == [Role.EXECUTOR]
    assert all(allowed(role, "/grpc.health.v1.Health/Check") for role in Role)
    assert not allowed(Role.ADMIN, "/some.Unknown/Method")


def _admit(
    auth: Authenticator, method: str, metadata: tuple[tuple[str, str], ...], context: Any
) -> Principal:
    principal = auth.identify(method, metadata, context)
    auth.authorize(principal, method)
    return principal


def test_authenticator_with_tokens() -> None:
    auth = Authenticator(_tokens())
    bearer = (("authorization", f"Bearer {ADMIN_TOKEN}"),)
    assert _admit(auth, CREATE, bearer, FakeContext()).name == "alice"
    with pytest.raises(UnauthenticatedError):
        _admit(auth, GET, (), FakeContext())
    with pytest.raises(UnauthenticatedError):
        _admit(auth, GET, (("authorization", "Bearer nope-nope-nope-nope"),), FakeContext())
    with pytest.raises(UnauthenticatedError):
        _admit(auth, GET, (("authorization", f"Basic {ADMIN_TOKEN}"),), FakeContext())
    # A certificate authenticates when its subject is listed; a token, when sent, decides.
    assert _admit(auth, GET, (), FakeContext(subject="CN=carol,O=Example")).role is Role.VIEWER
    with pytest.raises(UnauthenticatedError):
        _admit(auth, GET, (), FakeContext(subject="CN=mallory"))
    with pytest.raises(PermissionDeniedError) as denied:
        _admit(auth, PAUSE, (), FakeContext(subject="CN=carol,O=Example"))
    assert denied.value.metadata["role"] == "viewer"
    with pytest.raises(PermissionDeniedError):
        _admit(auth, ATTACH, bearer, FakeContext())
    executor = (("authorization", f"Bearer {EXECUTOR_TOKEN}"),)
    assert _admit(auth, ATTACH, executor, FakeContext()).name == "exec-a"
    with pytest.raises(PermissionDeniedError):
        _admit(auth, GET, executor, FakeContext())


def test_forwarded_identity_is_believed_from_replicas_only() -> None:
    auth = Authenticator(_tokens())
    claimed = ((FORWARDED_PRINCIPAL, "alice"), (FORWARDED_ROLE, "admin"), (FORWARDED_BY, "replica-1"))
    replica = (("authorization", f"Bearer {REPLICA_TOKEN}"),)
    principal = _admit(auth, CREATE, (*replica, *claimed), FakeContext())
    assert principal == Principal("alice", Role.ADMIN, "forwarded")
    # A replica on its own is a reader.
    with pytest.raises(PermissionDeniedError):
        _admit(auth, CREATE, replica, FakeContext())
    # Anyone else claiming an identity is refused, even an admin.
    with pytest.raises(PermissionDeniedError, match="Only a replica"):
        _admit(auth, CREATE, (("authorization", f"Bearer {ADMIN_TOKEN}"), *claimed), FakeContext())
    viewer_claim = ((FORWARDED_PRINCIPAL, "carol"), (FORWARDED_ROLE, "viewer"), (FORWARDED_BY, "r"))
    with pytest.raises(PermissionDeniedError):
        _admit(auth, CREATE, (*replica, *viewer_claim), FakeContext())


def test_without_tokens_everyone_is_anonymous_but_remote_executors() -> None:
    auth = Authenticator(None)
    assert not auth.enabled
    assert _admit(auth, CREATE, (), FakeContext()).via == "none"
    assert _admit(auth, ATTACH, (), FakeContext(peer="ipv4:127.0.0.1:5000")).via == "none"
    assert _admit(auth, ATTACH, (), FakeContext(peer="ipv6:[::1]:5000")).via == "none"
    with pytest.raises(PermissionDeniedError, match="other hosts"):
        _admit(auth, ATTACH, (), FakeContext(peer="ipv4:10.1.2.3:5000"))


def test_loopback_peers() -> None:
    assert _is_loopback("ipv4:127.0.0.1:1") and _is_loopback("ipv6:[::1]:1") and _is_loopback("unix:/x")
    assert not _is_loopback("ipv4:192.168.1.1:1") and not _is_loopback("ipv6:[2001:db8::1]:1")
    assert not _is_loopback("garbage")


def test_audited_connector_names() -> None:
    assert _connector_of(connectors_pb2.CreateConnectorRequest(connector_id="a")) == "a"
    assert _connector_of(connectors_pb2.PauseConnectorRequest(name="connectors/b")) == "b"
    assert _connector_of(connectors_pb2.RestartTaskRequest(name="connectors/c/tasks/0")) == "c"
    assert _connector_of(None) == ""
    assert _connector_of(executor_pb2.Hello()) == ""


def test_audited_connector_of_a_forwarded_call_in_bytes() -> None:
    request = connectors_pb2.DeleteConnectorRequest(name="connectors/d").SerializeToString()
    assert _connector_of(request, "/sluiceway.api.v1.ConnectorService/DeleteConnector") == "d"
    assert _connector_of(b"\xff\xff", "/sluiceway.api.v1.ConnectorService/DeleteConnector") == ""
