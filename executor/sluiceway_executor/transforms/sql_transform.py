"""Sql: a transform Kafka Connect does not have. ``select`` sets record parts with Spark SQL
expressions over the record's ``key``, ``value``, ``topic``, ``partition``, ``offset``,
``timestamp`` and ``headers`` (``upper(value.name) AS value``, ``concat(topic, '-eu') AS topic``);
``where`` keeps the records its condition holds for. The batch runs as one Spark SQL statement.

Both are checked when the connector is created, without Spark (sqlglot reads them as Spark SQL):
a syntax error or a column that is not one of the record's is refused naming the key, the line
and the column; what only the batch's types can tell (a field that is not in the value) fails the
batch, with Spark's own message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import ConfigDef, ConfigException, ConfigType, ConnectException, Importance
from sluiceway.connect.transforms import DataFrameTransformation, TransformContext
from sluiceway_executor.record_errors import ERROR_COLUMN, has_error_column
from sluiceway_executor.transforms.filtering import KEEP_COLUMN, kept_where

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from sqlglot import exp

__all__ = ["Sql"]

# What the statement may read, and which of them ``select`` may set.
_READABLE: Final = frozenset({"key", "value", "topic", "partition", "offset", "timestamp", "headers"})
_SETTABLE: Final = frozenset({"key", "value", "topic", "partition", "timestamp", "headers"})
_SELECT_PREFIX: Final = "SELECT "


def _where(meta: Mapping[str, int], shift: int) -> str:
    """Where sqlglot found a token, as the line and the column the user wrote it at (the first
    character's when known, else the last's)."""
    line = meta.get("line", 1)
    if line == 1 and "start" in meta:
        return f"line 1, column {meta['start'] - shift + 1}"
    column = meta.get("col", 0)
    return f"line {line}, column {column - shift if line == 1 else column}"


def _parse(text: str, key: str, as_select: bool) -> exp.Expr:
    import sqlglot
    from sqlglot.errors import ParseError

    source = _SELECT_PREFIX + text if as_select else text
    shift = len(_SELECT_PREFIX) if as_select else 0
    try:
        parsed = sqlglot.parse_one(source, read="spark")
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        place = _where(first, shift) if first else "somewhere"
        description = first.get("description", str(e)) if first else str(e)
        raise ConfigException(key, text, f"not Spark SQL: {description} at {place}") from None
    if parsed is None:
        raise ConfigException(key, text, "not Spark SQL: nothing to read")
    _check_columns(parsed, key, text, shift)
    return parsed


def _check_columns(parsed: exp.Expr, key: str, text: str, shift: int) -> None:
    from sqlglot import exp

    bound = {
        identifier.name
        for lam in parsed.find_all(exp.Lambda)
        for identifier in lam.expressions
        if isinstance(identifier, exp.Identifier)
    }
    for column in parsed.find_all(exp.Column):
        head = column.parts[0]
        if head.name in bound:
            continue
        if head.name.lower() not in _READABLE:
            raise ConfigException(
                key,
                text,
                f"'{head.name}' at {_where(head.meta, shift)} is not a part of the record: use "
                + ", ".join(sorted(_READABLE)),
            )


class Sql(DataFrameTransformation):
    """Sets record parts with Spark SQL expressions and keeps the records a condition holds for."""

    ALIASES: ClassVar[tuple[str, ...]] = ("SqlTransform",)

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "select",
                ConfigType.STRING,
                "",
                None,
                Importance.HIGH,
                "Comma-separated 'expression AS part' items, each part one of key, value, topic, "
                "partition, timestamp, headers; parts not named stay as they are.",
            )
            .define(
                "where",
                ConfigType.STRING,
                "",
                None,
                Importance.HIGH,
                "A condition: records it does not hold for (false or null) are dropped.",
            )
        )

    def configure(self, props: Mapping[str, str]) -> None:
        from sqlglot import exp

        super().configure(props)
        self._select = (self.settings.get_string("select") or "").strip()
        self._where = (self.settings.get_string("where") or "").strip()
        if not self._select and not self._where:
            raise ConfigException("select", "", "set select, where or both")
        self._parts: list[str] = []
        if self._select:
            parsed = _parse(self._select, "select", as_select=True)
            for item in parsed.expressions:
                name = item.alias if isinstance(item, exp.Alias) else ""
                if name.lower() not in _SETTABLE:
                    shown = item.sql(dialect="spark")
                    raise ConfigException(
                        "select",
                        self._select,
                        f"'{shown}' sets no record part: end it with AS and one of "
                        + ", ".join(sorted(_SETTABLE)),
                    )
                if name.lower() in self._parts:
                    raise ConfigException("select", self._select, f"{name} is set twice")
                self._parts.append(name.lower())
        if self._where:
            _parse(self._where, "where", as_select=False)

    def apply_frame(self, frame: DataFrame, context: TransformContext) -> DataFrame:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        where = self._where
        if where and has_error_column(frame):
            # Records an earlier stage failed stay, whatever the condition says of their nulled key
            # and value: they are skipped or dead-lettered after the chain.
            where = f"({where}) OR `{ERROR_COLUMN}` IS NOT NULL"
        try:
            if where:
                # The condition is of the records as they come in (SQL's WHERE), computed beside
                # them and applied after the select without a filter Spark could push down
                # (filtering.py).
                frame = frame.withColumn(KEEP_COLUMN, F.expr(where))
            names = [name for name in frame.columns if name.lower() not in self._parts]
            kept = [f"`{name.replace('`', '``')}`" for name in names]
            items = ", ".join([*kept, self._select] if self._select else kept)
            out = frame.sparkSession.sql(f"SELECT {items} FROM {{batch}}", batch=frame)
            out.columns  # noqa: B018 - analysed here, so a wrong field fails by this transform's name
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConnectException(f"transform '{context.alias}' (Sql): {first}") from e
        return kept_where(out, F.col(KEEP_COLUMN)).drop(KEEP_COLUMN) if where else out
