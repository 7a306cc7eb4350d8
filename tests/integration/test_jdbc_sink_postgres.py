"""JdbcSink against the session's real PostgreSQL through its Spark Connect, no mocks: batches built
as the executor hands them over (struct values carrying Connect schema metadata), written by a
JdbcSinkTask whose SQL runs through Spark's JDBC source, and the tables read back with psycopg."""

from __future__ import annotations

import datetime as dt
import decimal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession

from sluiceway.connect import BatchContext, ConnectException, OffsetRange
from sluiceway.connect.data.schema import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    date_schema,
    decimal_schema,
    struct_schema,
    time_schema,
    timestamp_schema,
)
from sluiceway_executor.connectors.jdbc_sink import JdbcSinkTask
from sluiceway_executor.connectors.jdbc_sink_sql import table_lock_sql
from sluiceway_executor.connectors.jdbc_statements import run_script
from sluiceway_server.embedded import jdbc_jars
from tests.postgres_server import PostgresServer
from tests.typed_batches import SinkRecord, sink_batch

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not jdbc_jars(),
        reason="no JDBC driver jar for Spark Connect (deploy/bootstrap.sh --tests installs "
        "/usr/share/java/postgresql.jar)",
    ),
]

ITEM = struct_schema({"id": INT64_SCHEMA, "name": OPTIONAL_STRING_SCHEMA, "qty": INT32_SCHEMA})
ITEM_KEY = struct_schema({"id": INT64_SCHEMA})


def started(postgres: PostgresServer, **props: str) -> JdbcSinkTask:
    task = JdbcSinkTask()
    task.start({"connection.url": postgres.jdbc_url, "connection.user": postgres.user, **props})
    return task


def context(batch_id: int = 0, connector: str = "sink", task_id: int = 0) -> BatchContext:
    return BatchContext(connector, task_id, batch_id)


def item(id_: int, name: str | None, qty: int = 1) -> dict[str, Any]:
    return {"id": id_, "name": name, "qty": qty}


def rows(postgres: PostgresServer, table: str, columns: str = "id, name, qty") -> list[tuple[Any, ...]]:
    return postgres.execute(f"SELECT {columns} FROM {table} ORDER BY 1, 2")


def table_exists(postgres: PostgresServer, table: str) -> bool:
    return postgres.execute("SELECT to_regclass(%s) IS NOT NULL", [table])[0][0] is True


