"""What bench_jdbc.py times, one function per path: the typed topics it reads (produced here with
confluent-kafka as Kafka Connect JSON envelopes), the PostgreSQL tables, the hand-written Spark
jobs (the baselines) and the product's runs (a connector created over the API and timed until its
work is committed)."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from confluent_kafka import Consumer, TopicPartition
from pyspark.sql import SparkSession

from bench_pipelines import bench_producer, committed_total, produce_all
from bench_stack import Stack
from bench_steps import ConnectorSteps, connector_steps
from sluiceway.client import State
from sluiceway.common.offsets import offsets_from_proto
from sluiceway.connect.data import (
    BOOLEAN_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    decimal_schema,
    envelope_to_bytes,
    struct_schema,
    timestamp_schema,
)
from sluiceway.connect.data.spark import from_spark
from sluiceway_executor.converters.connect_spark_json import schema_text
from sluiceway_executor.datagen_records import ORDER_SCHEMA, typed_value
from sluiceway_executor.kafka_ranges import exact_end_offsets

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer

# The record of the JDBC paths: six fields, a timestamp among them (the realistic case); the
# same without it makes smaller records.
_FIELDS: Final[dict[str, Schema]] = {
    "id": INT64_SCHEMA,
    "name": STRING_SCHEMA,
    "quantity": INT32_SCHEMA,
    "amount": decimal_schema(2, precision=10),
    "created_at": timestamp_schema(),
    "active": BOOLEAN_SCHEMA,
}
WITH_TIMESTAMP: Final = struct_schema(_FIELDS, name="bench.Order")
WITHOUT_TIMESTAMP: Final = struct_schema(
    {name: schema for name, schema in _FIELDS.items() if name != "created_at"}, name="bench.Order"
)
_BASE: Final = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

SLOW_STATEMENT_MS: Final = 50

ENVELOPES: Final = {"value.converter": "JsonConverter", "value.converter.schemas.enable": "true"}


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def start_postgres(log_dir: Path) -> PostgresServer:
    """The tests' throwaway PostgreSQL server (tests/postgres_server.py), logging to ``log_dir``."""
    root = str(repo_root())
    if root not in sys.path:
        # `tests` is not installed: it is imported from the checkout, as pytest does.
        sys.path.insert(0, root)
    from tests.postgres_server import find_bin_dir
    from tests.postgres_server import start_postgres as start

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (deploy/bootstrap.sh --tests installs it)")
    server = start(log_dir, bin_dir)
    # Statements of 50 ms or more go to its log (postgres.log), to see where a run's SQL time goes.
    server.execute(f"ALTER SYSTEM SET log_min_duration_statement = {SLOW_STATEMENT_MS}")
    server.execute("SELECT pg_reload_conf()")
    return server


# ---------------------------------------------------------------- topics


def row_value(seq: int, timestamp: bool) -> dict[str, Any]:
    """Record ``seq`` (from 1) of the JDBC topics; amounts are positive (see handwritten_append)."""
    value: dict[str, Any] = {
        "id": seq,
        "name": f"customer {seq % 9973}",
        "quantity": seq % 50 + 1,
        "amount": Decimal((seq % 100_000) * 7 + 99).scaleb(-2),
        "active": seq % 3 != 0,
    }
    if timestamp:
        value["created_at"] = _BASE + dt.timedelta(milliseconds=seq * 1001)
    return value


def produce_rows(bootstrap: str, topic: str, records: int, timestamp: bool) -> float:
    """Records 1..``records`` as envelopes of WITH_TIMESTAMP or WITHOUT_TIMESTAMP, keyed by id."""
    schema = WITH_TIMESTAMP if timestamp else WITHOUT_TIMESTAMP

    def generated() -> Iterator[tuple[bytes, bytes]]:
        for seq in range(1, records + 1):
            value = envelope_to_bytes(schema, row_value(seq, timestamp))
            assert value is not None
            yield str(seq).encode(), value

    return produce_all(bench_producer(bootstrap), topic, generated())


