"""Secure by default for files, over the real socket: on a control plane that other hosts can reach
(a listener on 0.0.0.0) or that authenticates its callers, the connectors with path keys
(FileStreamSource and FileStreamSink: `file`; SparkFileSink: `path`) are refused until the worker's
connector.allowed.paths names the directories they may use. The refusal names the key and the
setting, and stores nothing. (A loopback plane without authentication, like `make run`'s, takes any
path: test_api_fuzz.py and the pipeline tests create such connectors on one.)

The plane listening on 0.0.0.0 is only ever called on 127.0.0.1."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from sluiceway.client import SluicewayClient
from sluiceway.common.transport import TransportSecurity
from sluiceway.errors import SluicewayError
from sluiceway_server.embedded import EmbeddedBroker, control_plane_argv
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic

pytestmark = pytest.mark.integration

ADMIN = "admin-token-for-file-tests-01"

FILE_CONNECTORS: dict[str, tuple[str, dict[str, str]]] = {
    "FileStreamSource": ("file", {"connector.class": "FileStreamSource", "topic": "lines"}),
    "FileStreamSink": ("file", {"connector.class": "FileStreamSink", "topics": "lines"}),
    "SparkFileSink": ("path", {"connector.class": "SparkFileSink", "topics": "lines"}),
}


class ExposedControlPlane(ControlPlaneProcess):
    """A control plane listening on every interface; it advertises, and the test calls, 127.0.0.1."""

    def argv(self) -> list[str]:
        settings = {**self._settings(), "advertised.listeners": self.address}
        return control_plane_argv(
            self.broker.bootstrap_servers, f"0.0.0.0:{self.port}", f"cluster-{self.suffix}", settings
        )


@pytest.fixture(scope="module")
def exposed(broker: EmbeddedBroker) -> Iterator[ControlPlaneProcess]:
    plane = ExposedControlPlane(broker, uuid.uuid4().hex[:8]).start()
    yield plane
    plane.stop()


@pytest.fixture(scope="module")
def exposed_client(exposed: ControlPlaneProcess) -> Iterator[SluicewayClient]:
    with SluicewayClient(exposed.address, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def allowed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("files")


@pytest.fixture(scope="module")
def authenticated(
    broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory, allowed_dir: Path
) -> Iterator[ControlPlaneProcess]:
    tokens = tmp_path_factory.mktemp("file-auth") / "tokens.txt"
    tokens.write_text(f"admin {ADMIN} alice\n")
    plane = ControlPlaneProcess(
        broker,
        uuid.uuid4().hex[:8],
        settings={"auth.tokens.file": str(tokens), "connector.allowed.paths": str(allowed_dir)},
        security=TransportSecurity(token=ADMIN),
    ).start()
    yield plane
    plane.stop()


def stored_keys(broker: EmbeddedBroker, plane: ControlPlaneProcess, name: str) -> list[str]:
    """Keys of the config topic's records about connector `name`."""
    keys = [key for key, _ in read_topic(broker.bootstrap_servers, plane.topics["config"])]
    return [key for key in keys if key and key.endswith(f"-{name}")]


def refused(call: Callable[[], object]) -> SluicewayError:
    with pytest.raises(SluicewayError) as caught:
        call()
    return caught.value


@pytest.mark.parametrize("plugin", sorted(FILE_CONNECTORS))
def test_file_connectors_are_refused_on_a_plane_other_hosts_reach(
    exposed: ControlPlaneProcess,
    exposed_client: SluicewayClient,
    broker: EmbeddedBroker,
    allowed_dir: Path,
    plugin: str,
) -> None:
    key, base = FILE_CONNECTORS[plugin]
    name = f"exposed-{uuid.uuid4().hex[:10]}"
    # Any path, even one that would be fine on a worker that names it: no directory is allowed.
    config = {**base, key: str(allowed_dir / "data")}
    error = refused(lambda: exposed_client.create_connector(name, config))
    assert (error.code, error.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG")
    assert [v.field for v in error.field_violations] == [f'connector.config["{key}"]']
    description = error.field_violations[0].description
    assert f"the API listens on 0.0.0.0:{exposed.port}" in description
    assert "set connector.allowed.paths in the worker config" in description
    assert error.metadata["config_keys"] == key
    # Nothing stored.
    assert refused(lambda: exposed_client.get_connector(name)).code == grpc.StatusCode.NOT_FOUND
    assert stored_keys(broker, exposed, name) == []
    # Validation reports the same on the same key.
    answer = exposed_client.validate_config({**config, "name": name})
    errors = {c.value.name: list(c.value.errors) for c in answer.configs if c.value.errors}
    assert list(errors) == [key] and "connector.allowed.paths" in errors[key][0]


def test_an_update_to_a_file_connector_is_refused_and_changes_nothing(
    exposed: ControlPlaneProcess, exposed_client: SluicewayClient, broker: EmbeddedBroker
) -> None:
    name = f"gen-{uuid.uuid4().hex[:10]}"
    # Connectors without path keys are not affected.
    exposed_client.create_connector(
        name, {"connector.class": "DataGenSource", "topic": "t"}, initial_state="PAUSED"
    )
    try:
        before = exposed_client.get_connector(name)
        records = len(stored_keys(broker, exposed, name))
        sink = {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out.txt"}
        error = refused(lambda: exposed_client.replace_connector_config(name, sink))
        assert error.code == grpc.StatusCode.INVALID_ARGUMENT
        # The field of ReplaceConnectorConfigRequest that holds the key.
        assert [v.field for v in error.field_violations] == ['config["file"]']
        after = exposed_client.get_connector(name)
        assert (dict(after.config), after.etag) == (dict(before.config), before.etag)
        assert len(stored_keys(broker, exposed, name)) == records
    finally:
        exposed_client.delete_connector(name)


def test_the_operator_is_told_at_start_up(exposed: ControlPlaneProcess) -> None:
    assert exposed.managed is not None
    log = exposed.managed.log_path.read_text(errors="replace")
    assert "Set connector.allowed.paths to the directories they may use" in log


def test_named_directories_work_with_authentication_on(
    authenticated: ControlPlaneProcess, broker: EmbeddedBroker, allowed_dir: Path
) -> None:
    with SluicewayClient(authenticated.address, timeout=30, security=authenticated.security) as client:
        for plugin, (key, base) in sorted(FILE_CONNECTORS.items()):
            name = f"inside-{uuid.uuid4().hex[:10]}"
            client.create_connector(name, {**base, key: str(allowed_dir / plugin)}, initial_state="PAUSED")
            assert client.get_connector(name).config[key] == str(allowed_dir / plugin)
            client.delete_connector(name)
            # Outside them, the rule of any worker with connector.allowed.paths.
            outside = f"outside-{uuid.uuid4().hex[:10]}"
            error = refused(functools.partial(client.create_connector, outside, {**base, key: "/etc/passwd"}))
            assert [v.field for v in error.field_violations] == [f'connector.config["{key}"]']
            assert "outside the directories connector.allowed.paths allows" in error.message
            assert stored_keys(broker, authenticated, outside) == []
