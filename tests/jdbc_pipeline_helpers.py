"""What the PostgreSQL → Kafka → PostgreSQL tests share: the source table they copy, the
JdbcSource and JdbcSink configs that copy it, and the comparison of the two tables (rows and
column types)."""

from __future__ import annotations

from typing import Any, Final

from tests.postgres_server import PostgresServer

# Envelopes on both sides: the records carry the table's schema from source to sink.
ENVELOPES: Final = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}
COLUMNS: Final = "id, name, amount, updated_at, day, active, data"


def create_source_table(postgres: PostgresServer, table: str, rows: int) -> None:
    # Timestamps to the millisecond: Kafka Connect's Timestamp carries milliseconds.
    postgres.execute(
        f"CREATE TABLE {table} (id serial PRIMARY KEY, name text NOT NULL, amount numeric(10,2), "
        "updated_at timestamp(3) NOT NULL DEFAULT clock_timestamp(), day date, active boolean, data bytea)"
    )
    insert_rows(postgres, table, rows)


def insert_rows(postgres: PostgresServer, table: str, rows: int) -> None:
    postgres.execute(
        f"INSERT INTO {table} (name, amount, day, active, data) SELECT 'row ' || g, g * 1.25, "
        "DATE '2024-01-01' + g, g %% 2 = 0, CASE WHEN g %% 5 = 0 THEN NULL ELSE int4send(g) END "
        "FROM generate_series(1, %s) AS g",
        [rows],
    )


def update_rows(postgres: PostgresServer, table: str, ids: list[int]) -> None:
    postgres.execute(
        f"UPDATE {table} SET name = name || ' (updated)', amount = amount + 1, "
        "updated_at = clock_timestamp() WHERE id = ANY(%s)",
        [ids],
    )


def source_config(postgres: PostgresServer, table: str, prefix: str, batch_rows: int = 500) -> dict[str, Any]:
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": postgres.jdbc_url,
        "connection.user": postgres.user,
        "table.whitelist": table,
        "mode": "timestamp+incrementing",
        "timestamp.column.name": "updated_at",
        "incrementing.column.name": "id",
        "topic.prefix": prefix,
        "poll.interval.ms": 200,
        "batch.max.rows": batch_rows,
        # One partition: the records have no key, and an upsert needs a row's versions in order.
        "topic.creation.default.partitions": 1,
        "topic.creation.default.replication.factor": -1,
        **ENVELOPES,
    }


def sink_config(postgres: PostgresServer, topic: str, table: str) -> dict[str, Any]:
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": postgres.jdbc_url,
        "connection.user": postgres.user,
        "topics": topic,
        "table.name.format": table,
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        **ENVELOPES,
    }


def rows(postgres: PostgresServer, table: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in postgres.execute(f"SELECT {COLUMNS} FROM {table} ORDER BY id")]


def column_types(postgres: PostgresServer, table: str) -> list[tuple[Any, ...]]:
    """Each column's name and type: the SQL type with its numeric precision and scale."""
    return [
        tuple(r)
        for r in postgres.execute(
            "SELECT column_name, data_type, numeric_precision, numeric_scale FROM information_schema.columns "
            "WHERE table_name = %s ORDER BY ordinal_position",
            [table],
        )
    ]
