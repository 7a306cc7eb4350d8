"""The checked-in API code must be exactly what protos/ produce (`make proto`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_code_is_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "protos" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_package_imports() -> None:
    from sluiceway.api.v1 import connectors_pb2, connectors_pb2_grpc

    assert connectors_pb2.DESCRIPTOR.services_by_name["ConnectorService"]
    assert hasattr(connectors_pb2_grpc, "ConnectorServiceStub")
