"""Dropping records of a converted or transformed batch without slowing Spark down.

Spark's optimizer pushes a filter down through the projections beneath it, writing each projected
column's expression into the condition. Over a typed batch that means the value's whole build, its
JSON parse included, once for the test and once more for the row: a sink's `value IS NOT NULL`
made a JDBC write a third slower, and over a chain of transforms, with a parse per reference in
the condition, a Sql ``where`` made a sink about twenty times slower. Here each record becomes an
array of zero or one row that is then unfolded (``inline``): a generator is not something Spark
pushes a condition through, so the test reads the projected columns, which Spark computes once, and
it costs about what a plain projection does (bench/README.md, issue 32). It did better than
guarding the condition with a nondeterministic expression, the way used before (bench/README.md,
issue 33).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column, DataFrame

__all__ = ["KEEP_COLUMN", "kept_rows", "kept_where"]

KEEP_COLUMN: Final = "__sluiceway_keep"


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
