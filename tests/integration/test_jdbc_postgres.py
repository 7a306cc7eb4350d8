"""JDBC against a real PostgreSQL server (the session's throwaway one, `postgres` in conftest.py):
Spark Connect reads a table through the driver jar it was started with, and a `JdbcSource`
connector in incrementing mode, run by a control plane and executor of the test's own, copies a
table into a Kafka topic and picks up rows inserted while it runs."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from pyspark.sql import SparkSession

from sluiceway.connect.data import (
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    decimal_schema,
    schema_from_json,
    struct_schema,
    value_from_json,
)
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, jdbc_jars
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, attach_executor, committed_offsets
from tests.postgres_server import PostgresServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not jdbc_jars(),
        reason="no JDBC driver jar for Spark Connect (deploy/bootstrap.sh --tests installs "
        "/usr/share/java/postgresql.jar)",
    ),
]


def _create_table(postgres: PostgresServer, table: str, rows: int) -> None:
    postgres.execute(
        f"CREATE TABLE {table} (id serial PRIMARY KEY, name text NOT NULL, amount numeric(10,2))"
    )
    _insert(postgres, table, rows)


def _insert(postgres: PostgresServer, table: str, rows: int) -> None:
    postgres.execute(
        f"INSERT INTO {table} (name, amount) SELECT 'row ' || g, g * 1.25 FROM generate_series(1, %s) AS g",
        [rows],
    )


def test_spark_reads_a_table_with_the_driver_found_from_the_url(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"spark_read_{unique}"
    _create_table(postgres, table, 5)
    # No `driver` option: DriverManager in the Spark Connect server's JVM must know the driver.
    frame = (
        spark.read.format("jdbc")
        .option("url", postgres.jdbc_url)
        .option("user", postgres.user)
        .option("dbtable", table)
        .load()
    )
    rows = sorted((row["id"], row["name"], row["amount"]) for row in frame.collect())
    assert rows == postgres.execute(f"SELECT id, name, amount FROM {table} ORDER BY id")
    assert rows[-1] == (5, "row 5", Decimal("6.25"))


def test_jdbc_source_copies_a_table_and_the_rows_added_while_it_runs(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    postgres: PostgresServer,
    unique: str,
) -> None:
    table, prefix = f"jdbc_source_{unique}", f"jdbc-{unique}-"
    _create_table(postgres, table, 25)
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "jdbc-source")
    try:
        stack.client.create_connector(
            f"jdbc-source-{unique}",
            {
                "connector.class": "JdbcSource",
                "tasks.max": 1,
                "connection.url": postgres.jdbc_url,
                "connection.user": postgres.user,
                "table": table,
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "topic.prefix": prefix,
                # Several batches for the first 25 rows.
                "batch.max.rows": 10,
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "true",
            },
        )

        def copied_up_to(last_id: int) -> bool:
            wanted = [({"table": table}, {"incrementing": last_id})]
            return committed_offsets(stack.client, f"jdbc-source-{unique}") == wanted

        stack.wait_for(lambda: copied_up_to(25), "the first 25 rows to be copied")
        _insert(postgres, table, 7)
        stack.wait_for(lambda: copied_up_to(32), "the 7 rows inserted while it runs to be copied")

        records = read_topic(broker.bootstrap_servers, prefix + table)
        # Typed records with the table's schema, named after the table, as Kafka's JDBC source writes
        # (every column optional: Spark's JDBC reader reports columns of a query as nullable).
        schemas = {schema_from_json(envelope["schema"]) for _, envelope in records}
        assert schemas == {
            struct_schema(
                {
                    "id": OPTIONAL_INT32_SCHEMA,
                    "name": OPTIONAL_STRING_SCHEMA,
                    "amount": decimal_schema(2, precision=10, optional=True),
                },
                name=table,
            )
        }
        (schema,) = schemas
        values = [value_from_json(schema, envelope["payload"]) for _, envelope in records]
        copied = sorted((value["id"], value["name"], value["amount"]) for value in values)
        in_table = postgres.execute(f"SELECT id, name, amount FROM {table} ORDER BY id")
        assert len(records) == len(in_table) == 32
        assert copied == in_table
    finally:
        stack.close()
