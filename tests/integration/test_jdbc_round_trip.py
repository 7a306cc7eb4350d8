"""PostgreSQL → Kafka → PostgreSQL on the session's real server: JdbcSource (timestamp+incrementing)
copies a table into a topic as typed envelopes, JdbcSink (upsert on the primary key, auto.create)
writes the topic into a new table, while rows are inserted and updated; the two tables end equal,
column types included."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sluiceway_server.embedded import EmbeddedSparkConnect, jdbc_jars
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, attach_executor
from tests.jdbc_pipeline_helpers import (
    column_types,
    create_source_table,
    insert_rows,
    rows,
    sink_config,
    source_config,
    update_rows,
)
from tests.postgres_server import PostgresServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not jdbc_jars(), reason="no JDBC driver jar for Spark Connect (bootstrap.sh --tests)"),
]


def test_a_table_copied_through_kafka_into_another_ends_equal_while_rows_change(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    postgres: PostgresServer,
    unique: str,
) -> None:
    source, target, prefix = f"rt_src_{unique}", f"rt_dst_{unique}", f"rt-{unique}-"
    create_source_table(postgres, source, 60)
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "round-trip")
    try:
        stack.client.create_connector(f"rt-source-{unique}", source_config(postgres, source, prefix, 25))
        stack.client.create_connector(f"rt-sink-{unique}", sink_config(postgres, prefix + source, target))

        def copied() -> bool:
            exists = postgres.execute("SELECT to_regclass(%s) IS NOT NULL", [target])[0][0]
            return bool(exists) and rows(postgres, target) == rows(postgres, source)

        stack.wait_for(copied, "the first 60 rows to be copied")
        # Changes while it runs: new rows, and updated ones (their timestamp moves on).
        insert_rows(postgres, source, 15)
        update_rows(postgres, source, [2, 3, 5, 8, 13, 21, 34, 55])
        stack.wait_for(copied, "the inserted and updated rows to be copied")
        insert_rows(postgres, source, 5)
        update_rows(postgres, source, [1, 2, 62])
        stack.wait_for(copied, "the second round of changes to be copied")
    finally:
        stack.close()

    assert len(rows(postgres, target)) == 80
    assert len(column_types(postgres, source)) == 7
    assert column_types(postgres, target) == column_types(postgres, source)
    duplicates = postgres.execute(f"SELECT id FROM {target} GROUP BY id HAVING count(*) > 1")
    assert duplicates == []
