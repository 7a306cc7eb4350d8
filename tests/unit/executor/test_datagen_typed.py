"""DataGen's typed mode (``value.type=struct``): the Order schema, ``typed_value`` as a pure
function of the seq, the config key, and the record-level task's typed records. No Spark needed."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.connect import (
    ConfigException,
    MemoryOffsetStorageReader,
    SimpleSourceTaskContext,
)
from sluiceway.connect.data import (
    BOOLEAN_SCHEMA,
    FLOAT64_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Type,
    date_schema,
    decimal_schema,
    envelope_from_bytes,
    envelope_to_bytes,
    schema_from_json,
    schema_to_json,
    timestamp_schema,
    validate_value,
)
from sluiceway_executor.connectors.datagen import (
    ORDER_JSON_SCHEMA,
    DataGenBatchTask,
    DataGenSourceConnector,
    DataGenSourceTask,
    datagen_record,
)
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value

SEQS = st.integers(min_value=0, max_value=2**63 - 1)


def test_the_order_schema_is_named_and_versioned() -> None:
    assert (ORDER_SCHEMA.type, ORDER_SCHEMA.name, ORDER_SCHEMA.version) == (
        Type.STRUCT,
        "sluiceway.datagen.Order",
        1,
    )
    assert not ORDER_SCHEMA.optional
    fields = {f.name: f.schema for f in ORDER_SCHEMA.fields}
    assert list(fields) == [
        "id",
        "sku",
        "quantity",
        "unit_price",
        "paid",
        "weight_kg",
        "ordered_at",
        "ship_date",
        "note",
        "customer",
    ]
    assert fields["id"] == INT64_SCHEMA
    assert fields["sku"] == STRING_SCHEMA
    assert fields["quantity"] == INT32_SCHEMA
    assert fields["unit_price"] == decimal_schema(2, 10)
    assert fields["paid"] == BOOLEAN_SCHEMA
    assert fields["weight_kg"] == FLOAT64_SCHEMA
    assert fields["ordered_at"] == timestamp_schema()
    assert fields["ship_date"] == date_schema()
    assert fields["note"] == OPTIONAL_STRING_SCHEMA
    customer = fields["customer"]
    assert customer.type is Type.STRUCT and not customer.optional
    assert [(f.name, f.schema) for f in customer.fields] == [("name", STRING_SCHEMA), ("city", STRING_SCHEMA)]


def test_the_first_orders() -> None:
    assert typed_value(0) == {
        "id": 0,
        "sku": "SKU-0000",
        "quantity": 1,
        "unit_price": Decimal("0.99"),
        "paid": False,
        "weight_kg": 0.0,
        "ordered_at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        "ship_date": dt.date(2024, 1, 1),
        "note": None,
        "customer": {"name": "customer-0", "city": "Amsterdam"},
    }
    one = typed_value(1)
    assert (one["unit_price"], one["note"], one["paid"], one["weight_kg"]) == (
        Decimal("1.06"),
        "note 1",
        True,
        0.125,
    )
    assert one["ordered_at"] == dt.datetime(2024, 1, 1, 0, 0, 1, 1000, tzinfo=dt.UTC)


@given(SEQS)
def test_every_order_fits_its_schema_and_is_a_function_of_the_seq(seq: int) -> None:
    value = typed_value(seq)
    validate_value(ORDER_SCHEMA, value)
    assert value == typed_value(seq)
    assert value["id"] == seq
    assert (value["note"] is None) == (seq % 4 == 0)
    assert value["unit_price"].as_tuple().exponent == -2
    assert value["ordered_at"].tzinfo is not None


def test_the_largest_price_fits_the_precision() -> None:
    price = max(typed_value(seq)["unit_price"] for seq in range(99_990, 100_000))
    assert price == Decimal("7000.92")
    assert len(price.as_tuple().digits) <= 10


@given(SEQS)
def test_an_order_survives_the_json_envelope(seq: int) -> None:
    data = envelope_to_bytes(ORDER_SCHEMA, typed_value(seq))
    assert envelope_from_bytes(data) == (ORDER_SCHEMA, typed_value(seq))


def test_the_json_schema_of_the_records_is_the_order_schema() -> None:
    assert schema_from_json(ORDER_JSON_SCHEMA) == ORDER_SCHEMA
    assert schema_to_json(ORDER_SCHEMA) == ORDER_JSON_SCHEMA


def started(props: dict[str, str]) -> DataGenSourceTask:
    task = DataGenSourceTask(clock=lambda: 100.0, wall_clock=lambda: 1_700_000_000.5, poll_batch=10)
    task.initialize(SimpleSourceTaskContext(props, MemoryOffsetStorageReader()))
    task.start(props)
    return task


@pytest.mark.parametrize("value_type", ["struct", "STRUCT"])
def test_the_record_level_task_sends_typed_records(value_type: str) -> None:
    task = started({"topic": "orders", "task.id": "3", "value.type": value_type})
    records = task.poll() or []
    assert [r.source_offset for r in records] == [{"seq": n} for n in range(10)]
    for seq, record in enumerate(records):
        assert record.key == f"3-{seq}"
        assert record.value == typed_value(seq)
        assert record.value_schema == schema_to_json(ORDER_SCHEMA)
        assert record.key_schema == {"type": "string", "optional": False}


def test_string_values_stay_the_default() -> None:
    task = started({"topic": "t", "task.id": "0"})
    record = (task.poll() or [])[0]
    assert (record.key, record.value) == datagen_record(0, 0, 1_700_000_000_500, 100)
    assert record.value_schema == {"type": "string", "optional": False}
    explicit = started({"topic": "t", "task.id": "0", "value.type": "string"})
    assert (explicit.poll() or [])[0].value == record.value


def test_the_value_type_is_checked() -> None:
    with pytest.raises(ConfigException, match=r"value\.type"):
        DataGenSourceConnector().start({"topic": "t", "value.type": "avro"})
    with pytest.raises(ConfigException, match=r"value\.type"):
        DataGenBatchTask().start({"topic": "t", "task.id": "0", "value.type": "json"})
    key = DataGenSourceConnector().config().keys()["value.type"]
    assert key.default == "string"
    assert "sluiceway.datagen.Order" in key.documentation
