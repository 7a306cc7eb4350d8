"""JdbcSource without a database: the SQL each mode pushes to the database, offsets in the keys of
Kafka's JDBC source, the checks of keys against each other (through validation), how tables are
split between tasks, and heartbeats for every offset shape."""

from __future__ import annotations

import pytest

from sluiceway.connect import (
    AbstractConfig,
    BatchContext,
    ConfigException,
    ConnectException,
    MemoryOffsetStorageReader,
    PluginRegistry,
    validate_connector_config,
)
from sluiceway.connect.batch_config import DEFAULT_BATCH_MAX_RECORDS
from sluiceway_executor.connectors.jdbc_source import JdbcSourceConnector, JdbcSourceTask
from sluiceway_executor.connectors.jdbc_source_config import source_config_def
from sluiceway_executor.connectors.jdbc_source_queries import Position, SourceQueries, timestamp_literal

URL = "jdbc:postgresql://localhost:5432/app"
# 2024-05-06 07:08:09.123456 UTC
MICROS = 1714979289123456
LITERAL = "TIMESTAMP '2024-05-06 07:08:09.123456'"


def source(**extra: str) -> dict[str, str]:
    return {"name": "db", "connector.class": "JdbcSource", "connection.url": URL, **extra}


def errors(config: dict[str, str]) -> dict[str, list[str]]:
    registry = PluginRegistry.of(JdbcSourceConnector)
    return dict(validate_connector_config(registry, config).errors())


def test_a_batch_takes_the_executors_limit_but_never_more_than_batch_max_rows() -> None:
    queries = SourceQueries(mode="incrementing", source="orders", incrementing_column="id", max_rows=10)
    assert "LIMIT 4) AS next_rows" in queries.bounds_query(None, 4)
    assert "LIMIT 10) AS next_rows" in queries.bounds_query(None, 50)
    assert "LIMIT 10) AS next_rows" in queries.bounds_query(None, None)
    assert "LIMIT 1) AS next_rows" in queries.bounds_query(None, 0)


def test_batch_max_rows_defaults_to_the_executors_record_ceiling() -> None:
    assert SourceQueries(mode="incrementing", source="t").max_rows == DEFAULT_BATCH_MAX_RECORDS
    config = AbstractConfig(source_config_def(), {"connection.url": "jdbc:postgresql://db/x"})
    assert config.get_int("batch.max.rows") == DEFAULT_BATCH_MAX_RECORDS


def test_incrementing_sql_orders_and_limits_in_the_database() -> None:
    queries = SourceQueries(mode="incrementing", source="orders", incrementing_column="id", max_rows=10)
    # The rows are counted in the database only when the values' range could hold more than 10.
    assert queries.bounds_query(None) == (
        "SELECT CASE WHEN MAX(id) - MIN(id) < 10 THEN MAX(id) ELSE (SELECT MAX(sluiceway_inc) FROM "
        "(SELECT id AS sluiceway_inc FROM orders ORDER BY sluiceway_inc LIMIT 10) AS next_rows) END "
        "AS incrementing FROM orders HAVING MAX(id) IS NOT NULL"
    )
    assert "WHERE id > 41 ORDER BY" in queries.bounds_query(Position(incrementing=41))
    assert queries.batch_query(Position(incrementing=41), Position(incrementing=50)) == (
        "SELECT * FROM orders WHERE id > 41 AND id <= 50 ORDER BY id"
    )
    assert (
        queries.batch_query(None, Position(incrementing=50))
        == "SELECT * FROM orders WHERE id <= 50 ORDER BY id"
    )


def test_timestamp_sql_waits_the_delay_and_reads_whole_timestamps() -> None:
    queries = SourceQueries(
        mode="timestamp", source="app.orders", timestamp_columns=("updated",), delay_ms=250
    )
    bounds = queries.bounds_query(Position(micros=MICROS))
    assert bounds == (
        "SELECT CAST(ROUND(EXTRACT(EPOCH FROM sluiceway_ts) * 1000000) AS BIGINT) AS micros FROM "
        f"(SELECT updated AS sluiceway_ts FROM app.orders WHERE updated > {LITERAL} AND "
        "updated < CURRENT_TIMESTAMP - INTERVAL '250 milliseconds' ORDER BY sluiceway_ts LIMIT 1000000) "
        "AS next_rows ORDER BY sluiceway_ts DESC LIMIT 1"
    )
    upto = Position(micros=MICROS + 1)
    assert queries.batch_query(Position(micros=MICROS), upto) == (
        f"SELECT * FROM app.orders WHERE updated > {LITERAL} AND "
        "updated <= TIMESTAMP '2024-05-06 07:08:09.123457' ORDER BY updated"
    )
    # Several timestamp columns: the first that is not null; no delay: the database's clock.
    both = SourceQueries(mode="timestamp", source="t", timestamp_columns=("modified", "created"))
    assert "WHERE COALESCE(modified, created) < CURRENT_TIMESTAMP ORDER BY" in both.bounds_query(None)


