#!/usr/bin/env bash
# Installs what `make run` and `make test` need on a fresh machine: Java 17 (for the
# Spark Connect server) through apt when `java` is missing, a .venv with the pinned
# Python dependencies, the project itself (editable), and the test broker from PyPI;
# Node (Debian's nodejs and npm) when `node` is missing, and the pinned Node packages of protos/ (buf)
# and tests/node/ (the Node client test).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "bootstrap: need root (or sudo) to run: $*" >&2; exit 1; fi
}

if ! command -v java >/dev/null 2>&1; then
  echo "bootstrap: installing Java 17 (openjdk-17-jre-headless) with apt"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends openjdk-17-jre-headless
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "bootstrap: Python 3.11 or newer is required ($PYTHON is $("$PYTHON" --version))" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
echo "bootstrap: installing pinned dependencies into $VENV"
"$VENV/bin/python" -m pip install -q -c requirements.lock -e '.[dev,embedded]'
if ! command -v node >/dev/null 2>&1; then
  echo "bootstrap: installing Node (nodejs, npm) with apt"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
fi
# Pinned Node packages: buf for `make lint` (protos/) and the Node client test's gRPC libraries
# (tests/node). Each is reinstalled only when its package-lock.json differs from the one last installed.
# protos/ uses `npm install --no-save`: buf comes as one binary package per platform, the lock lists
# only those the registry served when it was made, and `npm ci` would refuse the others' absence.
for dir in protos tests/node; do
  stamp="$dir/node_modules/.sluiceway-installed"
  if ! cmp -s "$dir/package-lock.json" "$stamp"; then
    echo "bootstrap: installing the Node packages of $dir"
    if [ "$dir" = protos ]; then
      npm install --prefix "$dir" --no-save --ignore-scripts --no-audit --no-fund --loglevel=error
    else
      npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund --loglevel=error
    fi
    cp "$dir/package-lock.json" "$stamp"
  fi
done
touch "$VENV/.installed"
echo "bootstrap: done"
