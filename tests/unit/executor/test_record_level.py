"""The mapInArrow function of record-level transforms, on Arrow batches as Spark hands them over
(no Spark here): records the plugin drops, records it raises on (with the exception's class), the
retries of a RetriableException under errors.retry.*, and the records it must not see."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import time
from pathlib import Path

import pyarrow as pa
import pytest

from sluiceway.connect.data import INT64_SCHEMA, STRING_SCHEMA, struct_schema
from sluiceway.connect.transform_plugins import PREDICATES_GROUP, TRANSFORMS_GROUP
from sluiceway.connect.transforms import ConnectRecord, RecordTransformation
from sluiceway_executor.record_errors import ERROR_COLUMN
from sluiceway_executor.transforms import built_in_plugins
from sluiceway_executor.transforms.record_level import (
    APPLIES_COLUMN,
    KEEP_COLUMN,
    PROBLEM_COLUMN,
    RecordRetry,
    RecordTransformRunner,
)
from tests.conftest import TEST_PLUGINS
from tests.plugins.record_transforms import fingerprint
from tests.readme_blocks import blocks_under

PROBLEM = pa.struct([pa.field("exception", pa.string(), False), pa.field("message", pa.string())])
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
NAMES = ["ada", "bob", "eve", "joe"]


def _batch(**extra: pa.Array) -> pa.RecordBatch:
    columns = {
        "topic": pa.array(["people"] * len(NAMES)),
        "offset": pa.array(range(len(NAMES)), type=pa.int64()),
        "key": pa.array([f"k{i}" for i in range(len(NAMES))]),
        "value": pa.array([json.dumps({"id": i, "name": n}) for i, n in enumerate(NAMES)]),
        "headers": pa.array([[]] * len(NAMES), type=HEADERS),
        **extra,
    }
    return pa.RecordBatch.from_pydict(columns)


def _runner(
    props: dict[str, str], retry: RecordRetry | None = None, gated: bool = False
) -> RecordTransformRunner:
    return RecordTransformRunner(
        class_name="record_transforms.Fingerprint",
        props=props,
        plugin_path=(str(TEST_PLUGINS),),
        key_schema=None,
        value_schema=None,
        key_out=None,
        value_out=None,
        out_types={PROBLEM_COLUMN: PROBLEM},
        out_names=("topic", "offset", "key", "value", "headers", KEEP_COLUMN, PROBLEM_COLUMN),
        retry=retry or RecordRetry(),
        gated=gated,
    )


def _run(runner: RecordTransformRunner, batch: pa.RecordBatch) -> list[dict[str, object]]:
    (out,) = list(runner(iter([batch])))
    rows: list[dict[str, object]] = out.to_pylist()
    return rows


def test_records_are_changed_dropped_or_failed_with_their_exception() -> None:
    rows = _run(_runner({"drop": "bob", "reject": "eve"}), _batch())
    assert [r[KEEP_COLUMN] for r in rows] == [True, False, True, True]
    assert json.loads(str(rows[0]["value"]))["fingerprint"] == fingerprint("ada")
    assert rows[0]["headers"] == [{"key": "fingerprinted", "value": b"yes"}]
    assert rows[1]["value"] is None  # dropped
    # The failed record keeps its value as it was, and says why.
    assert json.loads(str(rows[2]["value"])) == {"id": 2, "name": "eve"}
    assert rows[2][PROBLEM_COLUMN] == {
        "exception": "sluiceway.connect.DataException",
        "message": "the name eve is rejected",
    }
    assert [r[PROBLEM_COLUMN] is None for r in rows] == [True, True, False, True]


def test_records_an_earlier_stage_failed_or_the_predicate_left_out_are_not_given_to_the_plugin() -> None:
    error = pa.array(
        [None, {"stage": "VALUE_CONVERTER"}, None, None], type=pa.struct([("stage", pa.string())])
    )
    applies = pa.array([True, True, False, True])
    rows = _run(_runner({}, gated=True), _batch(**{ERROR_COLUMN: error, APPLIES_COLUMN: applies}))
    fingerprinted = ["fingerprint" in json.loads(str(r["value"])) for r in rows]
    assert fingerprinted == [True, False, False, True]


def test_a_retriable_failure_is_not_tried_again_by_default(tmp_path: Path) -> None:
    rows = _run(_runner({"flaky": "ada", "flaky.tries": "1", "flaky.dir": str(tmp_path)}), _batch())
    assert (tmp_path / "ada.tries").read_text() == "1"
    assert rows[0][PROBLEM_COLUMN] == {
        "exception": "sluiceway.connect.RetriableException",
        "message": "ada is not ready yet (try 1)",
    }


def test_a_retriable_failure_is_tried_again_within_the_timeout(tmp_path: Path) -> None:
    retry = RecordRetry(timeout_ms=5_000, delay_max_ms=20)
    rows = _run(_runner({"flaky": "ada", "flaky.tries": "3", "flaky.dir": str(tmp_path)}, retry), _batch())
    assert (tmp_path / "ada.tries").read_text() == "4"
    assert rows[0][PROBLEM_COLUMN] is None
    assert json.loads(str(rows[0]["value"]))["fingerprint"] == fingerprint("ada")


def test_retries_stop_at_the_timeout(tmp_path: Path) -> None:
    retry = RecordRetry(timeout_ms=300, delay_max_ms=40)
    started = time.monotonic()
    rows = _run(_runner({"flaky": "ada", "flaky.tries": "1000", "flaky.dir": str(tmp_path)}, retry), _batch())
    elapsed = time.monotonic() - started
    tries = int((tmp_path / "ada.tries").read_text())
    # Waits of 40 ms (+-20%) until no wait fits in the 300 ms left: several tries, then the failure.
    assert 4 <= tries <= 12, tries
    assert 0.2 <= elapsed < 2.0, elapsed
    assert rows[0][PROBLEM_COLUMN]["exception"] == "sluiceway.connect.RetriableException"  # type: ignore[index]


def test_a_typed_value_must_fit_the_schema_the_plugin_declared() -> None:
    person = struct_schema({"id": INT64_SCHEMA, "name": STRING_SCHEMA}, name="person")
    runner = RecordTransformRunner(
        class_name="record_transforms.Fingerprint",
        props={},
        plugin_path=(str(TEST_PLUGINS),),
        key_schema=None,
        value_schema=person,
        # Declares the value unchanged, then adds a field: every record fails on it.
        key_out=None,
        value_out=struct_schema({"id": INT64_SCHEMA}, name="person"),
        out_types={PROBLEM_COLUMN: PROBLEM, "value": pa.struct([pa.field("id", pa.int64(), False)])},
        out_names=("topic", "value", KEEP_COLUMN, PROBLEM_COLUMN),
        retry=RecordRetry(),
        gated=False,
    )
    value = pa.array([{"id": 1, "name": "ada"}], type=pa.struct([("id", pa.int64()), ("name", pa.string())]))
    batch = pa.RecordBatch.from_pydict({"topic": pa.array(["people"]), "value": value})
    (row,) = _run(runner, batch)
    assert row[PROBLEM_COLUMN]["exception"] == "sluiceway.connect.DataException"  # type: ignore[index]


@pytest.mark.parametrize(("timeout", "seconds"), [(0, 0.0), (1500, 1.5), (-1, None)])
def test_retry_settings_become_the_retry_policy(timeout: int, seconds: float | None) -> None:
    policy = RecordRetry.of(
        {"errors.retry.timeout": str(timeout), "errors.retry.delay.max.ms": "800"}
    ).policy()
    assert policy.deadline == seconds
    assert (policy.initial, policy.maximum, policy.multiplier) == (0.3, 0.8, 2.0)


def test_the_readmes_record_level_transform_works_as_shown() -> None:
    (block,) = blocks_under("Transforms", "python")
    namespace: dict[str, object] = {}
    exec(compile(block.text, "README.md", "exec"), namespace)  # our own README's example
    cls = namespace["HashedEmail"]
    assert isinstance(cls, type) and issubclass(cls, RecordTransformation)
    transform = cls()
    transform.configure({})
    record = ConnectRecord(topic="users", value={"id": 1, "email": "ada@example.com"})
    changed = transform.apply_record(record)
    assert changed is not None and changed.value == {
        "id": 1,
        "email": hashlib.sha256(b"ada@example.com").hexdigest(),
    }
    assert transform.apply_record(ConnectRecord(topic="users", value=None)) == ConnectRecord(topic="users")


def test_transforms_installed_as_entry_points_are_found_and_broken_ones_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    points = [
        importlib.metadata.EntryPoint("fp", "tests.plugins.record_transforms:Fingerprint", TRANSFORMS_GROUP),
        importlib.metadata.EntryPoint("gone", "no_such_module_xyz:Nope", TRANSFORMS_GROUP),
        importlib.metadata.EntryPoint("odd", "tests.plugins.record_transforms:fingerprint", TRANSFORMS_GROUP),
        importlib.metadata.EntryPoint(
            "pred", "sluiceway_executor.transforms.predicates:HasHeaderKey", PREDICATES_GROUP
        ),
    ]
    monkeypatch.setattr(
        importlib.metadata, "entry_points", lambda *, group: [p for p in points if p.group == group]
    )
    with caplog.at_level(logging.WARNING):
        plugins = built_in_plugins()
    found = plugins.transform("Fingerprint")
    assert issubclass(found, RecordTransformation) and found.__name__ == "Fingerprint"
    assert found in plugins.transforms()
    assert "gone" in caplog.text and "odd" in caplog.text
