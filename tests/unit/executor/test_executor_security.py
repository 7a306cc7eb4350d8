"""The executor's transport security and own worker config: the TLS and token flags (and their
SLUICEWAY_* variables), --config and SLUICEWAY_* worker keys laid over Welcome's worker config, and
an attach stream over mutual TLS carrying the bearer token, against the scripted leader of
test_executor_attach."""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, executor_pb2, executor_pb2_grpc
from sluiceway.common.transport import TransportSecurity
from sluiceway_executor.attach import ExecutorAgent
from sluiceway_executor.main import parse_args
from sluiceway_executor.own_config import OwnConfigError, load_own_config, merge_worker_config
from sluiceway_server.dev_certificates import DevCertificates, make_dev_certificates
from sluiceway_server.embedded import free_port
from tests.unit.executor.test_executor_attach import (
    TIMEOUT,
    FakeCommits,
    FakeWork,
    Leader,
    LeaderServer,
    settings_for,
)

_TRANSPORT_ENV = ("TLS", "TLS_CA", "TLS_CERT", "TLS_KEY", "TOKEN", "TOKEN_FILE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _TRANSPORT_ENV:
        monkeypatch.delenv(f"SLUICEWAY_{name}", raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return make_dev_certificates(tmp_path_factory.mktemp("executor-certs"), ("executor",))


# ------------------------------------------------------------------ own worker config


def test_file_then_environment(tmp_path: Path) -> None:
    file = tmp_path / "executor.properties"
    file.write_text(
        "# this executor's Kafka credentials\n"
        "producer.sasl.password = from-file  \n"
        "sasl.mechanism=PLAIN\n"
        "bootstrap.servers=kafka-a:9092\n"
    )
    env = {
        "SLUICEWAY_BOOTSTRAP_SERVERS": "kafka-b:9092",
        "SLUICEWAY_CONSUMER_SASL_PASSWORD": "from-env",
        # The executor's own options, not worker keys: ignored.
        "SLUICEWAY_SERVER": "cp:8083",
        "SLUICEWAY_SPARK_REMOTE": "sc://spark:15002",
        "SLUICEWAY_TLS_CA": "/ca.pem",
        "SLUICEWAY_TOKEN": "secret",
        "OTHER_VARIABLE": "x",
    }
    assert load_own_config(file, env) == {
        "producer.sasl.password": "from-file",
        "sasl.mechanism": "PLAIN",
        "bootstrap.servers": "kafka-b:9092",
        "consumer.sasl.password": "from-env",
    }
    assert load_own_config(None, {}) == {}


def test_bad_config_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(OwnConfigError, match=r"--config: cannot read .*missing.properties"):
        load_own_config(tmp_path / "missing.properties", {})
    broken = tmp_path / "broken.properties"
    broken.write_text("a=1\nb=\\u12x4\n")
    with pytest.raises(OwnConfigError, match=r"broken.properties: line 2: malformed"):
        load_own_config(broken, {})


@pytest.mark.parametrize(
    "key", ["heartbeat.records.topic", "heartbeat.interval.ms", "task.restart.max.attempts"]
)
def test_an_empty_fallback_key_in_the_own_config_is_refused(tmp_path: Path, key: str) -> None:
    # Laid over Welcome's, it would hide the control plane's value: start-up stops, naming it.
    file = tmp_path / "executor.properties"
    file.write_text(f"{key}=\n")
    with pytest.raises(
        OwnConfigError, match=rf"--config {re.escape(str(file))}: {re.escape(key)} must not be empty"
    ):
        load_own_config(file, {})
    variable = "SLUICEWAY_" + key.upper().replace(".", "_")
    with pytest.raises(OwnConfigError, match=rf"SLUICEWAY_\* variable: {re.escape(key)} must not be empty"):
        load_own_config(None, {variable: " "})
    file.write_text(f"{key}=7\n")
    assert load_own_config(file, {}) == {key: "7"}


def test_own_settings_win_over_welcome() -> None:
    received = {"bootstrap.servers": "kafka:9092", "producer.linger.ms": "5", "producer.sasl.username": "u"}
    own = {"producer.sasl.password": "p", "producer.linger.ms": "50"}
    assert merge_worker_config(received, own) == {
        "bootstrap.servers": "kafka:9092",
        "producer.linger.ms": "50",
        "producer.sasl.username": "u",
        "producer.sasl.password": "p",
    }
    assert received["producer.linger.ms"] == "5"


# ------------------------------------------------------------------ flags


def test_flags(certs: DevCertificates, tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    config = tmp_path / "executor.properties"
    config.write_text("admin.sasl.password=a\n")
    clean_env.setenv("SLUICEWAY_TOKEN", "env-token")
    clean_env.setenv("SLUICEWAY_PRODUCER_SASL_PASSWORD", "p")
    pair = certs.client("executor")
    args = parse_args(
        [
            "--tls-ca",
            str(certs.ca.certificate),
            "--tls-cert",
            str(pair.certificate),
            "--tls-key",
            str(pair.key),
            "--config",
            str(config),
        ]
    )
    assert args.security == TransportSecurity(
        ca_file=str(certs.ca.certificate),
        cert_file=str(pair.certificate),
        key_file=str(pair.key),
        token="env-token",
    )
    assert args.worker_config == {"admin.sasl.password": "a", "producer.sasl.password": "p"}
    assert parse_args(["--token", "flag"]).security.token == "flag"
    plain = parse_args([])
    assert not plain.security.uses_tls
    assert plain.security.token == "env-token"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tls-ca", "/nonexistent/ca.pem"], "--tls-ca: PEM file '/nonexistent/ca.pem' does not exist"),
        (["--tls-cert", "cert.pem"], "--tls-cert needs SLUICEWAY_TLS_KEY"),
        (["--config", "/nonexistent/executor.properties"], "--config: cannot read"),
    ],
)
def test_bad_flags_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------ attach over mutual TLS


class RecordingLeader(Leader):
    """The scripted leader, noting each attach call's client certificate CN and authorization."""

    def __init__(self) -> None:
        super().__init__()
        self.callers: list[tuple[str, str]] = []

    def Attach(  # noqa: N802 - the RPC's name
        self, request_iterator: Iterator[executor_pb2.ExecutorMessage], context: grpc.ServicerContext
    ) -> Iterator[executor_pb2.ControllerMessage]:
        auth: dict[str, Any] = dict(context.auth_context())
        names = list(auth.get("x509_common_name") or [])
        metadata: dict[str, Any] = dict(context.invocation_metadata())
        self.callers.append((names[0].decode() if names else "-", str(metadata.get("authorization", "-"))))
        yield from super().Attach(request_iterator, context)


class MutualTlsLeaderServer(LeaderServer):
    certs: DevCertificates | None = None

    def start(self) -> LeaderServer:
        assert self.certs is not None
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        executor_pb2_grpc.add_ExecutorServiceServicer_to_server(self.leader, self.server)
        credentials = grpc.ssl_server_credentials(
            [(self.certs.server.key.read_bytes(), self.certs.server.certificate.read_bytes())],
            root_certificates=self.certs.ca.certificate.read_bytes(),
            require_client_auth=True,
        )
        self.server.add_secure_port(self.address, credentials)
        self.server.start()
        return self


@pytest.fixture
def mtls_leader(certs: DevCertificates) -> Iterator[MutualTlsLeaderServer]:
    server = MutualTlsLeaderServer(free_port(), leader=RecordingLeader())
    server.certs = certs
    server.start()
    yield server
    server.stop()


def _run(agent: ExecutorAgent) -> threading.Thread:
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    return thread


def test_attach_over_mutual_tls_with_token_and_own_config(
    certs: DevCertificates, mtls_leader: MutualTlsLeaderServer
) -> None:
    pair = certs.client("executor")
    security = TransportSecurity(
        ca_file=str(certs.ca.certificate), cert_file=str(pair.certificate), key_file=str(pair.key), token="ex"
    )
    work = FakeWork()
    commits = FakeCommits(work)
    settings = settings_for(
        f"localhost:{mtls_leader.port}",
        security=security,
        worker_config={"producer.sasl.password": "own-secret", "producer.linger.ms": "50"},
    )
    agent = ExecutorAgent(settings, work, committer_factory=commits)
    thread = _run(agent)
    try:
        stream = mtls_leader.leader.next_stream()
        stream.welcome(worker={"producer.linger.ms": "5", "producer.sasl.username": "svc"})
        stream.assign()
        stream.status(common_pb2.STATE_RUNNING)
        (pipeline,) = work.of("connectors/demo/tasks/0")
        assert pipeline.worker_config["producer.sasl.password"] == "own-secret"
        assert pipeline.worker_config["producer.sasl.username"] == "svc"
        assert pipeline.worker_config["producer.linger.ms"] == "50"
        assert pipeline.worker_config["bootstrap.servers"] == "kafka:9092"
        assert isinstance(mtls_leader.leader, RecordingLeader)
        assert mtls_leader.leader.callers == [("executor", "Bearer ex")]
    finally:
        commits.release()
        mtls_leader.stop()
        agent.shutdown(timeout=5)
        thread.join(timeout=TIMEOUT)
    assert not thread.is_alive()


def test_attach_without_a_client_certificate_is_refused(
    certs: DevCertificates, mtls_leader: MutualTlsLeaderServer
) -> None:
    work = FakeWork()
    settings = settings_for(
        f"localhost:{mtls_leader.port}", security=TransportSecurity(ca_file=str(certs.ca.certificate))
    )
    agent = ExecutorAgent(settings, work, committer_factory=FakeCommits(work))
    thread = _run(agent)
    try:
        # The handshake fails, so the leader never sees an attach call; the agent keeps trying.
        with pytest.raises(queue.Empty):
            mtls_leader.leader.next_stream(timeout=1.0)
        assert agent.sessions >= 1
        assert not agent.welcomed.is_set()
    finally:
        agent.shutdown(timeout=5)
        thread.join(timeout=TIMEOUT)
    assert not thread.is_alive()
