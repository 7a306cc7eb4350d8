"""Write a self-contained copy of the API contract for clients in other languages.

`make api-protos` runs it. The output directory (default `var/api-protos/`, git-ignored) gets
`sluiceway/api/v1/*.proto` plus the `google/api` and `google/rpc` protos they import
(transitively) and `google/rpc/{status,error_details,code}.proto`, which a client needs to
decode the error details the server sends. The google files are copied from the installed
`googleapis-common-protos` package, whose version is pinned in requirements.lock, so the
bundle always matches what the server was built with. `google/protobuf/*` (the well-known
types, and descriptor.proto, which annotations.proto extends with our method option) is left out:
protoc and the gRPC libraries ship it.
"""

from __future__ import annotations

import argparse
import re
import shutil
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
PACKAGE_REL = Path("sluiceway/api/v1")
DEFAULT_OUT = ROOT / "var" / "api-protos"
GOOGLEAPIS_DIST = "googleapis-common-protos"
# Not imported by our protos, but what clients decode `grpc-status-details-bin` with.
ERROR_PROTOS = ("google/rpc/status.proto", "google/rpc/error_details.proto", "google/rpc/code.proto")
COPIED_PREFIXES = ("google/api/", "google/rpc/")
_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.MULTILINE)


def _imports(path: Path) -> list[str]:
    return _IMPORT.findall(path.read_text(encoding="utf-8"))


def _googleapis_file(rel: str) -> Path:
    dist = metadata.distribution(GOOGLEAPIS_DIST)
    path = Path(str(dist.locate_file(rel)))
    if not path.is_file():
        raise SystemExit(f"{rel} is not in the installed {GOOGLEAPIS_DIST} {dist.version}")
    return path


def collect() -> dict[str, Path]:
    """Map each bundled file (path relative to the include root) to its source."""
    files: dict[str, Path] = {
        str(p.relative_to(PROTO_ROOT)): p for p in sorted((PROTO_ROOT / PACKAGE_REL).glob("*.proto"))
    }
    pending = [imp for src in files.values() for imp in _imports(src)] + list(ERROR_PROTOS)
    while pending:
        rel = pending.pop()
        if rel in files:
            continue
        if rel.startswith(COPIED_PREFIXES):
            files[rel] = _googleapis_file(rel)
            pending.extend(_imports(files[rel]))
        elif rel.startswith("sluiceway/"):
            raise SystemExit(f"{rel} is imported but not under {PROTO_ROOT / PACKAGE_REL}")
        elif not rel.startswith("google/protobuf/"):
            raise SystemExit(f"{rel}: imported from an unknown source; teach protos/bundle.py about it")
    return dict(sorted(files.items()))


def bundle(out_dir: Path) -> list[str]:
    """Write the bundle into out_dir (replacing an earlier one); return the files written."""
    files = collect()
    for top in ("sluiceway", "google"):
        shutil.rmtree(out_dir / top, ignore_errors=True)
    for rel, src in files.items():
        dest = out_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
    return list(files)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="default: var/api-protos")
    opts = parser.parse_args()
    written = bundle(opts.out)
    version = metadata.version(GOOGLEAPIS_DIST)
    print(f"wrote {len(written)} protos into {opts.out} (google protos from {GOOGLEAPIS_DIST} {version})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
