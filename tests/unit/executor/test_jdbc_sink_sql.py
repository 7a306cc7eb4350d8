"""The SQL text JdbcSink sends to PostgreSQL, without a database: quoting, table and staging names,
column types and defaults, DDL, and the scripts of each insert.mode."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from sluiceway.connect import ConnectException
from sluiceway.connect.data.schema import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    array_schema,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway_executor.connectors.jdbc_sink_columns import SinkColumn
from sluiceway_executor.connectors.jdbc_sink_sql import (
    add_columns_sql,
    column_type,
    create_table_sql,
    default_literal,
    insert_script,
    keeps_positions,
    literal,
    quote,
    sink_table_name,
    staging_ddl,
    staging_table_name,
    table_columns_query,
    table_parts,
    update_script,
    upsert_script,
    value_expression,
)
from sluiceway_executor.connectors.jdbc_statements import database_error, script_text

KEY = SinkColumn("id", INT64_SCHEMA, ("key",), key=True)
NAME = SinkColumn('na"me', OPTIONAL_STRING_SCHEMA, ("value", 'na"me'))
AT = SinkColumn("at", timestamp_schema(optional=True), ("value", "at"))
COLUMNS = [KEY, NAME, AT]


def test_names_are_quoted_and_literals_escaped() -> None:
    assert quote("plain") == '"plain"'
    assert quote('we"ird name') == '"we""ird name"'
    assert literal("it's a \\ test") == "E'it''s a \\\\ test'"
    for bad in ("", "nul\x00"):
        with pytest.raises(ConnectException):
            quote(bad)


def test_table_names_and_their_parts() -> None:
    assert sink_table_name("${topic}", "orders") == "orders"
    assert sink_table_name("app.${topic}_copy", "orders") == "app.orders_copy"
    assert sink_table_name("${topic}", "orders-v1") == '"orders-v1"'
    assert sink_table_name("${topic}", "a.b-c") == '"a.b-c"'
    assert table_parts("App.Orders") == ["app", "orders"]
    assert table_parts('app."Or""ders".x') == ["app", 'Or"ders', "x"]
    assert table_parts('"orders-v1"') == ["orders-v1"]
    with pytest.raises(ConnectException):
        table_parts("orders; DROP TABLE x")


def test_staging_tables_are_per_table_connector_and_task_and_fit_postgres_names() -> None:
    name = staging_table_name("app.orders", "sink", 3)
    assert name.startswith('"app"."orders_sl_stage_') and name.endswith('_3"')
    assert name != staging_table_name("app.orders", "other-sink", 3)
    assert name != staging_table_name("app.orders", "sink", 4)
    long = staging_table_name('"' + "é" * 60 + '"', "sink", 12)
    assert len(long.strip('"').encode()) <= 63
    assert staging_table_name('"x""y"', "sink", 0).startswith('"x""y_sl_stage_')


def test_column_types_follow_the_connect_schema() -> None:
    cases: list[tuple[Schema, str]] = [
        (INT8_SCHEMA, "SMALLINT"),
        (INT16_SCHEMA, "SMALLINT"),
        (INT32_SCHEMA, "INTEGER"),
        (INT64_SCHEMA, "BIGINT"),
        (FLOAT32_SCHEMA, "REAL"),
        (FLOAT64_SCHEMA, "DOUBLE PRECISION"),
        (BOOLEAN_SCHEMA, "BOOLEAN"),
        (STRING_SCHEMA, "TEXT"),
        (BYTES_SCHEMA, "BYTEA"),
        (decimal_schema(2, precision=10), "NUMERIC(10,2)"),
        (decimal_schema(4), "NUMERIC"),
        (date_schema(), "DATE"),
        (time_schema(), "TIME"),
        (timestamp_schema(), "TIMESTAMP"),
    ]
    for schema, expected in cases:
        assert column_type(schema) == expected, schema
    with pytest.raises(ConnectException):
        column_type(array_schema(STRING_SCHEMA))


def test_simple_defaults_become_column_defaults() -> None:
    assert default_literal(INT32_SCHEMA.with_options(default=7)) == "7"
    assert default_literal(BOOLEAN_SCHEMA.with_options(default=False)) == "FALSE"
    assert default_literal(STRING_SCHEMA.with_options(default="it's")) == "E'it''s'"
    assert default_literal(FLOAT64_SCHEMA.with_options(default=1.5)) == "E'1.5'::DOUBLE PRECISION"
    assert default_literal(BYTES_SCHEMA.with_options(default=b"\x01\xff")) == "decode(E'01ff', 'hex')"
    assert default_literal(decimal_schema(2).with_options(default=decimal.Decimal("1.50"))) == "1.50"
    assert default_literal(date_schema().with_options(default=dt.date(2024, 2, 29))) == "DATE E'2024-02-29'"
    assert (
        default_literal(time_schema().with_options(default=dt.time(1, 2, 3, 4000)))
        == "TIME E'01:02:03.004000'"
    )
    instant = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert (
        default_literal(timestamp_schema().with_options(default=instant))
        == "TIMESTAMP E'2024-01-02 03:04:05'"
    )
    assert default_literal(INT32_SCHEMA) is None


def test_create_and_alter_table() -> None:
    counted = SinkColumn("n", INT32_SCHEMA.with_options(default=0), ("value", "n"))
    assert create_table_sql('"t-1"', [KEY, NAME, counted]) == (
        'CREATE TABLE IF NOT EXISTS "t-1" ("id" BIGINT NOT NULL, "na""me" TEXT, '
        '"n" INTEGER NOT NULL DEFAULT 0, PRIMARY KEY ("id"))'
    )
    assert create_table_sql("t", [NAME]) == 'CREATE TABLE IF NOT EXISTS t ("na""me" TEXT)'
    assert add_columns_sql("app.t", [NAME, AT]) == (
        'ALTER TABLE app.t ADD COLUMN IF NOT EXISTS "na""me" TEXT, ADD COLUMN IF NOT EXISTS "at" TIMESTAMP'
    )


def test_metadata_query_finds_the_table_as_a_statement_would() -> None:
    query = table_columns_query('app."Or\'ders"')
    assert "to_regclass(E'app.\"Or''ders\"')" in query
    assert "attnum > 0 AND NOT a.attisdropped" in query


def test_staging_table_holds_numbers_for_converted_values() -> None:
    timed = SinkColumn("t", time_schema(), ("value", "t"))
    money = SinkColumn("m", decimal_schema(2, precision=5), ("value", "m"))
    assert staging_ddl("s", [KEY, AT, timed, money]) == [
        "DROP TABLE IF EXISTS s",
        "CREATE UNLOGGED TABLE s (sl_topic TEXT, sl_partition INTEGER, sl_offset BIGINT, "
        "sl_tombstone BOOLEAN, c0 BIGINT, c1 BIGINT, c2 INTEGER, c3 NUMERIC)",
    ]
    assert (
        staging_ddl("s", [KEY, money], positions=False)[1]
        == "CREATE UNLOGGED TABLE s (c0 BIGINT, c1 NUMERIC)"
    )
    assert keeps_positions("insert", delete_enabled=True) and keeps_positions("upsert", delete_enabled=False)
    assert not keeps_positions("insert", delete_enabled=False)


def test_value_expressions_convert_timestamps_and_times_exactly() -> None:
    assert value_expression(KEY, 0) == "s.c0"
    utc = value_expression(AT, 2)
    assert utc == (
        "(TIMESTAMP '1970-01-01 00:00:00' + (s.c2 / 1000000) * INTERVAL '1 second' "
        "+ (s.c2 % 1000000) * INTERVAL '1 microsecond')"
    )
    assert (
        value_expression(AT, 2, "Europe/Paris")
        == f"(({utc} AT TIME ZONE 'UTC') AT TIME ZONE E'Europe/Paris')"
    )
    timed = SinkColumn("t", time_schema(), ("value", "t"))
    assert value_expression(timed, 1, alias="x") == "(TIME '00:00:00' + x.c1 * INTERVAL '1 millisecond')"


def test_insert_script_moves_the_staging_rows_and_empties_it() -> None:
    script = insert_script("t", "s", COLUMNS, "UTC", delete_enabled=False)
    assert script[0] == "SET LOCAL TIME ZONE E'UTC'"
    assert script[1].startswith('INSERT INTO t ("id", "na""me", "at") SELECT s.c0, s.c1, (TIMESTAMP')
    # Without deletes the staging table holds neither tombstones nor positions.
    assert script[1].endswith("FROM s AS s")
    assert script[-1] == "TRUNCATE s"
    with_deletes = insert_script("t", "s", COLUMNS, "UTC", delete_enabled=True)
    assert with_deletes[1] == 'DELETE FROM t AS t USING s AS s WHERE s.sl_tombstone AND t."id" = s.c0'
    assert (
        "WHERE NOT s.sl_tombstone AND NOT EXISTS (SELECT 1 FROM s AS x WHERE x.sl_tombstone"
        in with_deletes[2]
    )


def test_upsert_script_applies_the_last_record_of_each_key_in_one_statement() -> None:
    script = upsert_script("t", "s", COLUMNS, "UTC", delete_enabled=True)
    assert len(script) == 3
    upsert = script[1]
    assert upsert.startswith(
        "WITH latest AS (SELECT DISTINCT ON (s.c0) s.* FROM s AS s ORDER BY s.c0, "
        "s.sl_topic DESC, s.sl_partition DESC, s.sl_offset DESC), "
        'deleted AS (DELETE FROM t AS t USING latest AS s WHERE s.sl_tombstone AND t."id" = s.c0) '
        'INSERT INTO t ("id", "na""me", "at") SELECT s.c0, s.c1, '
    )
    assert upsert.endswith(
        'FROM latest AS s WHERE NOT s.sl_tombstone ON CONFLICT ("id") DO UPDATE SET '
        '"na""me" = EXCLUDED."na""me", "at" = EXCLUDED."at"'
    )
    keys_only = upsert_script("t", "s", [KEY], "UTC", delete_enabled=False)[1]
    assert keys_only.endswith('ON CONFLICT ("id") DO NOTHING') and "DELETE" not in keys_only


def test_update_script_changes_only_rows_that_exist() -> None:
    script = update_script("t", "s", COLUMNS, "UTC", delete_enabled=False)
    assert len(script) == 3
    assert script[1].startswith("WITH latest AS (SELECT DISTINCT ON (s.c0)")
    assert ' UPDATE t AS t SET "na""me" = s.c1, "at" = (TIMESTAMP' in script[1]
    assert script[1].endswith('FROM latest AS s WHERE NOT s.sl_tombstone AND t."id" = s.c0')
    with_deletes = update_script("t", "s", COLUMNS, "UTC", delete_enabled=True)
    assert "DELETE FROM t AS t USING latest AS s WHERE s.sl_tombstone" in with_deletes[1]
    with pytest.raises(ConnectException, match="primary key"):
        upsert_script("t", "s", [NAME], "UTC", delete_enabled=False)


def test_scripts_run_as_one_transaction_and_errors_keep_the_database_message() -> None:
    assert script_text(["SELECT 1", "SELECT 2"]) == "BEGIN;\nSELECT 1;\nSELECT 2;\nCOMMIT"
    with pytest.raises(ValueError, match="needs statements"):
        script_text([])
    error = RuntimeError(
        "Job aborted ... org.postgresql.util.PSQLException: ERROR: division by zero\n\tat org.postgresql..."
    )
    assert str(database_error("Applying", error)) == "Applying failed: ERROR: division by zero"
    assert str(database_error("Reading", RuntimeError("boom\nmore"))) == "Reading failed: boom"
