"""The ErrorInfo reasons: `sluiceway.errors.Reason` is the proto's ErrorReason, `REASON_ERRORS`
covers every value and agrees with what errors.proto documents, server errors travel as the table
says, and no hand-written module spells a reason as a string literal."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc
import pytest
from google.rpc import status_pb2  # type: ignore[import-untyped]

from sluiceway.api.v1 import errors_pb2
from sluiceway.errors import (
    NOT_RETURNED,
    REASON_ERRORS,
    Reason,
    error_class_for,
    from_status,
    status_code_for,
)
from sluiceway_server.api.errors import status_for
from sluiceway_server.errors import (
    InvalidArgumentError,
    NotFoundError,
    ServerError,
    UnavailableError,
)

ROOT = Path(__file__).resolve().parents[2]
ERRORS_PROTO = ROOT / "protos" / "sluiceway" / "api" / "v1" / "errors.proto"
# The hand-written code the scan covers; the generated API code is left out.
SOURCES = (ROOT / "server", ROOT / "executor", ROOT / "client" / "sluiceway")
GENERATED = ROOT / "client" / "sluiceway" / "api" / "v1"

# Files still allowed to spell these reasons as literals, each with the reason why. Remove an
# entry once its file takes the reasons from Reason.
LITERAL_EXCEPTIONS: Mapping[str, frozenset[str]] = {}


def test_reason_is_exactly_the_proto_enum() -> None:
    proto = [(value.name, value.number) for value in errors_pb2.ErrorReason.DESCRIPTOR.values]
    ours = [(member.value, errors_pb2.ErrorReason.Value(member.value)) for member in Reason]
    assert ours == proto
    assert all(member.name == member.value for member in Reason)


def test_every_reason_has_a_row_and_its_class_follows_the_code() -> None:
    assert set(REASON_ERRORS) == set(Reason)
    for reason, error in REASON_ERRORS.items():
        # The class a client picks from the status code is the one the table names.
        assert error_class_for(status_code_for(reason)) is error, reason


def _documented() -> dict[str, str]:
    """Each ErrorReason value with the comment above it in errors.proto."""
    text = ERRORS_PROTO.read_text(encoding="utf-8")
    body = text[text.index("enum ErrorReason {") :]
    body = body[: body.index("\n}")]
    found: dict[str, str] = {}
    comment: list[str] = []
    for line in body.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("//"):
            comment.append(stripped.removeprefix("//").strip())
            continue
        value = re.fullmatch(r"([A-Z0-9_]+)\s*=\s*\d+;", stripped)
        if value is not None:
            found[value.group(1)] = " ".join(comment)
        comment = []
    return found


def test_the_table_matches_what_errors_proto_documents() -> None:
    documented = _documented()
    assert set(documented) == {member.value for member in Reason}
    for reason in Reason:
        comment = documented[reason.value]
        if reason is Reason.ERROR_REASON_UNSPECIFIED:
            assert status_code_for(reason) is grpc.StatusCode.INTERNAL
            continue
        # Each documented value starts with the status code it is returned with.
        assert comment.split(":", 1)[0] == status_code_for(reason).name, reason
        assert ("Not returned yet" in comment) == (reason in NOT_RETURNED), reason


@pytest.mark.parametrize("reason", sorted(set(Reason) - NOT_RETURNED))
def test_a_server_error_reaches_the_client_as_the_table_says(reason: Reason) -> None:
    status = status_for(ServerError("boom", reason=reason, metadata={"k": "v"}))
    assert status.code is status_code_for(reason)
    details = dict(status.trailing_metadata)["grpc-status-details-bin"]
    parsed = from_status(status_pb2.Status.FromString(details))
    assert type(parsed) is REASON_ERRORS[reason]
    assert parsed.code is status_code_for(reason)
    assert parsed.reason == reason.value
    assert parsed.metadata == {"k": "v"}


def test_a_herder_class_carries_only_reasons_of_its_client_class() -> None:
    with pytest.raises(TypeError, match="NotFoundError cannot carry INVALID_CONFIG"):
        NotFoundError("x", reason=Reason.INVALID_CONFIG)
    assert InvalidArgumentError("x", reason=Reason.LIMIT_EXCEEDED).reason is Reason.LIMIT_EXCEEDED
    assert UnavailableError("x", reason=Reason.NOT_LEADER).reason is Reason.NOT_LEADER


def _python_files() -> Iterator[Path]:
    for base in SOURCES:
        for path in sorted(base.rglob("*.py")):
            if GENERATED in path.parents or "__pycache__" in path.parts:
                continue
            yield path


def test_no_module_spells_a_reason_as_a_string() -> None:
    names = {member.value for member in Reason}
    found: list[str] = []
    for path in _python_files():
        relative = path.relative_to(ROOT).as_posix()
        allowed = LITERAL_EXCEPTIONS.get(relative, frozenset())
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relative)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names and node.value not in allowed:
                found.append(f"{relative}:{node.lineno}: {node.value!r}; use Reason.{node.value}")
    assert not found, "\n".join(found)


def test_no_module_sends_a_reason_that_is_not_returned_yet() -> None:
    unbuilt = {reason.value for reason in NOT_RETURNED}
    errors_module = ROOT / "client" / "sluiceway" / "errors.py"
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.attr}"
        for path in _python_files()
        if path != errors_module
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr in unbuilt
    ]
    assert not found, "\n".join(found)
