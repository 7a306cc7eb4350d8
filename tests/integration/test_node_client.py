"""The API from another language: tests/node/client.test.mjs (@grpc/grpc-js, proto-loader) calls
the real control plane through the bundled protos that `make api-protos` writes."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"


def _bundle(out_dir: Path) -> list[str]:
    spec = importlib.util.spec_from_file_location("sluiceway_protos_bundle", ROOT / "protos" / "bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written: list[str] = module.bundle(out_dir)
    return written


def test_node_client_calls_the_api(control_plane: Any, unique: str, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        pytest.fail("Node or tests/node/node_modules is missing: run `make test-install`")
    protos = tmp_path / "api-protos"
    written = _bundle(protos)
    assert "google/rpc/error_details.proto" in written and "google/api/resource.proto" in written
    env = {
        **os.environ,
        "SLUICEWAY_SERVER": control_plane.address,
        "SLUICEWAY_TEST_ID": unique,
        "SLUICEWAY_API_PROTOS": str(protos),
    }
    result = subprocess.run(
        [node, "--test", "--test-reporter=tap", "client.test.mjs"],
        check=False,
        cwd=NODE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"node --test failed (exit {result.returncode}):\n{output}"
    # The TAP summary: every test and subtest ran and passed.
    assert "# pass 9" in result.stdout and "# fail 0" in result.stdout, output