@pytest.fixture
def other_session_zone(spark: SparkSession) -> Iterator[None]:
    """The session in a zone with daylight saving time, so a timestamp's wall clock differs from
    UTC and some UTC wall clocks do not exist locally; the sink must not care."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield
    spark.conf.set("spark.sql.session.timeZone", before or "UTC")


def test_insert_with_auto_create_maps_every_type(
    spark: SparkSession, postgres: PostgresServer, unique: str, other_session_zone: None
) -> None:
    table = f"typed_{unique}"
    schema = struct_schema(
        {
            "id": INT64_SCHEMA,
            "tiny": INT8_SCHEMA,
            "small": INT16_SCHEMA,
            "n": INT32_SCHEMA.with_options(default=42),
            "ratio": FLOAT32_SCHEMA,
            "score": OPTIONAL_FLOAT64_SCHEMA,
            "ok": BOOLEAN_SCHEMA,
            "name": OPTIONAL_STRING_SCHEMA,
            "raw": OPTIONAL_BYTES_SCHEMA,
            "price": decimal_schema(2, precision=10, optional=True),
            "exact": decimal_schema(5, optional=True),
            "day": date_schema(optional=True),
            "at": time_schema(optional=True),
            "ts": timestamp_schema(optional=True),
        }
    )
    full = {
        "id": 1,
        "tiny": -8,
        "small": 1600,
        "n": 7,
        "ratio": 0.5,
        "score": 2.25,
        "ok": True,
        "name": "zoë 'quoted'",
        "raw": b"\x00\x01\xff",
        "price": decimal.Decimal("12345678.90"),
        "exact": decimal.Decimal("-0.00001"),
        "day": dt.date(2024, 2, 29),
        "at": dt.time(23, 59, 59, 999000),
        # 02:30 on the day New York skips from 02:00 to 03:00.
        "ts": dt.datetime(2024, 3, 10, 2, 30, 15, 123000, tzinfo=dt.UTC),
    }
    empty = {**dict.fromkeys(full), "id": 2, "tiny": 0, "small": 0, "n": 0, "ratio": 0.0, "ok": False}
    task = started(postgres, **{"table.name.format": "${topic}", "auto.create": "true"})
    task.write_batch(
        sink_batch(spark, schema, [(table, 0, 0, None, full), (table, 0, 1, None, empty)]), context()
    )

    types = postgres.execute(
        "SELECT column_name, data_type, numeric_precision, numeric_scale, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_name = %s ORDER BY ordinal_position",
        [table],
    )
    assert [(name, kind, nullable) for name, kind, _, _, nullable, _ in types] == [
        ("id", "bigint", "NO"),
        ("tiny", "smallint", "NO"),
        ("small", "smallint", "NO"),
        ("n", "integer", "NO"),
        ("ratio", "real", "NO"),
        ("score", "double precision", "YES"),
        ("ok", "boolean", "NO"),
        ("name", "text", "YES"),
        ("raw", "bytea", "YES"),
        ("price", "numeric", "YES"),
        ("exact", "numeric", "YES"),
        ("day", "date", "YES"),
        ("at", "time without time zone", "YES"),
        ("ts", "timestamp without time zone", "YES"),
    ]
    by_name = {name: (precision, scale, default) for name, _, precision, scale, _, default in types}
    assert by_name["price"][:2] == (10, 2)
    assert by_name["exact"][:2] == (None, None)
    assert by_name["n"][2] == "42"
    # No primary key without a pk.mode.
    assert postgres.execute("SELECT count(*) FROM pg_index WHERE indrelid = %s::regclass", [table]) == [(0,)]

    written = postgres.execute(f"SELECT * FROM {table} ORDER BY id")
    assert written[0] == (
        1,
        -8,
        1600,
        7,
        0.5,
        2.25,
        True,
        "zoë 'quoted'",
        b"\x00\x01\xff",
        decimal.Decimal("12345678.90"),
        decimal.Decimal("-0.00001"),
        dt.date(2024, 2, 29),
        dt.time(23, 59, 59, 999000),
        dt.datetime(2024, 3, 10, 2, 30, 15, 123000),
    )
    assert written[1] == (2, 0, 0, 0, 0.0, None, False, None, None, None, None, None, None, None)


def test_insert_appends_and_a_repeated_batch_adds_its_rows_again(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"plain_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id bigint, name text, qty integer, extra text DEFAULT 'x')")
    batch = sink_batch(spark, ITEM, [(table, 0, i, None, item(i, f"n{i}", i)) for i in range(5)])
    task = started(postgres)
    task.write_batch(batch, context(0))
    assert rows(postgres, table) == [(i, f"n{i}", i) for i in range(5)]
    # At least once: insert mode writes a batch that is written again twice.
    task.write_batch(batch, context(1))
    assert len(rows(postgres, table)) == 10
    # The staging table is left empty.
    (staging,) = postgres.execute(
        "SELECT relname FROM pg_class WHERE relname LIKE %s", [f"{table}_sl_stage_%"]
    )
    assert postgres.execute(f"SELECT count(*) FROM {staging[0]}") == [(0,)]


def test_an_insert_batch_that_fails_half_way_leaves_no_row_and_the_next_one_writes(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"whole_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id bigint, name text, qty integer CHECK (qty < 3))")
    # Four Spark partitions: the writer commits the staging rows of each on its own.
    batch = sink_batch(spark, ITEM, [(table, 0, i, None, item(i, f"n{i}", i)) for i in range(5)]).repartition(
        4
    )
    task = started(postgres)
    with pytest.raises(ConnectException, match="qty"):
        task.write_batch(batch, context(0))
    assert rows(postgres, table) == []
    good = sink_batch(spark, ITEM, [(table, 0, i, None, item(i, f"n{i}", i)) for i in range(3)]).repartition(
        4
    )
    task.write_batch(good, context(1))
    assert rows(postgres, table) == [(i, f"n{i}", i) for i in range(3)]


def test_upsert_keeps_the_last_record_of_each_key_and_a_repeated_batch_changes_nothing(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"upsert_{unique}"
    props = {
        "table.name.format": table,
        "auto.create": "true",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
    }
    first = sink_batch(
        spark,
        ITEM,
        [
            ("t", 0, 10, None, item(1, "a1")),
            ("t", 1, 3, None, item(2, "b1")),
            ("t", 0, 11, None, item(1, "a2")),
            ("t", 0, 12, None, item(3, "c1")),
            ("t", 0, 13, None, item(1, "a3", 9)),
        ],
    )
    task = started(postgres, **props)
    task.write_batch(first, context(0))
    after_first = [(1, "a3", 9), (2, "b1", 1), (3, "c1", 1)]
    assert rows(postgres, table) == after_first
    # The primary key is the one pk.fields names.
    assert postgres.execute(
        "SELECT a.attname::text FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        [table],
    ) == [("id",)]

    # As after a crash before the offsets were committed: the same batch again, by a new task.
    again = started(postgres, **props)
    again.write_batch(first, context(0))
    assert rows(postgres, table) == after_first

    second = sink_batch(spark, ITEM, [("t", 1, 4, None, item(2, "b2", 5)), ("t", 0, 14, None, item(4, None))])
    again.write_batch(second, context(1))
    again.write_batch(second, context(2))
    assert rows(postgres, table) == [(1, "a3", 9), (2, "b2", 5), (3, "c1", 1), (4, None, 1)]


def test_update_changes_existing_rows_only(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"update_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text, qty integer)")
    postgres.execute(f"INSERT INTO {table} VALUES (1, 'old', 1), (2, 'old', 2)")
    task = started(
        postgres,
        **{"table.name.format": table, "insert.mode": "update", "pk.mode": "record_value", "pk.fields": "id"},
    )
    batch = sink_batch(
        spark,
        ITEM,
        [
            ("t", 0, 0, None, item(1, "x")),
            ("t", 0, 1, None, item(3, "new")),
            ("t", 0, 2, None, item(1, "y", 7)),
        ],
    )
    task.write_batch(batch, context())
    task.write_batch(batch, context(1))
    assert rows(postgres, table) == [(1, "y", 7), (2, "old", 2)]


def test_tombstones_delete_rows_and_the_last_record_of_a_key_decides(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"deletes_{unique}"
    task = started(
        postgres,
        **{
            "table.name.format": table,
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "delete.enabled": "true",
        },
    )
    first = [("t", 0, i, {"id": i}, item(i, f"v{i}")) for i in range(1, 5)]
    task.write_batch(sink_batch(spark, ITEM, first, key_schema=ITEM_KEY), context(0))
    second: list[SinkRecord] = [
        ("t", 0, 10, {"id": 1}, None),  # deleted
        ("t", 0, 11, {"id": 2}, None),  # deleted, then written again: kept
        ("t", 0, 12, {"id": 2}, item(2, "back")),
        ("t", 0, 13, {"id": 5}, item(5, "gone")),  # new, then deleted in the same batch
        ("t", 0, 14, {"id": 5}, None),
        ("t", 0, 15, {"id": 9}, None),  # a tombstone for a key never seen
    ]
    batch = sink_batch(spark, ITEM, second, key_schema=ITEM_KEY)
    task.write_batch(batch, context(1))
    expected = [(2, "back", 1), (3, "v3", 1), (4, "v4", 1)]
    assert rows(postgres, table) == expected
    task.write_batch(batch, context(2))
    assert rows(postgres, table) == expected


def test_tombstones_are_skipped_without_delete_enabled(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"skip_{unique}"
    task = started(postgres, **{"table.name.format": table, "auto.create": "true"})
    batch = sink_batch(spark, ITEM, [("t", 0, 0, None, item(1, "a")), ("t", 0, 1, None, None)])
    task.write_batch(batch, context())
    assert rows(postgres, table) == [(1, "a", 1)]


def test_kafka_primary_key_writes_the_records_coordinates(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"kafka_pk_{unique}"
    task = started(
        postgres,
        **{"table.name.format": table, "auto.create": "true", "insert.mode": "upsert", "pk.mode": "kafka"},
    )
    batch = sink_batch(
        spark, ITEM, [("orders", 2, 40, None, item(1, "a")), ("orders", 3, 7, None, item(1, "b"))]
    )
    task.write_batch(batch, context(0))
    task.write_batch(batch, context(1))
    assert postgres.execute(
        f"SELECT __connect_topic, __connect_partition, __connect_offset, id, name FROM {table} ORDER BY 2"
    ) == [("orders", 2, 40, 1, "a"), ("orders", 3, 7, 1, "b")]
    types = postgres.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
        "AND column_name LIKE '\\_\\_connect%%' ORDER BY ordinal_position",
        [table],
    )
    assert types == [
        ("__connect_topic", "text"),
        ("__connect_partition", "integer"),
        ("__connect_offset", "bigint"),
    ]


def test_record_key_from_a_string_key(spark: SparkSession, postgres: PostgresServer, unique: str) -> None:
    table = f"string_key_{unique}"
    task = started(
        postgres,
        **{
            "table.name.format": table,
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "pk.fields": "code",
            "fields.whitelist": "name",
        },
    )
    batch = sink_batch(
        spark,
        ITEM,
        [
            ("t", 0, 0, "k-1", item(1, "first")),
            ("t", 0, 1, "k-2", item(2, "other")),
            ("t", 0, 2, "k-1", item(3, "last")),
        ],
    )
    task.write_batch(batch, context())
    assert postgres.execute(f"SELECT * FROM {table} ORDER BY code") == [("k-1", "last"), ("k-2", "other")]


def test_record_key_from_a_struct_key_with_a_value_field_of_the_same_name(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"struct_key_{unique}"
    key_schema = struct_schema({"region": STRING_SCHEMA, "id": INT64_SCHEMA})
    task = started(
        postgres,
        **{
            "table.name.format": table,
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
        },
    )
    batch = sink_batch(
        spark,
        ITEM,
        [
            ("t", 0, 0, {"region": "eu", "id": 1}, item(100, "eu one")),
            ("t", 0, 1, {"region": "us", "id": 1}, item(100, "us one")),
        ],
        key_schema=key_schema,
    )
    task.write_batch(batch, context())
    # The key's id is the column; the value's id is not written over it.
    assert postgres.execute(f"SELECT region, id, name, qty FROM {table} ORDER BY region") == [
        ("eu", 1, "eu one", 1),
        ("us", 1, "us one", 1),
    ]


def test_record_value_primary_key_of_several_fields(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"value_pk_{unique}"
    task = started(
        postgres,
        **{
            "table.name.format": table,
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id,qty",
        },
    )
    batch = sink_batch(
        spark,
        ITEM,
        [
            ("t", 0, 0, None, item(1, "a", 1)),
            ("t", 0, 1, None, item(1, "b", 2)),
            ("t", 0, 2, None, item(1, "c", 1)),
        ],
    )
    task.write_batch(batch, context())
    assert rows(postgres, table) == [(1, "b", 2), (1, "c", 1)]


def test_auto_evolve_adds_an_optional_column_and_refuses_without_it(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"evolve_{unique}"
    evolved = struct_schema(
        {
            "id": INT64_SCHEMA,
            "name": OPTIONAL_STRING_SCHEMA,
            "qty": INT32_SCHEMA,
            "note": OPTIONAL_STRING_SCHEMA,
        }
    )
    base = {"table.name.format": table, "auto.create": "true", "insert.mode": "upsert"}
    base |= {"pk.mode": "record_value", "pk.fields": "id"}
    task = started(postgres, **base)
    task.write_batch(sink_batch(spark, ITEM, [("t", 0, 0, None, item(1, "a"))]), context(0))

    strict = started(postgres, **{**base, "auto.create": "false"})
    newer = sink_batch(spark, evolved, [("t", 0, 1, None, {**item(2, "b"), "note": "hello"})])
    with pytest.raises(ConnectException, match=rf"Table {table} has no column 'note'.*auto.evolve"):
        strict.write_batch(newer, context(1))
    assert rows(postgres, table) == [(1, "a", 1)]

    evolving = started(postgres, **{**base, "auto.evolve": "true"})
    evolving.write_batch(newer, context(1))
    assert rows(postgres, table, "id, name, qty, note") == [(1, "a", 1, None), (2, "b", 1, "hello")]
    # The table the task knows is the new one: the older schema's records still go in.
    evolving.write_batch(sink_batch(spark, ITEM, [("t", 0, 2, None, item(3, "c"))]), context(2))
    assert rows(postgres, table, "id, note") == [(1, None), (2, "hello"), (3, None)]


def test_missing_table_without_auto_create_fails_and_writes_nothing(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"missing_{unique}"
    task = started(postgres, **{"table.name.format": table})
    with pytest.raises(ConnectException, match=rf"Table {table} does not exist.*id, name, qty"):
        task.write_batch(sink_batch(spark, ITEM, [("t", 0, 0, None, item(1, "a"))]), context())
    assert not table_exists(postgres, table)
    # Once the table is there, the same task writes to it.
    postgres.execute(f"CREATE TABLE {table} (id bigint, name text, qty integer)")
    task.write_batch(sink_batch(spark, ITEM, [("t", 0, 0, None, item(1, "a"))]), context(1))
    assert rows(postgres, table) == [(1, "a", 1)]


def test_a_table_created_by_another_task_at_the_same_moment_is_waited_for_and_used(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    """Two tasks creating one table: the second waits for the first's lock (PostgreSQL's IF NOT
    EXISTS alone lets it fail on the catalog's unique index), then finds the table and writes."""
    table = f"race_{unique}"
    props = {"table.name.format": table, "auto.create": "true", "insert.mode": "upsert"}
    props |= {"pk.mode": "record_value", "pk.fields": "id"}
    batch = sink_batch(spark, ITEM, [("t", 0, i, None, item(i, f"n{i}")) for i in range(3)])
    errors: list[BaseException] = []

    def write() -> None:
        try:
            started(postgres, **props).write_batch(batch, context(task_id=1))
        except BaseException as e:  # handed to the test's thread
            errors.append(e)

    with postgres.connect() as first, first.transaction():
        # The other task, half-way through creating the table.
        first.execute(table_lock_sql(table).encode())
        first.execute(
            f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text, qty integer NOT NULL)".encode()
        )
        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 120
        # Waiting for the lock on this table's name (an advisory lock's key is in two halves).
        waiting = (
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND ((classid::int8 << 32) | objid::int8) = hashtextextended(%s, 0)"
        )
        while postgres.execute(waiting, [f"sluiceway.jdbc-sink {table}"]) != [(1,)]:
            assert writer.is_alive() and not errors, errors
            assert time.monotonic() < deadline, "the sink never asked for the table's lock"
            time.sleep(0.1)
    writer.join(120)
    assert not writer.is_alive()
    assert errors == []
    assert rows(postgres, table) == [(i, f"n{i}", 1) for i in range(3)]


