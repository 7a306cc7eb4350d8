"""The typed lake's columns and the rule for how its schema may change (lake_schema.py): pure
Python over PySpark's type classes, no Spark session."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sluiceway.connect import ConnectException
from sluiceway.connect.data import decimal_schema, struct_schema
from sluiceway.connect.data.schema import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA
from sluiceway.connect.data.spark import from_spark_field, to_spark_field
from sluiceway_executor.connectors.lake_commits import manifest
from sluiceway_executor.connectors.lake_schema import (
    LakeSchemaError,
    LakeState,
    is_typed,
    lake_state,
    merge_schemas,
    row_schema,
    schema_from_text,
    schema_to_text,
)


def struct(*fields: StructField) -> StructType:
    return StructType(list(fields))


def required(name: str, datatype: object) -> StructField:
    return StructField(name, datatype, False)  # type: ignore[arg-type]


def optional(name: str, datatype: object) -> StructField:
    return StructField(name, datatype, True)  # type: ignore[arg-type]


BASE = struct(required("id", LongType()), optional("name", StringType()))


def sink_batch(value: StructType) -> StructType:
    return struct(
        required("topic", StringType()),
        required("partition", IntegerType()),
        required("offset", LongType()),
        optional("timestamp", TimestampType()),
        optional("key", BinaryType()),
        StructField("value", value, True),
        optional(
            "headers", ArrayType(struct(optional("key", StringType()), optional("value", BinaryType())))
        ),
    )


def test_a_batch_is_typed_when_its_value_is_a_struct() -> None:
    assert is_typed(sink_batch(BASE))
    assert not is_typed(struct(optional("value", StringType())))
    assert not is_typed(struct(optional("value", BinaryType())))
    assert not is_typed(struct(optional("key", StringType())))


def test_the_rows_hold_the_coordinates_then_the_declared_fields() -> None:
    rows = row_schema(sink_batch(BASE))
    assert rows.fieldNames() == [
        "kafka_topic",
        "kafka_partition",
        "kafka_offset",
        "kafka_timestamp",
        "kafka_key",
        "kafka_headers",
        "id",
        "name",
    ]
    # The value's fields keep their declared nullability, though the value column may be null.
    assert (rows["id"].nullable, rows["name"].nullable, rows["kafka_topic"].nullable) == (False, True, False)
    assert rows["kafka_key"].dataType == BinaryType()


def test_the_connect_metadata_of_the_fields_is_kept() -> None:
    schema = struct_schema({"id": INT64_SCHEMA, "price": decimal_schema(2, 10, optional=True)})
    value = to_spark_field("value", schema).dataType
    assert isinstance(value, StructType)
    rows = row_schema(sink_batch(value))
    assert from_spark_field(rows["price"]) == decimal_schema(2, 10, optional=True)
    assert schema_from_text(schema_to_text(rows)) == rows


@pytest.mark.parametrize("name", ["kafka_offset", "KAFKA_TOPIC", "task", "batch", "kafka_headers"])
def test_a_value_field_named_like_a_lake_column_fails(name: str) -> None:
    with pytest.raises(ConnectException, match=f"value field.*{name}.*rename"):
        row_schema(sink_batch(struct(required("id", LongType()), optional(name, StringType()))))


def test_an_empty_lake_takes_the_batch_schema() -> None:
    assert merge_schemas(None, BASE) == BASE


def test_the_same_schema_merges_to_itself() -> None:
    assert merge_schemas(BASE, BASE) == BASE


def test_a_new_optional_field_is_added_at_the_end() -> None:
    batch = struct(optional("note", StringType()), *BASE.fields)
    assert merge_schemas(BASE, batch).fieldNames() == ["id", "name", "note"]


def test_a_new_optional_field_inside_a_nested_struct_is_added() -> None:
    lake = struct(required("id", LongType()), required("customer", struct(required("name", StringType()))))
    batch = struct(
        required("id", LongType()),
        required("customer", struct(required("name", StringType()), optional("city", StringType()))),
    )
    merged = merge_schemas(lake, batch)
    customer = merged["customer"].dataType
    assert isinstance(customer, StructType)
    assert customer.fieldNames() == ["name", "city"]


def test_structs_inside_arrays_and_maps_evolve_too() -> None:
    def lines(*extra: StructField) -> StructType:
        item = struct(required("sku", StringType()), *extra)
        return struct(
            required("lines", ArrayType(item, False)), optional("by_sku", MapType(StringType(), item, True))
        )

    merged = merge_schemas(lines(), lines(optional("qty", IntegerType())))
    assert merged == lines(optional("qty", IntegerType()))


def test_an_optional_field_the_batch_leaves_out_stays_in_the_lake() -> None:
    assert merge_schemas(BASE, struct(required("id", LongType()))) == BASE


def test_a_required_field_may_become_optional() -> None:
    merged = merge_schemas(BASE, struct(optional("id", LongType()), optional("name", StringType())))
    assert merged["id"].nullable


def test_the_batch_metadata_is_the_newer_word() -> None:
    batch = struct(StructField("id", LongType(), False, {"connect": {"doc": "the order id"}}), BASE["name"])
    assert merge_schemas(BASE, batch)["id"].metadata == {"connect": {"doc": "the order id"}}


@pytest.mark.parametrize(
    ("batch", "problem"),
    [
        (
            struct(required("id", StringType()), optional("name", StringType())),
            "id is bigint in the lake and string",
        ),
        (
            struct(required("id", IntegerType()), optional("name", StringType())),
            "id is bigint in the lake and int",
        ),
        (
            struct(*BASE.fields, required("total", DecimalType(10, 2))),
            r"new field total \(decimal\(10,2\)\) is required",
        ),
        (struct(optional("name", StringType())), r"required field id \(bigint\) is missing"),
        (
            struct(*BASE.fields, optional("Name", StringType())),
            "Name differs from the lake's name only in letter case",
        ),
    ],
    ids=["type", "widening", "new-required", "missing-required", "case"],
)
def test_a_change_that_cannot_merge_names_both_schemas(batch: StructType, problem: str) -> None:
    with pytest.raises(LakeSchemaError, match=problem) as caught:
        merge_schemas(BASE, batch)
    message = str(caught.value)
    assert f"The lake's schema: {BASE.simpleString()}" in message
    assert f"The batch's schema: {batch.simpleString()}" in message


def test_a_decimal_whose_scale_changes_cannot_merge() -> None:
    lake = struct(required("price", DecimalType(10, 2)))
    with pytest.raises(LakeSchemaError, match=r"price is decimal\(10,2\) in the lake and decimal\(10,3\)"):
        merge_schemas(lake, struct(required("price", DecimalType(10, 3))))


def test_a_nested_type_change_names_its_path() -> None:
    lake = struct(required("customer", struct(required("zip", IntegerType()))))
    with pytest.raises(LakeSchemaError, match=r"customer\.zip is int in the lake and string"):
        merge_schemas(lake, struct(required("customer", struct(required("zip", StringType())))))


def test_map_keys_must_stay() -> None:
    lake = struct(optional("tags", MapType(StringType(), StringType())))
    with pytest.raises(LakeSchemaError, match="keys of tags are string in the lake and int"):
        merge_schemas(lake, struct(optional("tags", MapType(IntegerType(), StringType()))))


def test_a_csv_lake_keeps_its_columns_exactly() -> None:
    assert merge_schemas(BASE, BASE, csv=True) == BASE
    with pytest.raises(LakeSchemaError, match="CSV lake keeps its columns"):
        merge_schemas(BASE, struct(*BASE.fields, optional("note", StringType())), csv=True)
    with pytest.raises(LakeSchemaError, match="CSV lake keeps its columns"):
        merge_schemas(BASE, struct(required("id", LongType())), csv=True)


def test_every_problem_is_listed() -> None:
    batch = struct(required("id", StringType()), optional("name", LongType()), required("x", LongType()))
    with pytest.raises(LakeSchemaError) as caught:
        merge_schemas(BASE, batch)
    assert str(caught.value).count(" in the lake and ") == 2
    assert "new field x" in str(caught.value)


def _rows(*batches: tuple[int, str, StructType | None]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for task, key, schema in batches:
        text = None if schema is None else schema_to_text(schema)
        content = manifest(task, key, [], "", text)
        assert ('"schema"' in content) == (schema is not None)
        rows.append({"batch": key, "change": "", "topic": "t", "partition": task, "schema": text})
    return rows


def test_the_lake_state_merges_the_newest_batches_of_every_task() -> None:
    later = struct(*BASE.fields, optional("note", StringType()))
    state = lake_state(_rows((0, "0000000000002-aaaaaaaa", later), (1, "0000000000001-bbbbbbbb", BASE)))
    assert state == LakeState(later, raw=False)
    assert lake_state([]) == LakeState(None, raw=False)
    assert lake_state(_rows((0, "0000000000001-aaaaaaaa", None))) == LakeState(None, raw=True)


def test_newest_batches_that_disagree_fail_the_read() -> None:
    other = struct(required("id", StringType()))
    with pytest.raises(LakeSchemaError, match="newest batches of the lake's tasks disagree"):
        lake_state(_rows((0, "0000000000001-aaaaaaaa", BASE), (1, "0000000000002-bbbbbbbb", other)))


def test_a_connect_struct_maps_to_mergeable_rows() -> None:
    v1 = struct_schema({"id": INT64_SCHEMA})
    v2 = struct_schema({"id": INT64_SCHEMA, "note": OPTIONAL_STRING_SCHEMA})
    lake = row_schema(sink_batch(to_spark_field("value", v1).dataType))  # type: ignore[arg-type]
    batch = row_schema(sink_batch(to_spark_field("value", v2).dataType))  # type: ignore[arg-type]
    assert merge_schemas(lake, batch) == batch
