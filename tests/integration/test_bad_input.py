"""Bad input hurts no one else (issue 15), over the real socket: the documented limits answer
INVALID_ARGUMENT naming the limit and change nothing, errors never echo unbounded input, mutations
answer with the state they produced while others race them, the per-connector lock table does not
grow with names that were only mentioned, and the smaller input defects stay fixed."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest

from sluiceway.api.v1 import common_pb2, connectors_pb2, executor_pb2, executor_pb2_grpc, plugins_pb2
from sluiceway.common.limits import (
    MAX_CONFIG_BYTES,
    MAX_CONFIG_KEY_LENGTH,
    MAX_CONFIG_KEYS,
    MAX_CONNECTOR_NAME_LENGTH,
    MAX_REQUEST_BYTES,
    MAX_TASKS,
)
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import RpcFailure, Stubs, failure

pytestmark = pytest.mark.integration

# gRPC's own refusal of large trailers is RESOURCE_EXHAUSTED; ours must stay well below that.
SHORT_MESSAGE = 1000


@pytest.fixture(scope="module")
def stubs(control_plane: ControlPlaneProcess) -> Iterator[Stubs]:
    channel = grpc.insecure_channel(
        control_plane.address, options=[("grpc.max_send_message_length", 2 * MAX_REQUEST_BYTES)]
    )
    yield Stubs.of(channel)
    channel.close()


def datagen(unique: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "DataGenSource", "topic": f"t-{unique}", "tasks.max": "1", **extra}


def create_request(
    name: str,
    config: dict[str, str],
    initial_state: connectors_pb2.InitialState.ValueType = connectors_pb2.INITIAL_STATE_UNSPECIFIED,
) -> connectors_pb2.CreateConnectorRequest:
    return connectors_pb2.CreateConnectorRequest(
        connector_id=name, connector=connectors_pb2.Connector(config=config), initial_state=initial_state
    )


def create(
    stubs: Stubs,
    name: str,
    config: dict[str, str],
    initial_state: connectors_pb2.InitialState.ValueType = connectors_pb2.INITIAL_STATE_UNSPECIFIED,
) -> connectors_pb2.Connector:
    return stubs.connectors.CreateConnector(create_request(name, config, initial_state), timeout=30)


def delete(stubs: Stubs, name: str) -> None:
    stubs.connectors.DeleteConnector(
        connectors_pb2.DeleteConnectorRequest(name=f"connectors/{name}"), timeout=30
    )


def get(stubs: Stubs, name: str) -> connectors_pb2.Connector:
    return stubs.connectors.GetConnector(
        connectors_pb2.GetConnectorRequest(name=f"connectors/{name}"), timeout=10
    )


def assert_rich(fail: RpcFailure, code: grpc.StatusCode, reason: str) -> None:
    assert fail.code is code, fail
    assert fail.domain == "sluiceway", fail
    assert fail.reason == reason, fail
    assert len(fail.message) < SHORT_MESSAGE, fail.message[:200]


def assert_absent(stubs: Stubs, name: str) -> None:
    assert failure(lambda: get(stubs, name)).code is grpc.StatusCode.NOT_FOUND


# ------------------------------------------------------------------ documented limits


LIMIT_CASES: dict[str, tuple[Callable[[str], tuple[str, dict[str, str]]], str, str]] = {
    "config bytes": (
        lambda u: (f"big-{u}", datagen(u, padding="x" * (MAX_CONFIG_BYTES + 1))),
        "max.config.bytes",
        "connector.config",
    ),
    "config keys": (
        lambda u: (f"keys-{u}", datagen(u, **{f"k{i}": "v" for i in range(MAX_CONFIG_KEYS)})),
        "max.config.keys",
        "connector.config",
    ),
    "key length": (
        lambda u: (f"key-{u}", datagen(u, **{"k" * (MAX_CONFIG_KEY_LENGTH + 1): "v"})),
        "max.config.key.length",
        'connector.config["kkkk',
    ),
    "tasks.max": (lambda u: (f"tasks-{u}", datagen(u, **{"tasks.max": "20000"})), "max.tasks", ""),
    "name length": (
        lambda u: ("n" * (MAX_CONNECTOR_NAME_LENGTH + 1), datagen(u)),
        "max.connector.name.length",
        "connector_id",
    ),
    "request size": (
        lambda u: (f"huge-{u}", datagen(u, **{f"p{i}": "x" * (1 << 20) for i in range(5)})),
        "max.request.bytes",
        "request",
    ),
}


@pytest.mark.parametrize("case", sorted(LIMIT_CASES))
def test_limits_answer_invalid_argument_naming_the_limit(stubs: Stubs, unique: str, case: str) -> None:
    build, limit, field = LIMIT_CASES[case]
    name, config = build(unique)
    started = time.monotonic()
    fail = failure(lambda: stubs.connectors.CreateConnector(create_request(name, config), timeout=30))
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "LIMIT_EXCEEDED")
    assert fail.metadata["limit"] == limit
    assert int(fail.metadata["actual"]) > int(fail.metadata["max"])
    assert limit in fail.message
    if case == "tasks.max":
        assert fail.metadata["max"] == str(MAX_TASKS)
        assert list(fail.violations) == ['connector.config["tasks.max"]']
    else:
        assert any(f.startswith(field) for f in fail.violations), fail.violations
    assert time.monotonic() - started < 10
    if case != "name length":
        assert_absent(stubs, name)


def test_limits_apply_to_replace_and_patch_and_change_nothing(stubs: Stubs, unique: str) -> None:
    name = f"lim-{unique}"
    before = stubs.connectors.CreateConnector(
        create_request(name, datagen(unique), initial_state=connectors_pb2.INITIAL_STATE_STOPPED), timeout=30
    )
    fail = failure(
        lambda: stubs.connectors.ReplaceConnectorConfig(
            connectors_pb2.ReplaceConnectorConfigRequest(
                name=f"connectors/{name}", config=datagen(unique, padding="x" * (MAX_CONFIG_BYTES + 1))
            ),
            timeout=30,
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "LIMIT_EXCEEDED")
    assert list(fail.violations) == ["config"]
    fail = failure(
        lambda: stubs.connectors.PatchConnectorConfig(
            connectors_pb2.PatchConnectorConfigRequest(
                name=f"connectors/{name}", set={"tasks.max": str(MAX_TASKS + 1)}
            ),
            timeout=30,
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "LIMIT_EXCEEDED")
    assert list(fail.violations) == ['set["tasks.max"]']
    assert get(stubs, name).etag == before.etag
    # At the limit is fine.
    patched = stubs.connectors.PatchConnectorConfig(
        connectors_pb2.PatchConnectorConfigRequest(
            name=f"connectors/{name}", set={"tasks.max": str(MAX_TASKS)}
        ),
        timeout=30,
    )
    assert patched.config["tasks.max"] == str(MAX_TASKS)
    delete(stubs, name)


# ------------------------------------------------------------------ errors that echo input


def test_errors_never_echo_unbounded_input(stubs: Stubs, unique: str) -> None:
    long = "z" * 10_000
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: get(stubs, long), "LIMIT_EXCEEDED"),
        (
            lambda: stubs.connectors.GetTaskStatus(
                connectors_pb2.GetTaskStatusRequest(name=f"connectors/{long}/tasks/0"), timeout=10
            ),
            "LIMIT_EXCEEDED",
        ),
        (
            lambda: stubs.plugins.GetPluginConfigDefinition(
                plugins_pb2.GetPluginConfigDefinitionRequest(name=f"plugins/{long}"), timeout=10
            ),
            "LIMIT_EXCEEDED",
        ),
        (
            lambda: stubs.plugins.GetPluginConfigDefinition(
                plugins_pb2.GetPluginConfigDefinitionRequest(name=f"plugins/{long[:900]}"), timeout=10
            ),
            "PLUGIN_NOT_FOUND",
        ),
        (
            lambda: stubs.connectors.CreateConnector(create_request(long, datagen(unique)), timeout=10),
            "LIMIT_EXCEEDED",
        ),
        # A value the validation reports: its message must not carry the 200 KB value.
        (
            lambda: stubs.connectors.CreateConnector(
                create_request(f"echo-{unique}", datagen(unique, **{"tasks.max": "9" * 200_000})), timeout=30
            ),
            "INVALID_CONFIG",
        ),
        (
            lambda: stubs.connectors.CreateConnector(
                create_request(f"echo2-{unique}", datagen(unique, **{"records.per.sec": "y" * 200_000})),
                timeout=30,
            ),
            "INVALID_CONFIG",
        ),
    ]
    for call, reason in cases:
        fail = failure(call)
        code = grpc.StatusCode.NOT_FOUND if reason == "PLUGIN_NOT_FOUND" else grpc.StatusCode.INVALID_ARGUMENT
        assert_rich(fail, code, reason)
        assert all(len(v) <= 512 for descriptions in fail.violations.values() for v in descriptions)
        assert all(len(v) <= 256 for v in fail.metadata.values())
    assert_absent(stubs, f"echo-{unique}")


# ------------------------------------------------------------------ answers under concurrency


def test_mutations_answer_with_the_state_they_produced(stubs: Stubs, unique: str) -> None:
    """Creates, deletes, pauses and resumes of the same names race; each answer describes what
    that call did, never a later call's state."""
    names = [f"race{i}-{unique}" for i in range(3)]
    seen: list[tuple[str, grpc.StatusCode]] = []
    lock = threading.Lock()
    rng = random.Random(7)
    ops = [(rng.choice(["create", "delete", "pause", "resume"]), rng.choice(names)) for _ in range(160)]

    def run(op: str, name: str) -> None:
        resource = f"connectors/{name}"
        try:
            if op == "create":
                made = stubs.connectors.CreateConnector(create_request(name, datagen(unique)), timeout=30)
                assert made.name == resource and made.config["name"] == name
                assert made.target_state == common_pb2.TARGET_STATE_RUNNING
            elif op == "delete":
                stubs.connectors.DeleteConnector(
                    connectors_pb2.DeleteConnectorRequest(name=resource),
                    timeout=30,
                )
            elif op == "pause":
                paused = stubs.connectors.PauseConnector(
                    connectors_pb2.PauseConnectorRequest(name=resource), timeout=30
                )
                assert paused.target_state == common_pb2.TARGET_STATE_PAUSED
            else:
                resumed = stubs.connectors.ResumeConnector(
                    connectors_pb2.ResumeConnectorRequest(name=resource), timeout=30
                )
                assert resumed.target_state == common_pb2.TARGET_STATE_RUNNING
            code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            code = exc.code()
        with lock:
            seen.append((op, code))

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(run, op, name) for op, name in ops]:
            future.result()
    allowed = {
        "create": {grpc.StatusCode.OK, grpc.StatusCode.ALREADY_EXISTS},
        "delete": {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND},
        "pause": {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND},
        "resume": {grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND},
    }
    wrong = [(op, code) for op, code in seen if code not in allowed[op]]
    assert not wrong, wrong
    assert sum(1 for op, code in seen if op == "create" and code is grpc.StatusCode.OK) > 0
    for name in names:
        try:
            delete(stubs, name)
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.NOT_FOUND:
                raise