def test_topics_that_need_quoting_and_a_batch_of_two_topics(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    dashed, other = f"orders-{unique}", f"Refunds.v-{unique}"
    task = started(
        postgres,
        **{
            "table.name.format": "${topic}",
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
        },
    )
    odd = struct_schema(
        {"id": INT64_SCHEMA, 'Na"me': OPTIONAL_STRING_SCHEMA, "when": timestamp_schema(optional=True)}
    )
    at = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batch = sink_batch(
        spark,
        odd,
        [
            (dashed, 0, 0, None, {"id": 1, 'Na"me': "o1", "when": at}),
            (other, 0, 0, None, {"id": 1, 'Na"me': "r1", "when": None}),
            (dashed, 0, 1, None, {"id": 2, 'Na"me': "o2", "when": at}),
        ],
    )
    # The topics come from the batch's offset ranges, as the executor gives them (no Spark job).
    ranges = (OffsetRange(dashed, 0, 0, 2), OffsetRange(other, 0, 0, 1))
    task.write_batch(batch, BatchContext("sink", 0, 0, ranges))
    assert postgres.execute(f'SELECT id, "Na""me", "when" FROM "{dashed}" ORDER BY id') == [
        (1, "o1", dt.datetime(2024, 1, 1)),
        (2, "o2", dt.datetime(2024, 1, 1)),
    ]
    assert postgres.execute(f'SELECT id, "Na""me", "when" FROM "{other}" ORDER BY id') == [(1, "r1", None)]


def test_a_script_is_one_transaction(spark: SparkSession, postgres: PostgresServer, unique: str) -> None:
    table = f"atomic_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id integer)")
    postgres.execute(f"INSERT INTO {table} VALUES (1)")
    options = {"url": postgres.jdbc_url, "user": postgres.user, "driver": "org.postgresql.Driver"}
    statements = [
        f"INSERT INTO {table} VALUES (2)",
        f"CREATE TABLE {table}_made (id integer)",
        f"DELETE FROM {table} WHERE id = 1",
        "SELECT 1 / 0",
    ]
    with pytest.raises(ConnectException, match="Testing failed: ERROR: division by zero"):
        run_script(spark, options, statements, "Testing")
    assert postgres.execute(f"SELECT id FROM {table}") == [(1,)]
    assert not table_exists(postgres, f"{table}_made")
    run_script(spark, options, statements[:3], "Testing")
    assert postgres.execute(f"SELECT id FROM {table}") == [(2,)]
    assert table_exists(postgres, f"{table}_made")


def test_db_timezone_writes_wall_clock_times_of_that_zone(
    spark: SparkSession, postgres: PostgresServer, unique: str
) -> None:
    table = f"zoned_{unique}"
    postgres.execute(f"CREATE TABLE {table} (id bigint PRIMARY KEY, local timestamp, instant timestamptz)")
    schema = struct_schema(
        {
            "id": INT64_SCHEMA,
            "local": timestamp_schema(optional=True),
            "instant": timestamp_schema(optional=True),
        }
    )
    at = dt.datetime(2024, 7, 1, 22, 30, tzinfo=dt.UTC)
    task = started(
        postgres,
        **{
            "table.name.format": table,
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "id",
            "db.timezone": "Europe/Paris",
        },
    )
    task.write_batch(
        sink_batch(spark, schema, [("t", 0, 0, None, {"id": 1, "local": at, "instant": at})]), context()
    )
    local, instant = postgres.execute(f"SELECT local, instant FROM {table}")[0]
    # Paris is two hours ahead in July; a column with a time zone holds the same instant.
    assert local == dt.datetime(2024, 7, 2, 0, 30)
    assert instant == at
