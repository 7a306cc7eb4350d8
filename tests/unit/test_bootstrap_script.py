"""deploy/bootstrap.sh, run for real with the programs it calls replaced by recorders: what running
the stack installs (Java when missing, the .venv; never Node, npm, PostgreSQL or anything through
apt when Java is there) and what the tests add (Node, npm, the PostgreSQL server and its JDBC driver
through apt when missing, then the pinned packages). The PostgreSQL programs and the driver jar are
looked for in the test's temp directory (POSTGRES_LIB_DIR, POSTGRES_JDBC_JAR)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the script needs from the system besides the programs it installs or calls to install them.
SYSTEM_TOOLS = ("bash", "basename", "cmp", "cp", "dirname", "mkdir", "ln", "env", "cat", "touch")
RECORDER = """#!/bin/bash
echo "$(basename "$0") $*" >> "{log}"
{extra}
"""
# A python3 that makes the venv it is asked for (with itself as the venv's python) and records pip.
FAKE_PYTHON_EXTRA = """
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin"; ln -sf "$0" "$3/bin/python"; fi
exit 0
"""
# An npm that makes the node_modules directory of the --prefix it is given.
FAKE_NPM_EXTRA = """
while [ $# -gt 0 ]; do if [ "$1" = "--prefix" ]; then mkdir -p "$2/node_modules"; fi; shift; done
exit 0
"""


def _program(directory: Path, name: str, log: Path, extra: str = "exit 0") -> None:
    path = directory / name
    path.write_text(RECORDER.format(log=log, extra=extra))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _checkout(
    tmp_path: Path, *, java: bool, node: bool, root: bool, postgres: bool = True, jdbc_jar: bool = True
) -> tuple[Path, dict[str, str], Path]:
    """A copy of the script in a directory shaped like the checkout, a PATH of recorders and the
    few system tools it uses (so the machine's own node or java are out of sight), PostgreSQL's
    programs and driver jar in the temp directory when asked for, and the log."""
    repo = tmp_path / "repo"
    (repo / "deploy").mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "bootstrap.sh", repo / "deploy" / "bootstrap.sh")
    for lock in ("protos", "tests/node"):
        (repo / lock).mkdir(parents=True)
        (repo / lock / "package-lock.json").write_text('{"lockfileVersion": 3}\n')
    log = tmp_path / "calls.log"
    log.touch()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in SYSTEM_TOOLS:
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    _program(bin_dir, "python3", log, FAKE_PYTHON_EXTRA)
    _program(bin_dir, "apt-get", log)
    _program(bin_dir, "sudo", log, 'shift 0; exec "$@"')
    _program(bin_dir, "npm", log, FAKE_NPM_EXTRA)
    if java:
        _program(bin_dir, "java", log)
    if node:
        _program(bin_dir, "node", log)
    # Who the script runs as is the test's choice, whoever runs the test: `id -u` answers 0 (apt
    # runs without sudo) or an ordinary user's id (apt goes through sudo).
    _program(bin_dir, "id", log, f"echo {0 if root else 1000}; exit 0")
    postgres_lib = tmp_path / "postgresql"
    (postgres_lib / "15" / "bin").mkdir(parents=True)  # a version left without its programs
    if postgres:
        server_bin = postgres_lib / "16" / "bin"
        server_bin.mkdir(parents=True)
        for program in ("initdb", "postgres", "pg_ctl"):
            _program(server_bin, program, log)
    jar = tmp_path / "java" / "postgresql.jar"
    if jdbc_jar:
        jar.parent.mkdir()
        jar.write_bytes(b"PK")
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "VENV": str(tmp_path / "venv"),
        "POSTGRES_LIB_DIR": str(postgres_lib),
        "POSTGRES_JDBC_JAR": str(jar),
    }
    return repo, env, log


def _run(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo / "deploy" / "bootstrap.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _calls(log: Path, program: str) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.split(" ", 1)[0] == program]


def test_what_running_needs_touches_neither_node_nor_apt_when_java_is_there(tmp_path: Path) -> None:
    repo, env, log = _checkout(tmp_path, java=True, node=False, root=False, postgres=False, jdbc_jar=False)
    result = _run(repo, env)
    assert result.returncode == 0, result.stderr
    for program in ("node", "npm", "apt-get", "sudo"):
        assert _calls(log, program) == [], log.read_text()
    pip = [call for call in _calls(log, "python") if " -m pip install " in f" {call} "]
    assert pip and all(" -qq " in call for call in pip), pip  # no pip or setuptools chatter
    assert any("-e .[dev,embedded]" in call for call in pip), pip
    assert not (repo / "protos" / "node_modules").exists()
    # It says what it does in a few lines of its own, and nothing from pip.
    assert result.stdout.splitlines()[-1] == "bootstrap: done"
    assert all(line.startswith("bootstrap: ") for line in result.stdout.splitlines()), result.stdout


def test_what_running_needs_installs_java_through_sudo_when_it_is_missing(tmp_path: Path) -> None:
    repo, env, log = _checkout(tmp_path, java=False, node=False, root=False)
    assert _run(repo, env).returncode == 0
    installs = [call for call in _calls(log, "sudo") if " install " in call]
    assert len(installs) == 1 and installs[0].endswith("openjdk-17-jre-headless"), installs
    assert _calls(log, "npm") == []


def test_without_root_or_sudo_it_stops_and_names_the_package(tmp_path: Path) -> None:
    repo, env, log = _checkout(tmp_path, java=False, node=False, root=False)
    (Path(env["PATH"]) / "sudo").unlink()
    result = _run(repo, env)
    assert result.returncode == 1
    assert "openjdk-17-jre-headless" in result.stderr and "root" in result.stderr, result.stderr
    assert _calls(log, "apt-get") == []


@pytest.mark.parametrize(
    ("node", "postgres", "jdbc_jar"),
    [
        (True, True, True),
        (False, True, True),
        (True, False, True),
        (True, True, False),
        (False, False, False),
    ],
)
def test_what_the_tests_add_is_what_is_missing_and_the_pinned_packages(
    tmp_path: Path, node: bool, postgres: bool, jdbc_jar: bool
) -> None:
    repo, env, log = _checkout(
        tmp_path, java=True, node=node, root=True, postgres=postgres, jdbc_jar=jdbc_jar
    )
    result = _run(repo, env, "--tests")
    assert result.returncode == 0, result.stderr
    apt = [call for call in _calls(log, "apt-get") if " install " in call]
    # npm is always there: only what is missing is installed, all in one apt call.
    wanted = [
        package
        for package, present in (
            ("nodejs", node),
            ("postgresql", postgres),
            ("libpostgresql-jdbc-java", jdbc_jar),
        )
        if not present
    ]
    if wanted:
        assert len(apt) == 1 and apt[0].split("--no-install-recommends ")[1].split() == wanted, apt
        assert f"bootstrap: installing {' '.join(wanted)} with apt" in result.stdout, result.stdout
    else:
        assert apt == [], apt
    # Only the test's own stand-ins were looked at: none of the PostgreSQL programs was run.
    for program in ("initdb", "postgres", "pg_ctl"):
        assert _calls(log, program) == [], log.read_text()
    npm = _calls(log, "npm")
    assert [call.split("--prefix ")[1].split()[0] for call in npm] == ["protos", "tests/node"], npm
    # Installed once: a second run with the same package-lock.json files installs nothing.
    log.write_text("")
    assert _run(repo, env, "--tests").returncode == 0
    assert _calls(log, "npm") == []


def test_an_unknown_argument_is_refused(tmp_path: Path) -> None:
    repo, env, _ = _checkout(tmp_path, java=True, node=True, root=True)
    result = _run(repo, env, "--everything")
    assert result.returncode == 2 and "usage" in result.stderr
    assert os.path.exists(repo / "deploy" / "bootstrap.sh")
