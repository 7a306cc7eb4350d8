"""The README's "Databases" section as written, against the session's real PostgreSQL (its URL and
user in place of the README's): its SQL makes the table, its two commands copy it through Kafka
into a table of its own, and a row updated afterwards arrives too; the copy ends equal, column
types included."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sluiceway_server.embedded import EmbeddedSparkConnect, jdbc_jars
from tests.conftest import ControlPlaneProcess
from tests.integration.pipeline_helpers import FAST_EXECUTOR_SESSION, attach_executor
from tests.jdbc_pipeline_helpers import column_types
from tests.postgres_server import PostgresServer
from tests.readme_blocks import blocks_under, commands

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not jdbc_jars(), reason="no JDBC driver jar for Spark Connect (bootstrap.sh --tests)"),
]

README_URL = "jdbc:postgresql://127.0.0.1:5432/shop"


def _table(postgres: PostgresServer, name: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in postgres.execute(f"SELECT * FROM {name} ORDER BY id")]


def test_the_databases_section_copies_a_table_as_written(
    control_plane_factory: Callable[..., ControlPlaneProcess],
    spark_connect: EmbeddedSparkConnect,
    postgres: PostgresServer,
) -> None:
    (sql,) = blocks_under("Databases", "sql")
    for statement in sql.text.split(";"):
        if statement.strip():
            postgres.execute(statement)
    (shell,) = blocks_under("Databases", "sh")
    # The console script next to this interpreter (the project's .venv).
    cli = str(Path(sys.executable).with_name("sluiceway"))
    stack = attach_executor(control_plane_factory(**FAST_EXECUTOR_SESSION), spark_connect, "readme-db")
    try:
        env = {**os.environ, "SLUICEWAY_SERVER": stack.plane.address}
        for line in commands(shell):
            words = shlex.split(line.replace(README_URL, postgres.jdbc_url))
            words = [
                f"connection.user={postgres.user}" if w.startswith("connection.user=") else w for w in words
            ]
            assert words[0] == "sluiceway", line
            result = subprocess.run(
                [cli, *words[1:]], capture_output=True, text=True, timeout=60, env=env, check=False
            )
            assert result.returncode == 0, (line, result.stderr)

        def copied() -> bool:
            exists = postgres.execute("SELECT to_regclass('customers_copy') IS NOT NULL")[0][0]
            return bool(exists) and _table(postgres, "customers_copy") == _table(postgres, "customers")

        stack.wait_for(copied, "customers to be copied")
        postgres.execute("UPDATE customers SET balance = 0, updated_at = clock_timestamp() WHERE id = 7")
        postgres.execute("INSERT INTO customers (name, balance) VALUES ('a late one', 1.5)")
        stack.wait_for(copied, "the update and the new row to be copied")
    finally:
        stack.close()
    assert len(_table(postgres, "customers_copy")) == 1001
    assert column_types(postgres, "customers_copy") == column_types(postgres, "customers")