def produce_typed_datagen(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """DataGen's typed records (``value.type=struct``) as the envelopes JsonConverter writes."""

    def generated() -> Iterator[tuple[bytes, bytes]]:
        for seq in range(records):
            value = envelope_to_bytes(ORDER_SCHEMA, typed_value(seq))
            assert value is not None
            yield f"{seq % partitions}-{seq}".encode(), value

    return produce_all(bench_producer(bootstrap), topic, generated())


def read_ranges(bootstrap: str, topic: str, partitions: int) -> str:
    """The `ranges` option of `sluiceway-kafka` for the whole topic (as bench_pipelines' job)."""
    ends = exact_end_offsets(bootstrap, [TopicPartition(topic, p) for p in range(partitions)], 60)
    return json.dumps([{"topic": t, "partition": p, "start": 0, "end": end} for (t, p), end in ends.items()])


def first_value(bootstrap: str, topic: str, partitions: int) -> bytes:
    """The value of one record of the topic (to show the records' size and form)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-jdbc-peek", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                return message.value() or b""
        raise TimeoutError(f"no record read from {topic}")
    finally:
        consumer.close()


# ---------------------------------------------------------------- tables


def create_source_table(pg: PostgresServer, table: str, records: int) -> None:
    """``records`` rows with ids 1..records and the JDBC topics' six columns."""
    pg.execute(
        f"CREATE TABLE {table} (id bigint PRIMARY KEY, name text NOT NULL, quantity integer NOT NULL, "
        "amount numeric(10,2) NOT NULL, created_at timestamp(3) NOT NULL, active boolean NOT NULL)"
    )
    pg.execute(
        f"INSERT INTO {table} SELECT g, 'customer ' || (g %% 9973), g %% 50 + 1, "
        "((g %% 100000) * 7 + 99) / 100.0, TIMESTAMP '2024-01-01' + g * INTERVAL '1001 milliseconds', "
        "g %% 3 <> 0 FROM generate_series(1, %s) AS g",
        [records],
    )
    pg.execute(f"ANALYZE {table}")


def row_count(pg: PostgresServer, table: str) -> int:
    return int(pg.execute(f"SELECT count(*) FROM {table}")[0][0])


def table_summary(pg: PostgresServer, table: str, timestamp: bool) -> tuple[Any, ...]:
    """Aggregates that two tables of the same records share, whoever wrote them."""
    # As epoch seconds: Spark's writer makes a timestamptz column, JdbcSink a timestamp (UTC).
    times = ", extract(epoch FROM min(created_at)), extract(epoch FROM max(created_at))" if timestamp else ""
    query = (
        "SELECT count(*), count(DISTINCT id), sum(quantity), sum(amount), "
        f"count(*) FILTER (WHERE active), min(name), max(name){times} FROM {table}"
    )
    return tuple(pg.execute(query)[0])


def drop_table(pg: PostgresServer, table: str) -> None:
    pg.execute(f"DROP TABLE IF EXISTS {table}")


# ---------------------------------------------------------------- hand-written Spark jobs


def handwritten_append(
    spark: SparkSession,
    bootstrap: str,
    topic: str,
    partitions: int,
    pg: PostgresServer,
    table: str,
    timestamp: bool,
) -> float:
    """What a Spark user writes by hand: read the topic with `sluiceway-kafka`, take the payload
    out of each envelope with from_json, convert the decimal (base64 of the unscaled value: these
    amounts are positive, so its hex digits are the number) and the timestamp (epoch ms), and
    append the rows to ``table`` with Spark's JDBC writer at its defaults. Returns seconds."""
    ranges = read_ranges(bootstrap, topic, partitions)
    payload = "id: BIGINT, name: STRING, quantity: INT, amount: STRING, active: BOOLEAN"
    columns = [
        "p.id AS id",
        "p.name AS name",
        "p.quantity AS quantity",
        "CAST(CAST(conv(hex(unbase64(p.amount)), 16, 10) AS DECIMAL(12, 0)) / 100 AS DECIMAL(10, 2)) "
        "AS amount",
    ]
    if timestamp:
        payload += ", created_at: BIGINT"
        columns.append("timestamp_millis(p.created_at) AS created_at")
    columns.append("p.active AS active")
    started = time.perf_counter()
    (
        spark.read.format("sluiceway-kafka")
        .option("bootstrap.servers", bootstrap)
        .option("ranges", ranges)
        .load()
        .selectExpr(f"from_json(CAST(value AS STRING), 'payload STRUCT<{payload}>').payload AS p")
        .selectExpr(*columns)
        .write.format("jdbc")
        .option("url", pg.jdbc_url)
        .option("user", pg.user)
        .option("dbtable", table)
        .mode("append")
        .save()
    )
    return time.perf_counter() - started


def handwritten_jdbc_to_kafka(
    spark: SparkSession, pg: PostgresServer, table: str, bootstrap: str, topic: str, envelope: bool = False
) -> float:
    """Read the table with Spark's JDBC reader and write each row as to_json(struct(*)) with the
    `sluiceway-kafka` writer (the source pipeline's writer, at its default producer settings).
    With ``envelope``, each value is wrapped as JsonConverter's envelope with the table's schema
    (the same schema text JdbcSource writes, made before the clock starts; the payload is still
    Spark's to_json, so timestamps are ISO text and decimals numbers): the same format and about
    the same bytes as the connector's records. Returns seconds."""
    rows = (
        spark.read.format("jdbc").option("url", pg.jdbc_url).option("user", pg.user).option("dbtable", table)
    )
    value = "to_json(struct(*))"
    if envelope:
        schema = from_spark(rows.load().schema).with_options(name=table)
        head = '{"schema":' + schema_text(schema) + ',"payload":'
        value = f"concat({_sql_string(head)}, to_json(struct(*)), '}}')"
    started = time.perf_counter()
    (
        rows.load()
        .selectExpr(f"{value} AS value")
        .write.format("sluiceway-kafka")
        .mode("append")
        .option("bootstrap.servers", bootstrap)
        .option("topic", topic)
        .save()
    )
    return time.perf_counter() - started


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------- the product's runs


@dataclass
class Timed:
    """One product run: seconds from the create call until its work was seen committed, when the
    call was made (epoch seconds), its batches from the executor's log and the errors its tasks
    reported."""

    seconds: float
    created: float
    steps: ConnectorSteps
    errors: list[str] = field(default_factory=list)

    @property
    def last_batch_ended(self) -> float | None:
        """Seconds from the create call to the end of the last batch in the executor's log."""
        ends = [b.ended for b in self.steps.batches]
        return max(ends) - self.created if ends else None


def _errors(stack: Stack, name: str) -> tuple[list[str], bool]:
    """The errors the connector and its tasks reported, and whether any of them is FAILED."""
    status = stack.client.connector_status(name)
    instances = [("connector", status.connector), *((f"task {t.id}", t.status) for t in status.tasks)]
    errors = [f"{who}: {event.message}" for who, instance in instances for event in instance.recent_errors]
    failed = any(instance.state == State.FAILED for _, instance in instances)
    if failed:
        errors += [f"{who} FAILED: {instance.trace}" for who, instance in instances if instance.trace]
    return errors, failed


def run_connector(
    stack: Stack, name: str, config: Mapping[str, str], done: Callable[[], bool], timeout: float = 900
) -> Timed:
    """Creates the connector, probes ``done`` every 20 ms (and its status every second, failing on
    a FAILED task) until it holds, then deletes the connector."""
    created, started = time.time(), time.perf_counter()
    stack.client.create_connector(name, dict(config))
    status_due = started + 1.0
    while not done():
        now = time.perf_counter()
        if now - started > timeout:
            raise TimeoutError(f"{name} did not finish in {timeout:.0f} s")
        if now >= status_due:
            status_due = now + 1.0
            errors, failed = _errors(stack, name)
            if failed:
                raise RuntimeError(f"{name} failed:\n" + "\n".join(errors))
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    errors, _ = _errors(stack, name)
    stack.client.delete_connector(name)
    return Timed(seconds, created, connector_steps(stack.executor_log, name), errors)


def sink_done(stack: Stack, name: str, topic: str, partitions: int, records: int) -> Callable[[], bool]:
    """The sink's consumer group has committed the topic's end (as bench_pipelines.sink_run)."""
    return lambda: committed_total(stack.admin, f"connect-{name}", topic, partitions) >= records


def source_done(stack: Stack, name: str, table: str, last_id: int) -> Callable[[], bool]:
    """The source's committed offset of ``table`` has reached ``last_id``."""

    def probe() -> bool:
        for partition, offset in offsets_from_proto(stack.client.get_offsets(name).offsets):
            if partition == {"table": table} and offset is not None:
                return int(offset.get("incrementing", 0)) >= last_id
        return False

    return probe


def jdbc_sink_config(
    pg: PostgresServer, topic: str, table: str, tasks: int, insert_mode: str
) -> dict[str, str]:
    config = {
        "connector.class": "JdbcSink",
        "topics": topic,
        "connection.url": pg.jdbc_url,
        "connection.user": pg.user,
        # A fresh table per run from the same topic (the default is the topic's name).
        "table.name.format": table,
        "auto.create": "true",
        "insert.mode": insert_mode,
        "tasks.max": str(tasks),
        **ENVELOPES,
    }
    if insert_mode == "upsert":
        config.update({"pk.mode": "record_value", "pk.fields": "id"})
    return config


def jdbc_source_config(pg: PostgresServer, table: str, prefix: str) -> dict[str, str]:
    return {
        "connector.class": "JdbcSource",
        "connection.url": pg.jdbc_url,
        "connection.user": pg.user,
        "table.whitelist": table,
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": prefix,
        **ENVELOPES,
    }


def file_sink_config(topic: str, path: str, tasks: int, typed: bool) -> dict[str, str]:
    converter = ENVELOPES if typed else {"value.converter": "StringConverter"}
    return {
        "connector.class": "SparkFileSink",
        "topics": topic,
        "path": path,
        "format": "parquet",
        "tasks.max": str(tasks),
        **converter,
    }
