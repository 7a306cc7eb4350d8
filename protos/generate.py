"""Generate the Python API package `sluiceway.api.v1` from protos/.

The one script that produces generated code: `make proto` runs it, and
`python protos/generate.py --check` (run by the test suite) fails when the
checked-in code differs from what the protos produce.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PACKAGE_REL = Path("sluiceway/api/v1")
OUT_ROOT = ROOT / "client"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def _include_dirs() -> list[str]:
    import google.api  # type: ignore[import-untyped]  # googleapis-common-protos ships google/api/*.proto
    import grpc_tools

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    googleapis = Path(google.api.__path__[0]).parent.parent
    return [str(PROTO_ROOT), str(well_known), str(googleapis)]


def generate(out_dir: Path) -> list[Path]:
    """Run protoc into out_dir; return the generated files relative to out_dir."""
    protos = sorted((PROTO_ROOT / PACKAGE_REL).glob("*.proto"))
    bin_dir = Path(sys.executable).parent
    args = [
        "grpc_tools.protoc",
        *(f"-I{d}" for d in _include_dirs()),
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *(str(p.relative_to(PROTO_ROOT)) for p in protos),
    ]
    from grpc_tools import protoc

    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted(p.relative_to(out_dir) for p in out_dir.rglob("*") if p.is_file())


def _checked_in() -> list[Path]:
    pkg = OUT_ROOT / PACKAGE_REL
    return sorted(p.relative_to(OUT_ROOT) for p in pkg.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if checked-in code is stale")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        produced = generate(tmp_dir)
        if opts.check:
            stale = [
                str(rel)
                for rel in produced
                if not (OUT_ROOT / rel).exists()
                or not filecmp.cmp(tmp_dir / rel, OUT_ROOT / rel, shallow=False)
            ]
            extra = [str(rel) for rel in _checked_in() if rel not in produced]
            if stale or extra:
                print("generated code is stale; run `make proto`:", *stale, *extra, sep="\n  ")
                return 1
            print(f"generated code is up to date ({len(produced)} files)")
            return 0
        for rel in _checked_in():
            (OUT_ROOT / rel).unlink()
        for rel in produced:
            dest = OUT_ROOT / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp_dir / rel, dest)
        print(f"generated {len(produced)} files into {OUT_ROOT / PACKAGE_REL}")
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
