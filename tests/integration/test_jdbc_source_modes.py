"""JdbcSource's modes against the session's real PostgreSQL, Kafka and Spark, run by a control plane
and executor of the test's own: timestamp+incrementing with rows inserted and updated while it
runs; and in one stack, bulk, timestamp, a whitelist of two tables with a topic prefix, and a
custom query. Records are counted with a topic reader; offsets are read through OffsetService."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sluiceway.errors import InvalidArgumentError
from sluiceway_server.embedded import EmbeddedBroker, EmbeddedSparkConnect, jdbc_jars
from tests.conftest import ControlPlaneProcess
from tests.integration.api_helpers import read_topic
from tests.integration.pipeline_helpers import (
    FAST_EXECUTOR_SESSION,
    PipelineStack,
    attach_executor,
    committed_offsets,
)
from tests.postgres_server import PostgresServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not jdbc_jars(),
        reason="no JDBC driver jar for Spark Connect (deploy/bootstrap.sh --tests installs "
        "/usr/share/java/postgresql.jar)",
    ),
]

# Small polls, so a table with nothing new is asked again soon.
FAST = {"poll.interval.ms": 200}


def _create(postgres: PostgresServer, table: str, rows: int) -> None:
    postgres.execute(
        f"CREATE TABLE {table} (id serial PRIMARY KEY, name text NOT NULL, "
        "ts timestamptz NOT NULL DEFAULT clock_timestamp())"
    )
    _insert(postgres, table, rows)


def _insert(postgres: PostgresServer, table: str, rows: int, at: str = "now()") -> None:
    # now() is the statement's transaction time: every row of one insert shares one timestamp.
    postgres.execute(
        f"INSERT INTO {table} (name, ts) SELECT 'row ' || g, {at} FROM generate_series(1, %s) AS g", [rows]
    )


def _last_position(postgres: PostgresServer, table: str) -> dict[str, int]:
    """The offset of the table's last row in (ts, id) order, in Kafka's JDBC source keys."""
    ((row_id, micros),) = postgres.execute(
        f"SELECT id, CAST(ROUND(EXTRACT(EPOCH FROM ts) * 1000000) AS BIGINT) FROM {table} "
        "ORDER BY ts DESC, id DESC LIMIT 1"
    )
    return {
        "timestamp": micros // 1000,
        "timestamp_nanos": (micros % 1_000_000) * 1000,
        "incrementing": row_id,
    }


def _source(stack: PipelineStack, postgres: PostgresServer, name: str, config: dict[str, Any]) -> None:
    base = {
        "connector.class": "JdbcSource",
        "connection.url": postgres.jdbc_url,
        "connection.user": postgres.user,
    }
    stack.client.create_connector(name, {**base, "tasks.max": 1, **FAST, **config})


def _offsets_are(
    stack: PipelineStack, name: str, wanted: list[tuple[dict[str, Any], dict[str, Any]]]
) -> bool:
    return sorted(committed_offsets(stack.client, name), key=repr) == sorted(wanted, key=repr)


def test_timestamp_incrementing_copies_inserted_and_updated_rows(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    postgres: PostgresServer,
    unique: str,
) -> None:
    table, topic, name = f"ts_inc_{unique}", f"tsinc-{unique}", f"ts-inc-{unique}"
    _create(postgres, table, 10)
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "jdbc-ts-inc")
    try:
        # A mode without its column is refused on that key, and nothing is created.
        with pytest.raises(InvalidArgumentError) as refused:
            _source(
                stack,
                postgres,
                f"bad-{unique}",
                {
                    "table.whitelist": table,
                    "mode": "timestamp+incrementing",
                    "incrementing.column.name": "id",
                },
            )
        assert (
            "has 1 error(s): timestamp.column.name: timestamp.column.name is required when mode is "
            in str(refused.value)
        )
        assert list(stack.client.list_connectors()) == []

        _source(
            stack,
            postgres,
            name,
            {
                # Kafka's JDBC source's class name resolves to ours.
                "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
                "table.whitelist": table,
                "mode": "timestamp+incrementing",
                "timestamp.column.name": "ts",
                "incrementing.column.name": "id",
                # The prefix alone: the topic is prefix + table.
                "topic.prefix": f"{topic}-",
                # The first 10 rows share one timestamp and still come in batches of 4.
                "batch.max.rows": 4,
            },
        )
        partition = {"table": table}
        stack.wait_for(
            lambda: _offsets_are(stack, name, [(partition, _last_position(postgres, table))]),
            "the first 10 rows to be copied",
        )
        _insert(postgres, table, 3)
        postgres.execute(f"UPDATE {table} SET name = 'changed', ts = now() WHERE id IN (2, 5)")
        stack.wait_for(
            lambda: _offsets_are(stack, name, [(partition, _last_position(postgres, table))]),
            "the inserted and the updated rows to be copied",
        )
        records = [value for _, value in read_topic(broker.bootstrap_servers, f"{topic}-{table}")]
        assert len(records) == 15
        assert sorted(value["id"] for value in records) == sorted([*range(1, 14), 2, 5])
        # Each row as inserted, and the two updated rows once more as they are now.
        copied = sorted((value["id"], value["name"]) for value in records)
        inserted = [(i, f"row {i}") for i in range(1, 11)] + [(i, f"row {i - 10}") for i in range(11, 14)]
        assert copied == sorted([*inserted, (2, "changed"), (5, "changed")])
    finally:
        stack.close()


def test_bulk_timestamp_whitelist_and_query_sources(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    broker: EmbeddedBroker,
    postgres: PostgresServer,
    unique: str,
) -> None:
    bulk, stamped, first, second, queried = (
        f"{kind}_{unique}" for kind in ("bulk", "stamped", "wa", "wb", "q")
    )
    for table, rows in ((bulk, 3), (stamped, 6), (first, 4), (second, 5), (queried, 8)):
        _create(postgres, table, rows)
    prefix, query_topic = f"wl-{unique}-", f"query-{unique}"
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "jdbc-modes")
    try:
        _source(
            stack,
            postgres,
            f"bulk-{unique}",
            {"table.whitelist": bulk, "mode": "bulk", "poll.interval.ms": 500},
        )
        _source(
            stack,
            postgres,
            f"stamped-{unique}",
            {
                "table.whitelist": stamped,
                "mode": "timestamp",
                "timestamp.column.name": "ts",
                "topic.prefix": "ts-",
                # The 6 rows share one timestamp: they come in one batch all the same.
                "batch.max.rows": 2,
            },
        )
        _source(
            stack,
            postgres,
            f"whitelist-{unique}",
            {
                "connector.class": "JdbcSourceConnector",
                "tasks.max": 2,
                "table.whitelist": f"{first},{second}",
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "topic.prefix": prefix,
                # The executor's batch limit, below batch.max.rows: batches of 2 rows, none lost.
                "batch.max.records": 2,
            },
        )
        _source(
            stack,
            postgres,
            f"query-{unique}",
            {
                "query": f"SELECT id, upper(name) AS name FROM {queried} WHERE id % 2 = 0",
                "mode": "incrementing",
                "incrementing.column.name": "id",
                "topic.prefix": query_topic,
            },
        )

        def stamped_offset() -> dict[str, int]:
            position = _last_position(postgres, stamped)
            del position["incrementing"]
            return position

        stack.wait_for(
            lambda: _offsets_are(stack, f"stamped-{unique}", [({"table": stamped}, stamped_offset())]),
            "the timestamp source to copy its 6 rows",
        )
        _insert(postgres, stamped, 2)
        stack.wait_for(
            lambda: _offsets_are(
                stack,
                f"whitelist-{unique}",
                [({"table": first}, {"incrementing": 4}), ({"table": second}, {"incrementing": 5})],
            ),
            "the whitelist's two tables to be copied",
        )
        stack.wait_for(
            lambda: _offsets_are(stack, f"query-{unique}", [({"query": "query"}, {"incrementing": 8})]),
            "the query's rows to be copied",
        )
        stack.wait_for(
            lambda: _offsets_are(stack, f"stamped-{unique}", [({"table": stamped}, stamped_offset())]),
            "the timestamp source to copy the 2 rows inserted while it runs",
        )
        # Bulk copies the whole table at every poll and keeps no offset.
        stack.wait_for(
            lambda: len(read_topic(broker.bootstrap_servers, bulk)) >= 6, "two bulk copies of the table"
        )
        assert committed_offsets(stack.client, f"bulk-{unique}") == []
        bulk_ids = [value["id"] for _, value in read_topic(broker.bootstrap_servers, bulk)]
        assert sorted(set(bulk_ids)) == [1, 2, 3] and len(bulk_ids) % 3 == 0

        stamped_ids = [value["id"] for _, value in read_topic(broker.bootstrap_servers, f"ts-{stamped}")]
        assert sorted(stamped_ids) == list(range(1, 9))
        for table, rows in ((first, 4), (second, 5)):
            copied = [value["id"] for _, value in read_topic(broker.bootstrap_servers, prefix + table)]
            # Records without a key spread over the topic's partitions: compare them sorted.
            assert sorted(copied) == list(range(1, rows + 1))
        copied_query = [value for _, value in read_topic(broker.bootstrap_servers, query_topic)]
        assert sorted((v["id"], v["name"]) for v in copied_query) == [(i, f"ROW {i}") for i in (2, 4, 6, 8)]
        # The two tables of the whitelist went to two tasks.
        assert len(stack.client.get_connector(f"whitelist-{unique}").tasks) == 2
    finally:
        stack.close()


def test_the_incrementing_bound_counts_rows_only_when_their_range_could_exceed_the_limit(
    postgres: PostgresServer, unique: str
) -> None:
    """The bound query on the real server: a narrow range answers with its largest value, a wide one
    (gaps in the values) with the value of the limit-th row, nothing new with no row at all."""
    from sluiceway_executor.connectors.jdbc_source_queries import Position, SourceQueries

    table = f"bounds_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY)")
    postgres.execute(f"INSERT INTO {table} VALUES (1), (2), (3), (50), (51), (900), (901), (902)")
    queries = SourceQueries(mode="incrementing", source=table, incrementing_column="id", max_rows=100)

    def bound(after: int | None, limit: int) -> list[tuple[Any, ...]]:
        position = None if after is None else Position(incrementing=after)
        return postgres.execute(queries.bounds_query(position, limit))

    assert bound(None, 3) == [(3,)]  # range 1..902: counted, the third row
    assert bound(None, 100) == [(902,)]  # counted (range 1..902), and all 8 rows fit
    assert bound(3, 2) == [(51,)]  # range 50..902 with a limit of 2: counted
    assert bound(51, 5) == [(902,)]  # range 900..902 fits 5: MAX, no count
    assert bound(902, 5) == []
