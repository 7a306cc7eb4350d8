"""deploy/image/Dockerfile, /.dockerignore and the two scripts the image carries, checked without a
container engine (our development environment has none, so the image itself is not built here).

The Dockerfile is read with a small parser of its own (logical lines joined at `\\`, comments
dropped, stages split at FROM) and held to what the code and the lock say: the base pinned to an
exact Python and Debian release, pip installing only the locked versions (and the lock holding every
package the project needs), no build tool in the final stage, a numeric non-root user, an
ENTRYPOINT and CMD that the CLI knows, environment variables that point where pip puts the venv and
mean to the control plane what the comments say, every COPY source present and let through by
.dockerignore, which keeps local state (.venv, .git, caches, var/) out of the context.

The scripts run for real: sluiceway-spark-connect against a spark-submit that records its
arguments, and sluiceway-healthcheck against real gRPC health servers (plain and mutual TLS, with
the development certificates) and a /proc tree written by the test, for readiness (the service "")
and for the service --service names, as the exec probes of deploy/kubernetes/components/tls run it.
tests/unit/test_kubernetes_manifests.py runs it once more with a replica pod's variables and files."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Final

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from deploy.image import healthcheck
from sluiceway.cli.main import build_parser
from sluiceway.cli.main import main as cli_main
from sluiceway.common.transport import TransportSecurity
from sluiceway_executor.own_config import load_own_config
from sluiceway_server.config import WorkerConfig
from sluiceway_server.dev_certificates import make_dev_certificates
from sluiceway_server.readiness import LIVENESS_SERVICE
from sluiceway_server.security.tls import listener_tls

ROOT: Final = Path(__file__).resolve().parents[2]
DOCKERFILE: Final = ROOT / "deploy" / "image" / "Dockerfile"
DOCKERIGNORE: Final = ROOT / ".dockerignore"
SPARK_CONNECT_SCRIPT: Final = ROOT / "deploy" / "image" / "spark-connect.sh"
HEALTHCHECK_SCRIPT: Final = ROOT / "deploy" / "image" / "healthcheck.py"
LOCK: Final = ROOT / "requirements.lock"
PYPROJECT: Final = ROOT / "pyproject.toml"

VENV: Final = "/opt/sluiceway"
NON_ROOT_UID: Final = 10001
BASE_IMAGE: Final = re.compile(
    r"python:(?P<major>3)\.(?P<minor>11)\.(?P<patch>\d+)-slim-bookworm(?:@sha256:[0-9a-f]{64})?"
)
# The one package the final stage installs: the Java that Spark Connect runs on.
FINAL_STAGE_PACKAGES: Final = frozenset({"openjdk-17-jre-headless"})
BUILD_TOOLS: Final = re.compile(
    r"^(gcc|g\+\+|cpp|clang|cc|make|cmake|build-essential|binutils|autoconf|automake|libtool|"
    r"pkg-config|git|.*-dev)(:.*|=.*)?$"
)
# pip options that take a value, and the ones an install here may use.
PIP_VALUE_OPTIONS: Final = frozenset({"-c", "--constraint", "-r", "--requirement", "-i", "--index-url"})
PIP_ALLOWED_INSTALL_OPTIONS: Final = frozenset({"-c", "--constraint", "-q", "--quiet", "--no-compile"})
PIP_SUBCOMMANDS: Final = frozenset({"install", "check", "uninstall"})


# --- A Dockerfile parser of our own -----------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    flags: Mapping[str, str]
    arguments: str

    def exec_form(self) -> list[str]:
        """The arguments in exec (JSON) form; fails for shell form, which this image does not use
        where it runs a program."""
        parsed = json.loads(self.arguments)
        assert isinstance(parsed, list) and all(isinstance(item, str) for item in parsed), self
        return [str(item) for item in parsed]


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def of(self, keyword: str) -> list[Instruction]:
        return [instruction for instruction in self.instructions if instruction.keyword == keyword]


@dataclass(frozen=True)
class Dockerfile:
    global_args: Mapping[str, str]
    stages: tuple[Stage, ...]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(stage for stage in self.stages if stage.name == name)


def logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, instruction text) with continuations joined. Comment lines are dropped
    also inside a continued instruction, as Docker does; so are parser directives (`# syntax=`)."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1].strip())
            continue
        pending.append(stripped)
        yield start, " ".join(part for part in pending if part)
        pending = []
    assert not pending, f"the instruction of line {start} continues past the end of the file"


def split_flags(text: str) -> tuple[dict[str, str], str]:
    """The leading `--name=value` (or bare `--name`) flags of an instruction, and the rest."""
    flags: dict[str, str] = {}
    rest = text
    while rest.startswith("--"):
        token, _, rest = rest.partition(" ")
        name, _, value = token[2:].partition("=")
        flags[name] = value
        rest = rest.lstrip()
    return flags, rest


def substitute(text: str, variables: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in variables, f"{name} has no value in {text!r}"
        return variables[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, text)


def parse_dockerfile(text: str) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for number, line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            global_args[name] = default
            continue
        if keyword == "FROM":
            flags, rest = split_flags(rest)
            words = rest.split()
            assert len(words) in (1, 3), f"line {number}: FROM IMAGE [AS NAME]"
            stage_name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(substitute(words[0], global_args), stage_name))
            continue
        assert stages, f"line {number}: {keyword} before the first FROM"
        flags, rest = split_flags(rest) if keyword in ("COPY", "ADD", "HEALTHCHECK", "RUN") else ({}, rest)
        stages[-1].instructions.append(Instruction(number, keyword, flags, rest))
    return Dockerfile(global_args, tuple(stages))


def env_settings(stage: Stage) -> dict[str, str]:
    """The stage's ENV as the image has it (`KEY=VALUE` pairs; `$PATH` left as written)."""
    settings: dict[str, str] = {}
    for instruction in stage.of("ENV"):
        for pair in shlex.split(instruction.arguments):
            key, sep, value = pair.partition("=")
            assert sep, f"line {instruction.line}: ENV KEY=VALUE, got {pair!r}"
            settings[key] = value
    return settings


