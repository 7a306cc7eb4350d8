"""An executor running JdbcSink (upsert on the primary key) killed with SIGKILL in the middle of a
PostgreSQL → Kafka → PostgreSQL copy. Counted with our own reads of both tables: no row is lost
(every source id is in the target), none is written twice (no id twice), and the tables end
equal; the topic may hold records the killed source wrote again, which upsert absorbs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from sluiceway.client import SluicewayClient
from sluiceway_server.embedded import EmbeddedBroker, jdbc_jars
from tests.fault.fault_helpers import ExecutorStarter, executor_tasks, topic_records, wait_for
from tests.jdbc_pipeline_helpers import (
    COLUMNS,
    create_source_table,
    insert_rows,
    rows,
    sink_config,
    source_config,
    update_rows,
)
from tests.postgres_server import PostgresServer

pytestmark = [
    pytest.mark.fault,
    pytest.mark.skipif(not jdbc_jars(), reason="no JDBC driver jar for Spark Connect (bootstrap.sh --tests)"),
]

ROWS = 6_000


@pytest.fixture
def plane(control_plane_factory: Callable[..., Any]) -> Any:
    return control_plane_factory(
        **{"executor.heartbeat.interval.ms": "500", "executor.session.timeout.ms": "3000"}
    )


def _equal(postgres: PostgresServer, source: str, target: str) -> bool:
    """Whether the tables hold the same rows; False while a statement waits over 5 s (a lock)."""
    try:
        with psycopg.connect(postgres.conninfo, autocommit=True, options="-c statement_timeout=5000") as conn:
            query = f"SELECT {COLUMNS} FROM {{}} ORDER BY id"
            return (
                conn.execute(query.format(source).encode()).fetchall()
                == conn.execute(query.format(target).encode()).fetchall()
            )
    except psycopg.errors.QueryCanceled:
        return False


def _count(postgres: PostgresServer, table: str) -> int:
    if not postgres.execute("SELECT to_regclass(%s) IS NOT NULL", [table])[0][0]:
        return 0
    return int(postgres.execute(f"SELECT count(*) FROM {table}")[0][0])


def test_jdbc_sink_executor_killed_mid_copy_loses_nothing_and_writes_nothing_twice(
    plane: Any,
    start_executor: ExecutorStarter,
    broker: EmbeddedBroker,
    postgres: PostgresServer,
    unique: str,
) -> None:
    source, target, prefix = f"kill_src_{unique}", f"kill_dst_{unique}", f"kill-{unique}-"
    create_source_table(postgres, source, ROWS)
    executors = {name: start_executor(name, [plane.address]) for name in (f"a-{unique}", f"b-{unique}")}
    wait_for(lambda: len(executor_tasks(plane.address)) == 2, 60, "two executors attached")
    sink_name = f"kill-sink-{unique}"
    with SluicewayClient(plane.address, timeout=30) as client:
        client.create_connector(f"kill-source-{unique}", source_config(postgres, source, prefix, 500))
        client.create_connector(
            sink_name, {**sink_config(postgres, prefix + source, target), "batch.max.records": "1000"}
        )

    def sink_executor() -> str | None:
        owners = [
            e for e, tasks in executor_tasks(plane.address).items() if any(sink_name in t for t in tasks)
        ]
        return owners[0] if owners else None

    wait_for(lambda: sink_executor() is not None, 60, "the sink task assigned")
    victim = sink_executor()
    assert victim is not None
    survivor = next(name for name in executors if name != victim)
    # Kill it while rows are arriving, part of the way through.
    wait_for(lambda: _count(postgres, target) >= 1_500, 240, "rows in the target", executors[victim].tail)
    in_target_at_kill = _count(postgres, target)
    executors[victim].kill()
    print(f"killed {victim} with {in_target_at_kill} of {ROWS} rows in the target")
    wait_for(lambda: list(executor_tasks(plane.address)) == [survivor], 30, "the dead executor expired")
    # Changes after the kill are copied too.
    insert_rows(postgres, source, 500)
    update_rows(postgres, source, list(range(1, ROWS + 1, 37)))

    def difference() -> str:
        left, right = set(rows(postgres, source)), set(rows(postgres, target))
        return (
            f"only in source: {sorted(left - right)[:3]} ({len(left - right)}), "
            f"only in target: {sorted(right - left)[:3]} ({len(right - left)})"
        )

    try:
        wait_for(lambda: rows(postgres, target) == rows(postgres, source), 150, "the tables to be equal")
    except AssertionError:
        raise AssertionError(difference()) from None

    generated = ROWS + 500
    delivered = _count(postgres, target)
    distinct = int(postgres.execute(f"SELECT count(DISTINCT id) FROM {target}")[0][0])
    produced = topic_records(broker.bootstrap_servers, prefix + source)
    print(
        f"generated {generated}, target rows {delivered}, distinct ids {distinct}, topic records {produced}"
    )
    assert generated - distinct == 0, "rows lost"
    assert delivered - distinct == 0, "rows written twice"
    assert produced >= generated