# ------------------------------------------------------------------ memory that only grew


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_unknown_names_leave_nothing_behind(
    control_plane_factory: Callable[..., ControlPlaneProcess], unique: str
) -> None:
    """Before, every name a mutation mentioned kept a lock entry: rounds of patches on unknown
    names grew the server without bound. Now later rounds stay flat."""
    plane = control_plane_factory()
    assert plane.managed is not None
    pid = plane.managed.process.pid
    channel = grpc.insecure_channel(plane.address)
    stub = Stubs.of(channel).connectors
    pad = "p" * (MAX_CONNECTOR_NAME_LENGTH - 20)

    def round_of_patches(round_no: int, count: int = 2500, window: int = 100) -> None:
        for start in range(0, count, window):
            futures = [
                stub.PatchConnectorConfig.future(
                    connectors_pb2.PatchConnectorConfigRequest(
                        name=f"connectors/{round_no}-{i}-{pad}", set={"tasks.max": "1"}
                    ),
                    timeout=60,
                )
                for i in range(start, start + window)
            ]
            for future in futures:
                assert future.code() is grpc.StatusCode.NOT_FOUND, future.details()

    try:
        round_of_patches(0)  # warms up allocator arenas and caches
        before = _rss_kib(pid)
        for round_no in (1, 2, 3):
            round_of_patches(round_no)
        grown = _rss_kib(pid) - before
        # A lock entry with its 250-character name took about 670 bytes: 7,500 of them, 5 MB.
        assert grown < 3 * 1024, f"the server grew by {grown} KiB over 7,500 unknown names"
    finally:
        channel.close()