def shell_commands(run: Instruction) -> list[list[str]]:
    """The simple commands of a RUN in shell form: split at ;, &&, || and |, then into words."""
    commands = []
    for part in re.split(r"&&|\|\||;|\|", run.arguments):
        words = shlex.split(part)
        if words:
            commands.append(words)
    return commands


def copies(stage: Stage) -> list[tuple[Mapping[str, str], list[str], str]]:
    """(flags, sources, destination) of every COPY of the stage."""
    found = []
    for instruction in stage.of("COPY"):
        words = (
            instruction.exec_form()
            if instruction.arguments.startswith("[")
            else instruction.arguments.split()
        )
        assert len(words) >= 2, f"line {instruction.line}: COPY SOURCE... DEST"
        found.append((instruction.flags, words[:-1], words[-1]))
    return found


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_the_parser_joins_continuations_and_drops_comments() -> None:
    parsed = parse_dockerfile(
        "# syntax=docker/dockerfile:1\nARG BASE=python:3.11.1-slim-bookworm\nFROM ${BASE} AS one\n"
        "RUN a \\\n# a comment inside\n    && b\nCOPY --from=one --chmod=0755 x /y\nFROM one\n"
        'CMD ["server"]\n'
    )
    assert [stage.base for stage in parsed.stages] == ["python:3.11.1-slim-bookworm", "one"]
    run = parsed.stage("one").of("RUN")[0]
    assert run.line == 4 and shell_commands(run) == [["a"], ["b"]]
    assert copies(parsed.stage("one")) == [({"from": "one", "chmod": "0755"}, ["x"], "/y")]
    assert parsed.final.of("CMD")[0].exec_form() == ["server"]


# --- The base, the stages and pip -------------------------------------------------------------------


def external_bases(dockerfile: Dockerfile) -> list[str]:
    names = {stage.name for stage in dockerfile.stages if stage.name}
    return [stage.base for stage in dockerfile.stages if stage.base not in names]


def test_every_stage_starts_from_one_exactly_pinned_python_on_bookworm(dockerfile: Dockerfile) -> None:
    bases = external_bases(dockerfile)
    assert len(dockerfile.stages) >= 2, "a build stage and a final stage"
    # The venv made in the build stage refers to the base's interpreter: the final stage needs the same.
    assert set(bases) == {bases[0]} and len(bases) == len(dockerfile.stages)
    match = BASE_IMAGE.fullmatch(bases[0])
    assert match is not None, f"{bases[0]}: not python:3.11.PATCH-slim-bookworm"
    assert "latest" not in bases[0]
    requires = SpecifierSet(tomllib.loads(PYPROJECT.read_text())["project"]["requires-python"])
    assert requires.contains(f"{match['major']}.{match['minor']}.{match['patch']}")


def test_the_build_stage_installs_the_project_with_the_lock_as_constraints(dockerfile: Dockerfile) -> None:
    build = dockerfile.stages[0]
    commands = [command for run in build.of("RUN") for command in shell_commands(run)]
    assert ["python", "-m", "venv", VENV] in commands
    assert env_settings(build).get("PIP_NO_CACHE_DIR") == "1"
    pip_commands = [command for command in commands if Path(command[0]).name in ("pip", "pip3")]
    assert pip_commands, "the build stage runs pip"
    installs = 0
    for command in pip_commands:
        assert command[0] == f"{VENV}/bin/pip", f"{command}: pip of the venv, nothing else"
        subcommand, options = command[1], command[2:]
        assert subcommand in PIP_SUBCOMMANDS, command
        if subcommand != "install":
            continue
        installs += 1
        constraints: list[str] = []
        targets: list[str] = []
        words = iter(options)
        for word in words:
            if word.startswith("-"):
                assert word in PIP_ALLOWED_INSTALL_OPTIONS, f"{command}: {word} is not allowed here"
                if word in PIP_VALUE_OPTIONS:
                    constraints.append(next(words))
            else:
                targets.append(word)
        # Only the project itself ("." without an extra), every dependency held by the lock.
        assert constraints == ["requirements.lock"] and targets == ["."], command
    assert installs == 1
    uninstalls = [command[3:] for command in pip_commands if command[1] == "uninstall"]
    assert uninstalls == [["setuptools"]], "only ensurepip's setuptools is removed"
    sources = {source for _, found, _ in copies(build) for source in found}
    assert {"pyproject.toml", "requirements.lock"} <= sources


def exact_pin(requirement: Requirement) -> str | None:
    specifiers = list(requirement.specifier)
    if len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version:
        return specifiers[0].version
    return None


def locked_versions() -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in LOCK.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        requirement = Requirement(line)
        version = exact_pin(requirement)
        assert version is not None, f"requirements.lock: {line!r} is not NAME==VERSION"
        pins[str(canonicalize_name(requirement.name))] = version
    return pins


