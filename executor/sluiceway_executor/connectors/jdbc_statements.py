"""Running SQL on the database through Spark, so it runs where the database is reached from: an
executor is a Spark Connect client and may have no route to the database at all.

``run_script`` runs statements as one transaction. Spark's JDBC reader has no option for a
statement of one's own, but it runs ``sessionInitStatement`` on every connection it opens to
read, before the read itself; a read of ``SELECT 1`` with the script in that option runs the
script exactly once, on the one connection that reads the one row (the schema of ``SELECT 1`` is
resolved on another connection, which does not run it). The PostgreSQL driver sends several
statements given in one execute together, and ``BEGIN`` ... ``COMMIT`` around them makes them one
transaction: a statement that fails makes the driver raise, the connection closes and the
transaction is rolled back, so either all of the script happened or none of it.

``read_rows`` reads a query's rows (table metadata from pg_catalog, for instance) with the same
reader, after a script when given one: DDL and the read of what it made then cost one Spark job.

Spark is imported only by the functions, which callers run inside a task's batch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from sluiceway.connect import ConnectException

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["database_error", "read_rows", "run_script", "script_text"]

_DRIVER_ERROR: Final = re.compile(r"(?:PSQLException|SQLException|BatchUpdateException): ([^\n]+)")


def script_text(statements: Sequence[str]) -> str:
    """The statements as one transaction."""
    if not statements:
        raise ValueError("a script needs statements")
    for statement in statements:
        if not statement.strip():
            raise ValueError("an empty statement")
    return "BEGIN;\n" + ";\n".join(statements) + ";\nCOMMIT"


def database_error(action: str, error: Exception) -> ConnectException:
    """A ConnectException saying what failed, with the database's own message when the driver
    gave one (instead of Spark's stack of wrappers)."""
    text = str(error)
    found = _DRIVER_ERROR.search(text)
    detail = found.group(1).strip() if found else (text.strip().splitlines() or [type(error).__name__])[0]
    return ConnectException(f"{action} failed: {detail}")


def run_script(
    spark: SparkSession, options: Mapping[str, str], statements: Sequence[str], action: str
) -> None:
    """Runs ``statements`` in the database of ``options`` (Spark JDBC options: url, user, ...) as
    one transaction, inside Spark. ``action`` names what the script does in the error raised
    (a ConnectException) when it fails; nothing of it is then left in the database."""
    reader = (
        spark.read.format("jdbc")
        .options(**options)
        .option("sessionInitStatement", script_text(statements))
        .option("query", "SELECT 1 AS done")
    )
    try:
        reader.load().collect()
    except Exception as e:
        raise database_error(action, e) from e


def read_rows(
    spark: SparkSession,
    options: Mapping[str, str],
    query: str,
    action: str,
    before: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The rows of ``query``, each as a dict by column name, read inside Spark; on the same
    connection, the statements ``before`` run first as one transaction (as ``run_script`` runs
    them), and the query sees what they did. Nothing is read when they fail."""
    reader = spark.read.format("jdbc").options(**options).option("query", query)
    if before:
        reader = reader.option("sessionInitStatement", script_text(before))
    try:
        rows = reader.load().collect()
    except Exception as e:
        raise database_error(action, e) from e
    return [row.asDict() for row in rows]