def test_timestamp_incrementing_sql_compares_the_pair() -> None:
    queries = SourceQueries(
        mode="timestamp+incrementing",
        source='"Orders"',
        incrementing_column="id",
        timestamp_columns=("ts",),
        max_rows=5,
    )
    after, upto = Position(incrementing=7, micros=MICROS), Position(incrementing=3, micros=MICROS + 1)
    bounds = queries.bounds_query(after)
    assert f"WHERE (ts > {LITERAL} OR (ts = {LITERAL} AND id > 7)) AND ts < CURRENT_TIMESTAMP" in bounds
    assert "ORDER BY sluiceway_ts, sluiceway_inc LIMIT 5) AS next_rows" in bounds
    assert bounds.endswith("ORDER BY sluiceway_ts DESC, sluiceway_inc DESC LIMIT 1")
    later = "TIMESTAMP '2024-05-06 07:08:09.123457'"
    assert queries.batch_query(after, upto) == (
        f'SELECT * FROM "Orders" WHERE (ts > {LITERAL} OR (ts = {LITERAL} AND id > 7)) AND '
        f"(ts < {later} OR (ts = {later} AND id <= 3)) ORDER BY ts, id"
    )
    assert queries.bound_from_row({"incrementing": 3, "micros": MICROS + 1}) == upto
    with pytest.raises(ValueError, match="whole numbers"):
        queries.bound_from_row({"incrementing": "x", "micros": 1})


def test_query_and_bulk_sql() -> None:
    query = SourceQueries(
        mode="incrementing",
        source="SELECT id, name FROM a JOIN b USING (id)",
        is_query=True,
        incrementing_column="id",
    )
    assert query.batch_query(None, Position(incrementing=9)) == (
        "SELECT * FROM (SELECT id, name FROM a JOIN b USING (id)) AS sluiceway_query "
        "WHERE id <= 9 ORDER BY id"
    )
    bulk = SourceQueries(mode="bulk", source="orders")
    assert bulk.bulk_query() == "SELECT * FROM orders"
    with pytest.raises(ValueError, match="bulk"):
        bulk.bounds_query(None)


def test_offsets_use_the_kafka_jdbc_keys_and_carry_over() -> None:
    both = Position(incrementing=12, micros=MICROS)
    offset = both.to_offset()
    assert offset == {"timestamp": 1714979289123, "timestamp_nanos": 123456000, "incrementing": 12}
    assert Position.from_offset("timestamp+incrementing", offset) == both
    assert Position.from_offset("timestamp", offset) == Position(micros=MICROS)
    assert Position.from_offset("incrementing", offset) == Position(incrementing=12)
    # An offset without nanoseconds counts in milliseconds; one written in another mode starts over.
    assert Position.from_offset("timestamp", {"timestamp": 1714979289123}) == Position(
        micros=1714979289123000
    )
    assert Position.from_offset("timestamp+incrementing", {"incrementing": 5}) is None
    assert Position.from_offset("timestamp", None) is None
    with pytest.raises(ValueError, match="not an integer"):
        Position.from_offset("timestamp", {"timestamp": "soon"})
    assert timestamp_literal(0) == "TIMESTAMP '1970-01-01 00:00:00.000000'"
    assert timestamp_literal(MICROS) == LITERAL