def runtime_closure() -> dict[str, Requirement]:
    """Every distribution `pip install .` brings in (no extras), each with the first requirement
    that named it: pyproject's dependencies, then theirs from the installed metadata."""
    found: dict[str, Requirement] = {}
    extras_seen: dict[str, set[str]] = {}
    pending = [Requirement(text) for text in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]]
    while pending:
        requirement = pending.pop()
        name = str(canonicalize_name(requirement.name))
        extras = set(requirement.extras)
        if name in extras_seen and extras <= extras_seen[name]:
            continue
        found.setdefault(name, requirement)
        extras_seen[name] = extras_seen.get(name, set()) | extras
        environments = [{"extra": extra} for extra in sorted(extras_seen[name]) or [""]]
        for text in metadata.distribution(name).requires or []:
            dependency = Requirement(text)
            if dependency.marker is None or any(dependency.marker.evaluate(env) for env in environments):
                pending.append(dependency)
    return found


def test_every_package_the_image_installs_has_one_exact_version() -> None:
    """With `-c requirements.lock`, pip installs the locked version of each package the project
    needs. A package missing from the lock is acceptable only where pyproject itself pins it
    exactly (then pip has no choice either); the lock and pyproject must agree where both pin."""
    lock = locked_versions()
    project_pins = {
        str(canonicalize_name(requirement.name)): exact_pin(requirement)
        for requirement in map(Requirement, tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"])
    }
    closure = runtime_closure()
    assert {"grpcio", "grpcio-health-checking", "pyspark", "confluent-kafka", "pyarrow"} <= closure.keys()
    unpinned = []
    for name in sorted(closure):
        project_pin = project_pins.get(name)
        if name in lock:
            assert project_pin in (None, lock[name]), f"{name}: pyproject {project_pin}, lock {lock[name]}"
        elif project_pin is None:
            unpinned.append(name)
    assert not unpinned, (
        f"installed by the image at no fixed version (add them to requirements.lock): {unpinned}"
    )
    # The embedded broker (Tansu) and the development tools are extras, and the image installs none.
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    for extra in ("embedded", "dev"):
        assert not {canonicalize_name(Requirement(text).name) for text in extras[extra]} & closure.keys()


def test_the_final_stage_has_java_and_the_venv_and_no_build_tool(dockerfile: Dockerfile) -> None:
    final = dockerfile.final
    installed: set[str] = set()
    for run in final.of("RUN"):
        commands = shell_commands(run)
        for command in commands:
            assert Path(command[0]).name not in ("pip", "pip3", "pip3.11"), (
                f"line {run.line}: pip in the final stage"
            )
            assert command[:3] != ["python", "-m", "pip"], f"line {run.line}"
            if command[:2] == ["apt-get", "install"]:
                installed |= {word for word in command[2:] if not word.startswith("-")}
                # Same layer: the package lists are not left in the image.
                assert ["rm", "-rf", "/var/lib/apt/lists/*"] in commands, f"line {run.line}"
                assert "--no-install-recommends" in command
    assert installed == FINAL_STAGE_PACKAGES
    assert not [package for package in installed if BUILD_TOOLS.match(package)]
    from_build = [(flags, sources, dest) for flags, sources, dest in copies(final) if "from" in flags]
    assert [(sources, dest) for _, sources, dest in from_build] == [([VENV], VENV)]
    assert from_build[0][0]["from"] == dockerfile.stages[0].name


# --- User, environment, entry point -----------------------------------------------------------------


def test_the_final_stage_runs_as_a_fixed_numeric_user_that_exists(dockerfile: Dockerfile) -> None:
    users = dockerfile.final.of("USER")
    assert users, "the final stage sets USER"
    # Numeric, so that Kubernetes' runAsNonRoot can check it without the image's /etc/passwd.
    uid, _, gid = users[-1].arguments.partition(":")
    assert uid == str(NON_ROOT_UID) and gid == str(NON_ROOT_UID)
    commands = [command for run in dockerfile.final.of("RUN") for command in shell_commands(run)]
    useradd = [command for command in commands if command[0] == "useradd"]
    assert len(useradd) == 1 and ["--uid", uid] == useradd[0][1:3] and "--create-home" in useradd[0]
    home = useradd[0][useradd[0].index("--home-dir") + 1]
    assert dockerfile.final.of("WORKDIR")[-1].arguments == home
    # Nothing after USER switches back to root.
    assert dockerfile.final.instructions.index(users[-1]) > max(
        dockerfile.final.instructions.index(run) for run in dockerfile.final.of("RUN")
    )


def test_the_environment_points_at_the_venv_and_its_pyspark(dockerfile: Dockerfile) -> None:
    env = env_settings(dockerfile.final)
    assert env["PATH"].split(":")[0] == f"{VENV}/bin"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == f"{VENV}/bin/python"
    match = BASE_IMAGE.fullmatch(external_bases(dockerfile)[0])
    assert match is not None
    # Where pip puts pyspark in a venv of the base's Python, and what that directory holds.
    purelib = sysconfig.get_path(
        "purelib",
        "venv",
        vars={"base": VENV, "platbase": VENV, "py_version_short": f"{match['major']}.{match['minor']}"},
    )
    assert env["SPARK_HOME"] == f"{purelib}/pyspark"
    import pyspark

    local_spark_home = Path(pyspark.__file__).parent
    assert (local_spark_home / "bin" / "spark-submit").is_file()
    assert any((local_spark_home / "jars").glob("spark-connect_*.jar")), "the Spark Connect server's jar"


def test_the_image_makes_the_control_plane_listen_beyond_loopback_and_not_the_executor(
    dockerfile: Dockerfile, tmp_path: Path
) -> None:
    env = env_settings(dockerfile.final)
    sluiceway_env = {key: value for key, value in env.items() if key.startswith("SLUICEWAY_")}
    assert sluiceway_env == {"SLUICEWAY_LISTENERS": "0.0.0.0:8083"}
    assert WorkerConfig.load(env=sluiceway_env).listen_address() == "0.0.0.0:8083"
    assert WorkerConfig.load(env={}).listen_address() == "127.0.0.1:8083"
    # As the Dockerfile and the documentation say: the variable wins over a file, a flag over both.
    properties = tmp_path / "worker.properties"
    properties.write_text("listeners=127.0.0.1:9000\n")
    assert WorkerConfig.load(properties, env=sluiceway_env).listen_address() == "0.0.0.0:8083"
    flag = {"listeners": "0.0.0.0:9001"}
    assert WorkerConfig.load(properties, flag, env=sluiceway_env).listen_address() == "0.0.0.0:9001"
    assert load_own_config(env=sluiceway_env) == {}
    exposed = {port for expose in dockerfile.final.of("EXPOSE") for port in expose.arguments.split()}
    assert exposed == {"8083", "15002"}


def subcommands(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    raise AssertionError("the CLI has no subcommands")


def test_entrypoint_is_the_console_script_and_cmd_the_server(dockerfile: Dockerfile) -> None:
    entrypoint = dockerfile.final.of("ENTRYPOINT")[-1].exec_form()
    cmd = dockerfile.final.of("CMD")[-1].exec_form()
    assert entrypoint == ["sluiceway"] and cmd == ["server"]
    target = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"][entrypoint[0]]
    module_name, _, function_name = target.partition(":")
    assert getattr(importlib.import_module(module_name), function_name) is cli_main
    assert {"server", "executor"} <= subcommands(build_parser())


@pytest.mark.parametrize("command", ["server", "executor"])
def test_the_commands_the_image_runs_exist(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli_main([command, "--help"])
    assert stopped.value.code == 0
    assert f"usage: sluiceway {command}" in capsys.readouterr().out


# --- COPY and .dockerignore -------------------------------------------------------------------------


def ignore_pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker reads it: `*` and `?` within one path element, `**` any
    number of them, anchored at the context's root."""
    regex = ""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**", index):
            index += 2
            if pattern.startswith("/", index):
                index += 1
            regex += ".*" if index >= len(pattern) else "(.*/)?"
            continue
        if char == "*":
            regex += "[^/]*"
        elif char == "?":
            regex += "[^/]"
        elif char == "\\" and index + 1 < len(pattern):
            index += 1
            regex += re.escape(pattern[index])
        else:
            regex += re.escape(char)
        index += 1
    return re.compile(f"^{regex}$")


def dockerignore_rules() -> list[tuple[bool, re.Pattern[str]]]:
    """(exception, pattern) per line, in order."""
    rules = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        cleaned = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
        rules.append((exception, ignore_pattern(cleaned)))
    return rules


def ignored(path: str, rules: Sequence[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether Docker leaves `path` (relative to the context) out: the last rule that matches the
    path or one of its parent directories decides."""
    parts = path.split("/")
    parents = ["/".join(parts[: index + 1]) for index in range(len(parts) - 1)]
    excluded = False
    for exception, regex in rules:
        if exception != excluded:
            continue
        if regex.match(path) or any(regex.match(parent) for parent in parents):
            excluded = not exception
    return excluded


def context_sources(dockerfile: Dockerfile) -> list[str]:
    return [
        source.rstrip("/") or "."
        for stage in dockerfile.stages
        for flags, sources, _ in copies(stage)
        if "from" not in flags
        for source in sources
    ]


def test_every_copy_source_exists_and_gets_through_dockerignore(dockerfile: Dockerfile) -> None:
    rules = dockerignore_rules()
    sources = context_sources(dockerfile)
    assert {"client", "server", "executor", "deploy/image/healthcheck.py"} <= set(sources)
    for source in sources:
        path = ROOT / source
        assert path.exists(), f"COPY {source}: not in the repository"
        files = [path] if path.is_file() else [item for item in path.rglob("*") if item.is_file()]
        kept = [item for item in files if "__pycache__" not in item.parts]
        assert kept, f"COPY {source}: nothing to copy"
        for item in kept:
            relative = item.relative_to(ROOT).as_posix()
            assert not ignored(relative, rules), f"COPY {source}: .dockerignore leaves out {relative}"
    # What the project's build reads: the readme and license pyproject names.
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    assert {project["readme"], *project["license-files"]} <= set(sources)


@pytest.mark.parametrize(
    "path",
    [
        ".venv",
        ".venv/bin/python",
        ".git",
        ".git/HEAD",
        ".mypy_cache/3.11/x.json",
        ".ruff_cache/x",
        ".pytest_cache/v/cache",
        ".hypothesis/examples/x",
        "var/coverage/.coverage",
        "var/dev-certs/ca.key",
        "sluiceway.egg-info/PKG-INFO",
        "tests/unit/test_container_image.py",
        "protos/node_modules/x/package.json",
        "tests/node/node_modules/x/index.js",
        "client/sluiceway/__pycache__/errors.cpython-311.pyc",
        "server/sluiceway_server/__pycache__/main.cpython-311.pyc",
        "build/lib/sluiceway/__init__.py",
        "spark-warehouse/t/part-0",
        "deploy/kubernetes/control-plane.yaml",
    ],
)
def test_dockerignore_keeps_local_state_out(path: str) -> None:
    assert ignored(path, dockerignore_rules())


def test_the_dockerignore_reader_follows_docker() -> None:
    rules = [(False, ignore_pattern("*")), (True, ignore_pattern("client")), (False, ignore_pattern("**/x"))]
    assert ignored("README.md", rules) and ignored("a/b", rules)
    assert (
        not ignored("client/a/b.py", rules) and ignored("client/a/x", rules) and ignored("client/x/y", rules)
    )
    assert ignore_pattern("a?c").match("abc") and not ignore_pattern("a?c").match("a/c")


# --- The scripts in the image -----------------------------------------------------------------------


def installed_as(dockerfile: Dockerfile, source: Path) -> str:
    """Where the final stage copies `source` to; the copy must make it executable."""
    relative = source.relative_to(ROOT).as_posix()
    for flags, sources, dest in copies(dockerfile.final):
        if sources == [relative]:
            assert flags.get("chmod") == "0755", f"{relative} is copied without --chmod=0755"
            return dest
    raise AssertionError(f"the final stage does not copy {relative}")


def test_the_health_check_is_the_script_the_image_carries(dockerfile: Dockerfile) -> None:
    checks = dockerfile.final.of("HEALTHCHECK")
    assert len(checks) == 1
    check = checks[0]
    keyword, _, rest = check.arguments.partition(" ")
    assert keyword == "CMD"
    command = json.loads(rest)
    assert command == [installed_as(dockerfile, HEALTHCHECK_SCRIPT)]
    # It runs with the venv's Python (its shebang), which has grpcio-health-checking and sluiceway.
    assert HEALTHCHECK_SCRIPT.read_text().splitlines()[0] == f"#!{VENV}/bin/python"
    assert HEALTHCHECK_SCRIPT.stat().st_mode & stat.S_IXUSR
    # Run as a program, as Docker and the exec probes run it (--help stops it before it looks at /proc;
    # an argument it does not know is a usage error, status 2).
    done = run_healthcheck_script("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: sluiceway-healthcheck"), done.stderr
    assert "--service NAME" in done.stdout
    done = run_healthcheck_script("--port=8083")
    assert done.returncode == 2 and "unrecognized arguments: --port=8083" in done.stderr
    assert not done.stdout
    # Docker's reading of the durations: a timeout longer than the check's own gRPC deadline.
    assert {"interval", "timeout", "start-period", "retries"} <= check.flags.keys()
    assert float(check.flags["timeout"].removesuffix("s")) > healthcheck.TIMEOUT_S


def run_healthcheck_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK_SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_spark_connect_script_is_in_the_image(dockerfile: Dockerfile) -> None:
    assert installed_as(dockerfile, SPARK_CONNECT_SCRIPT) == "/usr/local/bin/sluiceway-spark-connect"
    assert SPARK_CONNECT_SCRIPT.stat().st_mode & stat.S_IXUSR


def run_spark_connect(tmp_path: Path, env: Mapping[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The script with SPARK_HOME at a spark-submit that prints its arguments, one per line."""
    spark_home = tmp_path / "spark"
    (spark_home / "bin").mkdir(parents=True, exist_ok=True)
    submit = spark_home / "bin" / "spark-submit"
    submit.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    submit.chmod(0o755)
    base = {"PATH": os.environ["PATH"], "SPARK_HOME": str(spark_home), "PYSPARK_PYTHON": f"{VENV}/bin/python"}
    return subprocess.run(
        ["bash", str(SPARK_CONNECT_SCRIPT), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def conf(argv: Sequence[str]) -> dict[str, str]:
    return dict(argv[index + 1].split("=", 1) for index, word in enumerate(argv) if word == "--conf")


def test_spark_connect_defaults(tmp_path: Path) -> None:
    done = run_spark_connect(tmp_path, {})
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    assert argv[:2] == ["--class", healthcheck.SPARK_CONNECT_CLASS] and argv[-1] == "spark-internal"
    assert argv[argv.index("--master") + 1] == "local[*]"
    assert conf(argv) == {
        "spark.connect.grpc.binding.port": "15002",
        "spark.connect.grpc.binding.address": "0.0.0.0",
        "spark.pyspark.python": f"{VENV}/bin/python",
        "spark.pyspark.driver.python": f"{VENV}/bin/python",
    }
    # The health check finds this server in the JVM's command line, and its port.
    java = ["java", "-cp", "/jars/*", "org.apache.spark.deploy.SparkSubmit", *argv]
    assert healthcheck.role_of(java) == ("spark-connect", tuple(java))
    assert healthcheck.spark_connect_address(java) == "127.0.0.1:15002"


def test_spark_connect_settings_and_extra_options(tmp_path: Path) -> None:
    jar = tmp_path / "postgresql.jar"
    jar.write_bytes(b"PK")
    env = {
        "SPARK_CONNECT_MASTER": "spark://master:7077",
        "SPARK_CONNECT_PORT": "16000",
        "SPARK_CONNECT_BIND_ADDRESS": "10.1.2.3",
        "SPARK_CONNECT_DRIVER_HOST": "spark-connect-0.spark",
        "SLUICEWAY_JDBC_JARS": f" {jar} ,,",
    }
    done = run_spark_connect(tmp_path, env, "--driver-memory", "4g", "--conf", "spark.ui.enabled=false")
    assert done.returncode == 0, done.stderr
    argv = done.stdout.splitlines()
    assert argv[argv.index("--master") + 1] == "spark://master:7077"
    settings = conf(argv)
    assert settings["spark.connect.grpc.binding.port"] == "16000"
    assert settings["spark.driver.host"] == "spark-connect-0.spark"
    assert settings["spark.driver.bindAddress"] == "0.0.0.0"
    assert settings["spark.ui.enabled"] == "false"
    assert argv[argv.index("--jars") + 1] == argv[argv.index("--driver-class-path") + 1] == str(jar)
    # The caller's options come after the script's, so a --conf of theirs wins; the application last.
    assert argv[-5:] == ["--driver-memory", "4g", "--conf", "spark.ui.enabled=false", "spark-internal"]
    assert healthcheck.spark_connect_address(argv) == "10.1.2.3:16000"


def test_spark_connect_refuses_a_missing_jar_and_a_missing_spark_home(tmp_path: Path) -> None:
    done = run_spark_connect(tmp_path, {"SLUICEWAY_JDBC_JARS": str(tmp_path / "absent.jar")})
    assert done.returncode == 1 and "absent.jar" in done.stderr and not done.stdout
    done = run_spark_connect(tmp_path, {"SPARK_HOME": ""})
    assert done.returncode != 0 and "SPARK_HOME" in done.stderr and not done.stdout


# --- The health check against real servers ----------------------------------------------------------


@pytest.fixture(autouse=True)
def clean_sluiceway_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The health check reads the worker config from the environment, as the server does."""
    for name in list(os.environ):
        if name.startswith("SLUICEWAY_"):
            monkeypatch.delenv(name)


@dataclass
class HealthServer:
    port: int
    servicer: health.HealthServicer

    def set(self, status: int, service: str = healthcheck.READINESS_SERVICE) -> None:
        self.servicer.set(service, status)


@pytest.fixture
def health_server() -> Iterator[HealthServer]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield HealthServer(port, servicer)
    finally:
        server.stop(grace=None)


def write_proc(proc: Path, processes: Mapping[int, Sequence[str]]) -> Path:
    """A /proc with a cmdline file per pid, plus entries the check must step over."""
    proc.mkdir(exist_ok=True)
    (proc / "self").mkdir(exist_ok=True)
    (proc / "meminfo").write_text("MemTotal: 1 kB\n")
    kernel_thread = proc / "2"
    kernel_thread.mkdir(exist_ok=True)
    (kernel_thread / "cmdline").write_bytes(b"")
    for pid, argv in processes.items():
        (proc / str(pid)).mkdir(exist_ok=True)
        (proc / str(pid) / "cmdline").write_bytes(b"".join(arg.encode() + b"\0" for arg in argv))
    return proc


def server_argv(*args: str) -> list[str]:
    return [f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "server", *args]


def test_roles_from_command_lines() -> None:
    assert healthcheck.role_of(server_argv("--config", "w.properties")) == (
        "server",
        ("--config", "w.properties"),
    )
    assert healthcheck.role_of(["python", "-m", "sluiceway_executor", "--id", "e1"]) == (
        "executor",
        ("--id", "e1"),
    )
    assert healthcheck.role_of([f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "executor"]) == (
        "executor",
        (),
    )
    assert healthcheck.role_of([f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "connectors", "list"]) is None
    assert healthcheck.role_of([f"{VENV}/bin/python", "/usr/local/bin/sluiceway-healthcheck"]) is None
    assert healthcheck.role_of(["/bin/sh", "-c", "sleep 1"]) is None


def test_a_serving_control_plane_is_healthy_and_a_not_serving_one_is_not(
    health_server: HealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = write_proc(
        tmp_path / "proc", {1: server_argv("--listeners", f"0.0.0.0:{health_server.port}"), 7: ["sleep", "9"]}
    )
    health_server.set(health_pb2.HealthCheckResponse.SERVING)
    assert healthcheck.main([], proc) == 0
    assert capsys.readouterr().out.strip() == "healthy: server (pid 1)"
    health_server.set(health_pb2.HealthCheckResponse.NOT_SERVING)
    assert healthcheck.main([], proc) == 1
    assert f"control plane at 127.0.0.1:{health_server.port} is NOT_SERVING" in capsys.readouterr().out


def test_the_listen_address_comes_from_the_environment_or_the_override(
    health_server: HealthServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    health_server.set(health_pb2.HealthCheckResponse.SERVING)
    proc = write_proc(tmp_path / "proc", {1: server_argv()})
    # The image's SLUICEWAY_LISTENERS, as the server reads it (no flag, no file).
    monkeypatch.setenv("SLUICEWAY_LISTENERS", f"0.0.0.0:{health_server.port}")
    assert healthcheck.server_target(()).address == f"127.0.0.1:{health_server.port}"
    assert healthcheck.main([], proc) == 0
    # A properties file names a port where nothing listens: unhealthy...
    closed = free_port()
    config = tmp_path / "worker.properties"
    config.write_text(f"listeners=127.0.0.1:{closed}\n")
    proc = write_proc(tmp_path / "proc2", {1: server_argv("--config", str(config))})
    monkeypatch.delenv("SLUICEWAY_LISTENERS")
    assert healthcheck.server_target(("--config", str(config))).address == f"127.0.0.1:{closed}"
    assert healthcheck.main([], proc) == 1
    # ...unless the check is told where to ask.
    monkeypatch.setenv(healthcheck.ADDRESS_ENV, f"localhost:{health_server.port}")
    assert healthcheck.main([], proc) == 0


def test_a_control_plane_that_cannot_start_is_unhealthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = write_proc(tmp_path / "proc", {1: server_argv("--set", "heartbeat.records.topic=")})
    assert healthcheck.main([], proc) == 1
    out = capsys.readouterr().out
    assert "control plane (pid 1): invalid worker configuration" in out and "heartbeat.records.topic" in out


REPLICA_HOST: Final = "replica-0.sluiceway.svc"


@dataclass
class TlsHealthServer:
    """A health server behind the listener TLS of `settings` (client certificates required), and the
    `--set` flags that give a replica those settings."""

    port: int
    servicer: health.HealthServicer
    settings: Mapping[str, str]
    ca_file: Path

    @property
    def flags(self) -> list[str]:
        return [word for key, value in self.settings.items() for word in ("--set", f"{key}={value}")]

    def replica(self, advertised_host: str = REPLICA_HOST) -> list[str]:
        """The command line of a replica listening on every interface at the server's port."""
        return server_argv(
            "--listeners",
            f"0.0.0.0:{self.port}",
            "--advertised-address",
            f"{advertised_host}:{self.port}",
            *self.flags,
        )


@pytest.fixture
def tls_health_server(tmp_path: Path) -> Iterator[TlsHealthServer]:
    certificates = make_dev_certificates(tmp_path / "certs", ["admin"], hosts=[REPLICA_HOST])
    settings = {
        "tls.certificate.file": str(certificates.server.certificate),
        "tls.key.file": str(certificates.server.key),
        "tls.ca.file": str(certificates.ca_file),
        "tls.client.auth": "required",
        "tls.client.ca.file": str(certificates.ca_file),
    }
    tls = listener_tls(WorkerConfig.load(overrides=settings, env={}))
    assert tls is not None and tls.client_auth == "required"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", tls.server_credentials())
    server.start()
    try:
        yield TlsHealthServer(port, servicer, settings, certificates.ca_file)
    finally:
        server.stop(grace=None)


def test_mutual_tls_checks_the_certificate_against_the_advertised_name(
    tls_health_server: TlsHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tls_health_server.servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    good = write_proc(tmp_path / "good", {1: tls_health_server.replica()})
    assert healthcheck.main([], good) == 0, capsys.readouterr().out
    # A certificate that does not name the advertised host fails the handshake.
    wrong = write_proc(tmp_path / "wrong", {1: tls_health_server.replica("elsewhere.example")})
    assert healthcheck.main([], wrong) == 1
    assert "did not answer the health check of service '' (UNAVAILABLE" in capsys.readouterr().out
    # A plaintext check of a TLS listener fails too: the TLS settings are what make it pass.
    plain = write_proc(
        tmp_path / "plain", {1: server_argv("--listeners", f"0.0.0.0:{tls_health_server.port}")}
    )
    assert healthcheck.main([], plain) == 1


def test_with_tls_the_check_trusts_the_ca_and_presents_the_listener_certificate(
    tls_health_server: TlsHealthServer,
) -> None:
    """What the exec probes of deploy/kubernetes/components/tls rely on: the CA of tls.ca.file, the
    replica's own certificate for a listener that requires one, the advertised host (not the
    loopback address asked) as the name to verify and the call's authority."""
    settings = tls_health_server.settings
    arguments = tls_health_server.replica()[3:]
    target = healthcheck.server_target(arguments)
    assert target.address == f"127.0.0.1:{tls_health_server.port}"
    assert target.security.ca_file == settings["tls.ca.file"]
    assert target.security.cert_file == settings["tls.certificate.file"]
    assert target.security.key_file == settings["tls.key.file"]
    assert dict(target.options) == {
        "grpc.ssl_target_name_override": REPLICA_HOST,
        "grpc.default_authority": REPLICA_HOST,
    }
    tls_health_server.servicer.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)
    assert healthcheck.check_server(target, LIVENESS_SERVICE) is None
    # Without the replica's certificate the listener refuses the handshake: the check passes above
    # because it presents one.
    anonymous = healthcheck.ServerTarget(
        target.address, TransportSecurity(ca_file=str(tls_health_server.ca_file)), target.options
    )
    problem = healthcheck.check_server(anonymous, LIVENESS_SERVICE)
    assert (
        problem is not None and "did not answer the health check of service 'sluiceway.liveness'" in problem
    )


def test_the_service_option_asks_that_health_service_over_mutual_tls(
    tls_health_server: TlsHealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The exec probes of components/tls: readiness asks "", liveness and startup ask
    sluiceway.liveness, each with its own status."""
    proc = write_proc(tmp_path / "proc", {1: tls_health_server.replica()})
    liveness = f"--service={LIVENESS_SERVICE}"
    serving, not_serving = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING
    tls_health_server.servicer.set("", serving)
    tls_health_server.servicer.set(LIVENESS_SERVICE, serving)
    assert healthcheck.main([], proc) == 0
    assert capsys.readouterr().out.strip() == "healthy: server (pid 1)"
    assert healthcheck.main([liveness], proc) == 0
    assert capsys.readouterr().out.strip() == "healthy: server (pid 1, health service 'sluiceway.liveness')"
    # A draining replica: not ready, still alive.
    tls_health_server.servicer.set("", not_serving)
    assert healthcheck.main([], proc) == 1
    address = f"127.0.0.1:{tls_health_server.port}"
    assert capsys.readouterr().out.strip() == (
        f"unhealthy: control plane at {address} is NOT_SERVING (health service '')"
    )
    assert healthcheck.main([liveness], proc) == 0
    capsys.readouterr()
    # And the other way round.
    tls_health_server.servicer.set("", serving)
    tls_health_server.servicer.set(LIVENESS_SERVICE, not_serving)
    assert healthcheck.main([liveness], proc) == 1
    assert f"is NOT_SERVING (health service '{LIVENESS_SERVICE}')" in capsys.readouterr().out
    assert healthcheck.main(["--service", ""], proc) == 0
    capsys.readouterr()
    # The certificate is checked against the advertised name whichever service is asked.
    wrong = write_proc(tmp_path / "wrong", {1: tls_health_server.replica("elsewhere.example")})
    tls_health_server.servicer.set(LIVENESS_SERVICE, serving)
    assert healthcheck.main([liveness], wrong) == 1
    assert "did not answer the health check of service 'sluiceway.liveness' (UNAVAILABLE" in (
        capsys.readouterr().out
    )


def test_the_service_option_asks_that_health_service(
    health_server: HealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = write_proc(tmp_path / "proc", {1: server_argv("--listeners", f"0.0.0.0:{health_server.port}")})
    address = f"127.0.0.1:{health_server.port}"
    health_server.set(health_pb2.HealthCheckResponse.SERVING)
    health_server.set(health_pb2.HealthCheckResponse.SERVING, LIVENESS_SERVICE)
    assert healthcheck.main(["--service", LIVENESS_SERVICE], proc) == 0
    assert "health service 'sluiceway.liveness'" in capsys.readouterr().out
    health_server.set(health_pb2.HealthCheckResponse.NOT_SERVING, LIVENESS_SERVICE)
    assert healthcheck.main(["--service", LIVENESS_SERVICE], proc) == 1
    assert capsys.readouterr().out.strip() == (
        f"unhealthy: control plane at {address} is NOT_SERVING (health service 'sluiceway.liveness')"
    )
    assert healthcheck.main([], proc) == 0  # readiness is its own service
    capsys.readouterr()
    # A service the replica does not serve is named as such, not as a connection failure.
    assert healthcheck.main(["--service=no.such.service"], proc) == 1
    assert capsys.readouterr().out.strip() == (
        f"unhealthy: control plane at {address} has no health service 'no.such.service'"
    )
    # A service the servicer knows only as UNKNOWN is not SERVING either.
    health_server.set(health_pb2.HealthCheckResponse.UNKNOWN, "sluiceway.other")
    assert healthcheck.main(["--service=sluiceway.other"], proc) == 1
    assert "is UNKNOWN (health service 'sluiceway.other')" in capsys.readouterr().out


def test_the_service_option_is_refused_where_no_control_plane_runs(
    health_server: HealthServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    executor = [f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "executor"]
    spark = ["java", "org.apache.spark.deploy.SparkSubmit", "--class", healthcheck.SPARK_CONNECT_CLASS]
    proc = write_proc(tmp_path / "executor", {1: executor})
    assert healthcheck.main([f"--service={LIVENESS_SERVICE}"], proc) == healthcheck.USAGE_ERROR == 2
    out = capsys.readouterr().out
    assert "--service names a health service of the control plane" in out and "executor (pid 1)" in out
    proc = write_proc(tmp_path / "spark", {4: spark})
    assert healthcheck.main(["--service", ""], proc) == 2
    assert "spark-connect (pid 4)" in capsys.readouterr().out
    # Without --service the same containers are checked as ever.
    assert healthcheck.main([], write_proc(tmp_path / "executor2", {1: executor})) == 0
    capsys.readouterr()
    # Next to a control plane, --service is the control plane's and the others are checked as usual.
    health_server.set(health_pb2.HealthCheckResponse.SERVING, LIVENESS_SERVICE)
    both = write_proc(
        tmp_path / "both", {1: server_argv("--listeners", f"127.0.0.1:{health_server.port}"), 9: executor}
    )
    assert healthcheck.main([f"--service={LIVENESS_SERVICE}"], both) == 0
    healthy = capsys.readouterr().out.strip()
    assert healthy.startswith("healthy: ")
    assert "server (pid 1, health service 'sluiceway.liveness')" in healthy and "executor (pid 9)" in healthy
    # Nothing running at all is unhealthy (a process that has exited), not a usage error.
    assert healthcheck.main([f"--service={LIVENESS_SERVICE}"], write_proc(tmp_path / "none", {})) == 1


def test_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert healthcheck.parser().parse_args([]).service is None  # readiness, and no --service given
    assert healthcheck.parser().parse_args(["--service=sluiceway.liveness"]).service == LIVENESS_SERVICE
    assert healthcheck.main(["--help"], Path("/nonexistent")) == 0
    assert "--service NAME" in capsys.readouterr().out
    assert healthcheck.main(["--service"], Path("/nonexistent")) == 2
    assert "expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("replica-0.sluiceway.svc:8083", "replica-0.sluiceway.svc"),
        ("replica-0.sluiceway.svc", "replica-0.sluiceway.svc"),
        ("[fd00::1]:8083", "fd00::1"),
        ("[fd00::1]", "fd00::1"),
        ("10.1.2.3:8083", "10.1.2.3"),
    ],
)
def test_the_host_of_an_advertised_address(address: str, host: str) -> None:
    assert healthcheck.host_of(address) == host


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_spark_connect_and_executor_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        java = ["java", "org.apache.spark.deploy.SparkSubmit", "--class", healthcheck.SPARK_CONNECT_CLASS]
        java += ["--conf", f"spark.connect.grpc.binding.port={port}", "spark-internal"]
        proc = write_proc(tmp_path / "proc", {1: java})
        assert healthcheck.main([], proc) == 0
        assert capsys.readouterr().out.strip() == "healthy: spark-connect (pid 1)"
    assert healthcheck.main([], proc) == 1
    assert f"Spark Connect at 127.0.0.1:{port} does not accept connections" in capsys.readouterr().out
    # An executor has nothing to ask: running is healthy.
    proc = write_proc(tmp_path / "executor", {1: [f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "executor"]})
    assert healthcheck.main([], proc) == 0
    assert capsys.readouterr().out.strip() == "healthy: executor (pid 1)"


def test_nothing_to_check_is_unhealthy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc = write_proc(tmp_path / "proc", {1: [f"{VENV}/bin/python", f"{VENV}/bin/sluiceway", "dev"]})
    assert healthcheck.main([], proc) == 1
    assert (
        "no sluiceway server, sluiceway executor or Spark Connect server runs here" in capsys.readouterr().out
    )
    assert healthcheck.main(["--verbose"], proc) == 2  # a usage error, whatever runs
    assert "unrecognized arguments: --verbose" in capsys.readouterr().err