# ------------------------------------------------------------------ smaller defects


def test_unknown_view_is_invalid_argument(stubs: Stubs, unique: str) -> None:
    fail = failure(
        lambda: stubs.connectors.GetConnector(
            connectors_pb2.GetConnectorRequest(
                name=f"connectors/v-{unique}",
                view=99,  # type: ignore[arg-type]
            ),
            timeout=10,
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert list(fail.violations) == ["view"]
    fail = failure(
        lambda: stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(view=7),  # type: ignore[arg-type]
            timeout=10,
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")


def test_min_config_position_past_the_end_is_a_caller_error(stubs: Stubs) -> None:
    started = time.monotonic()
    fail = failure(
        lambda: stubs.connectors.ListConnectors(
            connectors_pb2.ListConnectorsRequest(min_config_position=2**62), timeout=20
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert list(fail.violations) == ["min_config_position"]
    assert fail.retry_delay is None
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("number", ["\u0663", "\u00b2", "\uff13", "1 ", "-0"])
def test_task_numbers_in_other_digits_are_invalid_argument(stubs: Stubs, unique: str, number: str) -> None:
    name = f"connectors/d-{unique}/tasks/{number}"
    for call in (
        lambda: stubs.connectors.GetTaskStatus(connectors_pb2.GetTaskStatusRequest(name=name), timeout=10),
        lambda: stubs.connectors.RestartTask(connectors_pb2.RestartTaskRequest(name=name), timeout=10),
    ):
        fail = failure(call)
        assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        assert list(fail.violations) == ["name"]


@pytest.mark.parametrize("bad", ["\u202e", "\u200b", "\u2028", "\x7f", "\u0085"])
def test_invisible_and_bidi_characters_are_refused_in_names(stubs: Stubs, unique: str, bad: str) -> None:
    name = f"spoof{bad}{unique}"
    fail = failure(
        lambda: stubs.connectors.CreateConnector(create_request(name, datagen(unique)), timeout=30)
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
    assert list(fail.violations) == ["connector_id"]
    assert_absent(stubs, name)


def test_typed_values_are_stored_trimmed(stubs: Stubs, unique: str) -> None:
    name = f"trim-{unique}"
    made = stubs.connectors.CreateConnector(
        create_request(
            name,
            datagen(unique, **{"tasks.max": " 2 ", "records.per.sec": " 5\t"}),
            initial_state=connectors_pb2.INITIAL_STATE_STOPPED,
        ),
        timeout=30,
    )
    assert made.config["tasks.max"] == "2"
    assert made.config["records.per.sec"] == "5"
    assert get(stubs, name).config["tasks.max"] == "2"
    # String values keep their spaces: they may matter.
    assert made.config["topic"] == f"t-{unique}"
    delete(stubs, name)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"": "x"}, 'connector.config[""]'),
        ({" ": "x"}, 'connector.config[" "]'),
        ({"a\x00b": "x"}, 'connector.config["a\\u0000b"]'),
        ({"note": "a\x00b"}, 'connector.config["note"]'),
        ({"note": "bell\x07"}, 'connector.config["note"]'),
    ],
)
def test_nul_and_empty_keys_are_refused(stubs: Stubs, unique: str, extra: dict[str, str], field: str) -> None:
    name = f"nul-{unique}"
    fail = failure(
        lambda: stubs.connectors.CreateConnector(
            create_request(name, {**datagen(unique), **extra}), timeout=30
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_CONFIG")
    assert list(fail.violations) == [field]
    assert_absent(stubs, name)


def test_line_breaks_and_tabs_in_values_are_kept(stubs: Stubs, unique: str) -> None:
    name = f"nl-{unique}"
    note = "line one\n\tline two\r\n"
    made = create(stubs, name, datagen(unique, note=note), initial_state=connectors_pb2.INITIAL_STATE_STOPPED)
    assert made.config["note"] == note
    delete(stubs, name)


# ------------------------------------------------------------------ answers that would be too large


def test_pages_end_before_the_response_gets_too_large(stubs: Stubs, unique: str) -> None:
    """Everything within the limits, yet a default page of big configs would pass the 4 MiB a
    client accepts: pages are bounded in bytes too, and following them gives every item once."""
    filler = "x" * 240_000
    names = [f"page{i:02d}-{unique}" for i in range(18)]
    for name in names:
        create(
            stubs, name, datagen(unique, filler=filler), initial_state=connectors_pb2.INITIAL_STATE_STOPPED
        )
    heavy = f"heavy-{unique}"
    create(stubs, heavy, datagen(unique, filler="y" * 90_000, **{"tasks.max": "50"}))
    try:
        seen: list[str] = []
        token, pages = "", 0
        while True:
            page = stubs.connectors.ListConnectors(
                connectors_pb2.ListConnectorsRequest(
                    view=connectors_pb2.CONNECTOR_VIEW_INFO, page_token=token
                ),
                timeout=30,
            )
            seen += [c.name for c in page.connectors]
            pages += 1
            token = page.next_page_token
            if not token:
                break
        assert pages > 1
        assert sorted(n for n in seen if n.endswith(unique)) == sorted(
            f"connectors/{n}" for n in [*names, heavy]
        )
        assert len(seen) == len(set(seen))

        def all_tasks() -> list[str]:
            tasks: list[str] = []
            token = ""
            while True:
                page = stubs.connectors.ListTasks(
                    connectors_pb2.ListTasksRequest(parent=f"connectors/{heavy}", page_token=token),
                    timeout=30,
                )
                tasks += [t.name for t in page.tasks]
                token = page.next_page_token
                if not token:
                    return tasks

        tasks = wait_for_tasks(all_tasks, 50)
        assert tasks == [f"connectors/{heavy}/tasks/{n}" for n in range(50)]
    finally:
        for name in [*names, heavy]:
            delete(stubs, name)


def wait_for_tasks(read: Callable[[], list[str]], count: int) -> list[str]:
    deadline = time.monotonic() + 30
    while True:
        tasks = read()
        if len(tasks) == count or time.monotonic() > deadline:
            return tasks
        time.sleep(0.2)


def test_validation_applies_the_config_limits(stubs: Stubs, unique: str) -> None:
    fail = failure(
        lambda: stubs.plugins.ValidateConnectorConfig(
            plugins_pb2.ValidateConnectorConfigRequest(
                config=datagen(unique, topic="y" * (MAX_CONFIG_BYTES + 1))
            ),
            timeout=30,
        )
    )
    assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "LIMIT_EXCEEDED")
    assert fail.metadata["limit"] == "max.config.bytes"


@pytest.mark.parametrize("executor_id", ["a\nb FAKE LOG LINE", "spoof\u202e", " padded"])
def test_executor_ids_with_hidden_characters_cannot_attach(
    control_plane: ControlPlaneProcess, executor_id: str
) -> None:
    channel = grpc.insecure_channel(control_plane.address)
    try:
        hello = executor_pb2.ExecutorMessage(hello=executor_pb2.Hello(executor_id=executor_id, host="h"))
        call = executor_pb2_grpc.ExecutorServiceStub(channel).Attach(iter([hello]), timeout=10)
        fail = failure(lambda: list(call))
        assert_rich(fail, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST")
        assert list(fail.violations) == ["hello.executor_id"]
    finally:
        channel.close()