def test_keys_checked_against_each_other_through_validation() -> None:
    assert errors(source(**{"table.whitelist": "a,b", "incrementing.column.name": "id"})) == {}
    assert errors(source(**{"table.whitelist": "a", "mode": "bulk"})) == {}
    assert errors(source(**{"table.whitelist": "a", "mode": "timestamp"})) == {
        "timestamp.column.name": ["timestamp.column.name is required when mode is 'timestamp'"]
    }
    assert errors(
        source(**{"table.whitelist": "a", "mode": "timestamp+incrementing", "timestamp.column.name": "ts"})
    ) == {
        "incrementing.column.name": [
            "incrementing.column.name is required when mode is 'timestamp+incrementing'"
        ]
    }
    assert errors(
        source(**{"table.whitelist": "a", "query": "SELECT 1", "mode": "bulk", "topic.prefix": "t"})
    ) == {
        "query": [
            "query and table.whitelist exclude each other: the connector copies either the result of one "
            "query or whole tables"
        ]
    }
    assert errors(source(mode="bulk")) == {
        "table.whitelist": ["Set table.whitelist (the tables to copy) or query"]
    }
    assert errors(source(query="SELECT 1", mode="bulk")) == {
        "topic.prefix": ["With query, topic.prefix is the topic's name and must not be empty"]
    }
    assert errors(source(**{"table.whitelist": "a", "table": "b", "mode": "bulk"})) == {
        "table": ["table is the old name of table.whitelist; set only table.whitelist"]
    }
    assert errors(source(**{"table.whitelist": "a", "mode": "sometimes"})) == {
        "mode": ["expected one of bulk, incrementing, timestamp, timestamp+incrementing (got sometimes)"]
    }
    assert list(errors(source(**{"table.whitelist": "a,b c", "mode": "bulk"}))) == ["table.whitelist"]
    # The connector and its tasks refuse what validation refuses.
    with pytest.raises(ConfigException, match=r"timestamp\.column\.name is required"):
        JdbcSourceConnector().start({"connection.url": URL, "table.whitelist": "a", "mode": "timestamp"})
    with pytest.raises(ConfigException, match="exclude each other"):
        JdbcSourceTask().start({"connection.url": URL, "table": "a", "query": "SELECT 1", "mode": "bulk"})


def test_tasks_share_the_whitelist() -> None:
    props = {"connection.url": URL, "table.whitelist": "a, b, c", "mode": "bulk"}
    connector = JdbcSourceConnector()
    connector.start(props)
    assert [config["table.whitelist"] for config in connector.task_configs(2)] == ["a,b", "c"]
    assert [config["table.whitelist"] for config in connector.task_configs(5)] == ["a", "b", "c"]
    assert connector.task_configs(1) == [{**props, "table.whitelist": "a,b,c"}]
    query = {"connection.url": URL, "query": "SELECT 1 AS x", "mode": "bulk", "topic.prefix": "q"}
    connector.start(query)
    assert connector.task_configs(3) == [query]


def test_alter_offsets_checks_the_mode_s_shape() -> None:
    connector = JdbcSourceConnector()
    config = {
        "connection.url": URL,
        "table.whitelist": "a",
        "mode": "timestamp",
        "timestamp.column.name": "ts",
    }
    good = {"timestamp": 1, "timestamp_nanos": 1000000}
    assert connector.alter_offsets(config, [({"table": "a"}, good), ({"query": "query"}, None)])
    with pytest.raises(ConnectException, match="in timestamp mode are null or"):
        connector.alter_offsets(config, [({"table": "a"}, {"incrementing": 3})])
    with pytest.raises(ConnectException, match="Source partitions"):
        connector.alter_offsets(config, [({"query": "other"}, None)])
    with pytest.raises(ConnectException, match="keeps no offsets"):
        connector.alter_offsets({**config, "mode": "bulk"}, [({"table": "a"}, good)])


def test_heartbeats_resend_each_table_s_offset_in_its_mode_s_shape() -> None:
    task = JdbcSourceTask()
    task.start(
        {
            "connection.url": URL,
            "table.whitelist": "a,b,c",
            "mode": "timestamp+incrementing",
            "timestamp.column.name": "ts",
            "incrementing.column.name": "id",
            "topic.prefix": "db-",
        }
    )
    offset = {"timestamp": 1714979289123, "timestamp_nanos": 123456000, "incrementing": 4}
    committed = MemoryOffsetStorageReader([({"table": "a"}, offset), ({"table": "c"}, {"incrementing": 9})])
    # b has no offset, c's is from another mode: only a's goes out.
    (record,) = task.produce_heartbeat_records(committed, BatchContext("c", 0, 1))
    assert (record.source_partition, record.source_offset) == ({"table": "a"}, offset)
    assert record.value == {"table": "a", **offset}
    assert record.value_schema is not None
    assert [f["field"] for f in record.value_schema["fields"]] == [
        "table",
        "timestamp",
        "timestamp_nanos",
        "incrementing",
    ]
    bulk = JdbcSourceTask()
    bulk.start({"connection.url": URL, "query": "SELECT 1 AS x", "mode": "bulk", "topic.prefix": "q"})
    assert bulk.produce_heartbeat_records(committed, BatchContext("c", 0, 1)) == []
