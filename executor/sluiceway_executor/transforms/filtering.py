"""Dropping records of a converted or transformed batch without slowing Spark down.

Spark's optimizer pushes a filter down through the projections beneath it, writing each projected
column's expression into the condition. Over a typed batch that means the value's whole build, its
JSON parse included, once for the test and once more for the row: a sink's `value IS NOT NULL`
made a JDBC write a third slower, and over a chain of transforms, with a parse per reference in
the condition, a Sql ``where`` made a sink about twenty times slower. Two ways keep a test where it
is written, on the projected columns, which Spark computes once:

- ``kept_rows`` / ``kept_where`` turn each record into an array of zero or one row and unfold it
  (``inline``): a generator is not something Spark pushes a condition through, and it costs about
  what a plain projection does (bench/README.md, issue 32).
- ``pinned_condition`` guards a condition with a nondeterministic expression, which the optimizer
  neither pushes down nor folds away; it serves a condition computed beside columns that a later
  projection (the Sql transform's select) still has to read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame

__all__ = ["KEEP_COLUMN", "kept_rows", "kept_where", "pinned_condition"]

KEEP_COLUMN: Final = "__sluiceway_keep"


def pinned_condition(condition: Column) -> Column:
    """``condition``, evaluated where it is written: ``spark_partition_id()`` is nondeterministic,
    so the optimizer neither pushes it down nor folds it away (``rand() >= 0`` it would fold)."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return F.when(F.spark_partition_id() >= 0, condition)


def kept_rows(frame: DataFrame, condition: Column, columns: Sequence[Column]) -> DataFrame:
    """``columns`` (each named, by alias or as a column) of the records of ``frame`` where
    ``condition`` holds, tested after ``frame``'s projections. A record whose condition is null is
    left out, as SQL's WHERE leaves it."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    # A struct keeps each field's metadata (the Connect schemas), and inline gives it back.
    return frame.select(F.inline(F.when(condition, F.array(F.struct(*columns)))))


def kept_where(frame: DataFrame, condition: Column) -> DataFrame:
    """The records of ``frame`` where ``condition`` holds, with all of ``frame``'s columns."""
    from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

    return kept_rows(frame, condition, [F.col(f"`{name.replace('`', '``')}`") for name in frame.columns])
