"""The plugin-free checks of request input, the size budget of error statuses and the lock table
that forgets names nobody uses."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.common.limits import MAX_CONFIG_BYTES, MAX_TASK_CONFIG_RECORD_BYTES, MAX_TASKS, echo
from sluiceway.connect.config import ConfigDef, ConfigType
from sluiceway.errors import Reason
from sluiceway_server.api.errors import build_status
from sluiceway_server.errors import FieldViolation, InvalidArgumentError, LimitExceededError
from sluiceway_server.herder.config_checks import check_config_input, normalized
from sluiceway_server.herder.fields import map_field
from sluiceway_server.herder.locks import KeyedLocks
from sluiceway_server.model import State, TargetState
from tests.plugins.testing_connectors import ControllableSourceConnector
from tests.unit.server.test_herder_memory import Bed, run, settle

FIELD_OF = map_field("connector.config")


def check(config: dict[str, str]) -> None:
    check_config_input("c", config, "connector.config", FIELD_OF)


def test_echo_cuts_long_values_and_names_their_length() -> None:
    assert echo("abc") == "'abc'"
    shown = echo("x" * 10_000)
    assert len(shown) < 100
    assert "10000 characters" in shown


@pytest.mark.parametrize(
    ("config", "limit"),
    [
        ({"k": "v" * MAX_CONFIG_BYTES}, "max.config.bytes"),
        ({f"k{i}": "" for i in range(1001)}, "max.config.keys"),
        ({"k" * 257: "v"}, "max.config.key.length"),
        ({"tasks.max": f" {MAX_TASKS + 1}\t"}, "max.tasks"),
    ],
)
def test_limits_name_themselves(config: dict[str, str], limit: str) -> None:
    with pytest.raises(LimitExceededError) as info:
        check(config)
    assert info.value.metadata["limit"] == limit
    assert info.value.reason == "LIMIT_EXCEEDED"


def test_at_the_limits_is_accepted() -> None:
    check({"k": "v" * (MAX_CONFIG_BYTES - 1)})
    check({"tasks.max": str(MAX_TASKS)})
    # Not a well-formed number: left to the validation, which names the key.
    check({"tasks.max": "9" * 5000})
    check({"tasks.max": "\u0663"})


@pytest.mark.parametrize(
    "config", [{"": "v"}, {"  ": "v"}, {"a\x00": "v"}, {"a\nb": "v"}, {"k": "\x00"}, {"k": "a\x1bb"}]
)
def test_empty_keys_and_control_characters_are_refused(config: dict[str, str]) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        check(config)
    assert info.value.reason == "INVALID_CONFIG"


def test_tabs_and_line_breaks_in_values_are_allowed() -> None:
    check({"query": "SELECT *\r\n\tFROM t"})


def test_typed_values_are_stored_trimmed() -> None:
    definition = (
        ConfigDef()
        .define("tasks.max", ConfigType.INT, 1, documentation="tasks")
        .define("topic", ConfigType.STRING, "", documentation="topic")
    )
    stored = normalized({"tasks.max": " 2\t", "topic": " t ", "other": " x "}, definition)
    assert stored == {"tasks.max": "2", "topic": " t ", "other": " x "}
    # Java's trim only: a no-break space is not whitespace to Kafka.
    assert normalized({"tasks.max": "\u00a02"}, definition) == {"tasks.max": "\u00a02"}
    assert normalized({"tasks.max": " 2 "}, None) == {"tasks.max": " 2 "}


@given(
    message=st.text(min_size=0, max_size=20_000),
    violations=st.lists(
        st.tuples(st.text(max_size=3000), st.text(max_size=3000)).map(lambda t: FieldViolation(*t)),
        max_size=300,
    ),
    metadata=st.dictionaries(st.sampled_from(["connector", "config_keys", "limit"]), st.text(max_size=5000)),
)
def test_statuses_fit_the_trailers_whatever_the_input(
    message: str, violations: list[FieldViolation], metadata: dict[str, str]
) -> None:
    status = build_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        message,
        Reason.INVALID_CONFIG,
        metadata=metadata,
        violations=violations,
    )
    trailers = dict(status.trailing_metadata)
    details = trailers["grpc-status-details-bin"]
    assert len(details) <= 3300
    # grpc-message is percent-encoded: at most three bytes for each byte of the message.
    assert len(status.details.encode("utf-8")) <= 768
    parsed = status_pb2.Status.FromString(details)
    kinds = [d.type_url.rsplit("/", 1)[-1] for d in parsed.details]
    assert kinds[0] == "google.rpc.ErrorInfo"
    if violations:
        bad = error_details_pb2.BadRequest()
        parsed.details[-1].Unpack(bad)
        assert bad.field_violations


def test_many_violations_end_with_a_count_of_the_rest() -> None:
    violations = [FieldViolation(f'connector.config["k{i}"]', "x" * 300) for i in range(200)]
    status = build_status(
        grpc.StatusCode.INVALID_ARGUMENT, "bad", Reason.INVALID_CONFIG, violations=violations
    )
    parsed = status_pb2.Status.FromString(dict(status.trailing_metadata)["grpc-status-details-bin"])
    bad = error_details_pb2.BadRequest()
    parsed.details[-1].Unpack(bad)
    last = bad.field_violations[-1]
    assert last.description.endswith("more violation(s) not shown")
    shown = len(bad.field_violations) - 1
    assert last.description.startswith(str(200 - shown))


def test_lock_table_keeps_only_names_in_use() -> None:
    async def scenario() -> None:
        locks = KeyedLocks()
        order: list[str] = []

        async def hold(name: str, tag: str, pause: float) -> None:
            async with locks[name]:
                order.append(f"{tag}+")
                await asyncio.sleep(pause)
                order.append(f"{tag}-")

        first = asyncio.create_task(hold("a", "1", 0.05))
        await asyncio.sleep(0)
        second = asyncio.create_task(hold("a", "2", 0))
        other = asyncio.create_task(hold("b", "3", 0))
        await asyncio.sleep(0.01)
        assert len(locks) == 1  # "a" is held and waited for; "b" came and went
        await asyncio.gather(first, second, other)
        # Same name: one after the other; the entries are gone once nobody holds or waits.
        assert order.index("1-") < order.index("2+")
        assert len(locks) == 0

        for i in range(1000):
            async with locks[f"unknown-{i}"]:
                pass
        assert len(locks) == 0

        # A waiter that is cancelled leaves nothing behind either.
        async with locks["c"]:
            waiter = asyncio.create_task(hold("c", "4", 0))
            await asyncio.sleep(0)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        assert len(locks) == 0

    asyncio.run(scenario())


def test_limit_error_carries_field_and_values() -> None:
    error = LimitExceededError("max.tasks", 1000, 20000, 'connector.config["tasks.max"]', "tasks.max")
    assert error.violations == [
        FieldViolation('connector.config["tasks.max"]', error.violations[0].description)
    ]
    assert error.metadata == {"limit": "max.tasks", "max": "1000", "actual": "20000"}
    assert "max.tasks" in error.message


class BulkyTaskConfigsConnector(ControllableSourceConnector):
    """Task configs of `task.count` tasks, each `task.bytes` long."""

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        size = int(self.props.get("task.bytes", "10"))
        return [{"blob": "x" * size} for _ in range(min(int(self.props.get("task.count", "1")), max_tasks))]


@pytest.mark.parametrize(
    ("count", "size", "limit"),
    [
        (1, MAX_TASK_CONFIG_RECORD_BYTES, "max.task.config.record.bytes"),
        (40, 880 * 1024, "max.task.configs.bytes"),
    ],
)
def test_task_configs_too_large_fail_the_connector_naming_the_limit(
    count: int, size: int, limit: str
) -> None:
    async def test(bed: Bed) -> None:
        config = {
            "connector.class": f"{__name__}.{BulkyTaskConfigsConnector.__qualname__}",
            "tasks.max": str(count),
            "task.count": str(count),
            "task.bytes": str(size),
        }
        await bed.herder.create_connector("bulky", config, TargetState.STARTED)
        await settle(bed, "bulky", State.FAILED)
        status = bed.herder.connector_status("bulky")
        assert limit in (status.connector.trace or "")
        # Nothing was written for its tasks.
        assert not [key for key, _ in bed.config_records() if key.startswith("task-bulky")]

    run(test, plugins=[BulkyTaskConfigsConnector])
