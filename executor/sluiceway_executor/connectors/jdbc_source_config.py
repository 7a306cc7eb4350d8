"""JdbcSource's keys (named, where the meaning is the same, as in Kafka's JDBC source connector),
their documentation, and the checks of keys against each other."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

from sluiceway.connect import (
    AbstractConfig,
    ConfigDef,
    ConfigType,
    Importance,
    ListOf,
    Nullable,
    Range,
    ValidString,
    Width,
)
from sluiceway.connect.batch_config import DEFAULT_BATCH_MAX_RECORDS
from sluiceway_executor.connectors.jdbc_common import IDENTIFIER_VALIDATOR, connection_config_def
from sluiceway_executor.connectors.jdbc_source_queries import (
    MODE_INCREMENTING,
    MODES,
    uses_incrementing,
    uses_timestamp,
)

__all__ = [
    "BATCH_MAX_ROWS_CONFIG",
    "INCREMENTING_COLUMN_NAME_CONFIG",
    "MODE_CONFIG",
    "POLL_INTERVAL_MS_CONFIG",
    "QUERY_CONFIG",
    "TABLE_CONFIG",
    "TABLE_WHITELIST_CONFIG",
    "TIMESTAMP_COLUMN_NAME_CONFIG",
    "TIMESTAMP_DELAY_INTERVAL_MS_CONFIG",
    "TOPIC_PREFIX_CONFIG",
    "config_problems",
    "source_config_def",
    "source_tables",
]

TABLE_WHITELIST_CONFIG: Final = "table.whitelist"
# The key of the one table before table.whitelist existed; still accepted.
TABLE_CONFIG: Final = "table"
QUERY_CONFIG: Final = "query"
MODE_CONFIG: Final = "mode"
INCREMENTING_COLUMN_NAME_CONFIG: Final = "incrementing.column.name"
TIMESTAMP_COLUMN_NAME_CONFIG: Final = "timestamp.column.name"
TIMESTAMP_DELAY_INTERVAL_MS_CONFIG: Final = "timestamp.delay.interval.ms"
POLL_INTERVAL_MS_CONFIG: Final = "poll.interval.ms"
TOPIC_PREFIX_CONFIG: Final = "topic.prefix"
BATCH_MAX_ROWS_CONFIG: Final = "batch.max.rows"

_SOURCE_GROUP = "Source"
_MODE_GROUP = "Mode"


def source_config_def() -> ConfigDef:
    source = (
        ConfigDef()
        .define(
            TABLE_WHITELIST_CONFIG,
            ConfigType.LIST,
            "",
            ListOf(IDENTIFIER_VALIDATOR),
            Importance.HIGH,
            "Comma-separated tables to copy, each into its own topic (topic.prefix then the table's "
            "name) and with its own offset; tasks.max tasks share them. Set this or query.",
            _SOURCE_GROUP,
            1,
            Width.LONG,
            "Tables",
        )
        .define(
            TABLE_CONFIG,
            ConfigType.STRING,
            None,
            Nullable(IDENTIFIER_VALIDATOR),
            Importance.LOW,
            "Deprecated: the one table to copy, from before table.whitelist; it means the same as a "
            "table.whitelist of that table alone. Set one of the two.",
            _SOURCE_GROUP,
            2,
            Width.LONG,
            "Table (deprecated)",
        )
        .define(
            QUERY_CONFIG,
            ConfigType.STRING,
            None,
            None,
            Importance.MEDIUM,
            "An SQL SELECT whose result is copied instead of whole tables, into the topic named by "
            "topic.prefix. The connector reads it as a subquery and adds its own WHERE, ORDER BY and "
            "LIMIT around it, so the query may have its own WHERE but no ORDER BY. Set this or "
            "table.whitelist.",
            _SOURCE_GROUP,
            3,
            Width.LONG,
            "Query",
        )
        .define(
            TOPIC_PREFIX_CONFIG,
            ConfigType.STRING,
            "",
            None,
            Importance.HIGH,
            "Each table's rows go to the topic named by this prefix followed by the table's name; with "
            "query, this is the whole topic name and must not be empty.",
            _SOURCE_GROUP,
            4,
            Width.MEDIUM,
            "Topic prefix",
        )
        .define(
            POLL_INTERVAL_MS_CONFIG,
            ConfigType.INT,
            5000,
            Range.at_least(0),
            Importance.HIGH,
            "How long, in milliseconds, a table waits before it is read again after a read that "
            "found nothing new (or, in bulk mode, after each copy). A table that had new rows is read "
            "again at once.",
            _SOURCE_GROUP,
            5,
            Width.SHORT,
            "Poll interval (ms)",
        )
        .define(
            BATCH_MAX_ROWS_CONFIG,
            ConfigType.INT,
            DEFAULT_BATCH_MAX_RECORDS,
            Range.at_least(1),
            Importance.LOW,
            "Most rows one batch (one Spark job) copies from a table in the incrementing and timestamp "
            "modes. Below it the executor's batch policy sizes each batch, as for every source "
            "(batch.max.records, batch.max.bytes, and batch.duration.ms once batches are timed); all "
            "rows that share the batch's last timestamp come in it, even above either number. Bulk "
            "mode copies the whole table in one batch.",
            _SOURCE_GROUP,
            6,
            Width.SHORT,
            "Max rows per batch",
        )
        .define(
            MODE_CONFIG,
            ConfigType.STRING,
            MODE_INCREMENTING,
            ValidString.in_(*MODES),
            Importance.HIGH,
            "How new rows are found. 'bulk': the whole table at every poll, with no offset. "
            "'incrementing': rows whose incrementing column is above the largest value copied so far "
            "(rows are inserted with growing values and never updated). 'timestamp': rows whose "
            "timestamp is later than the latest one copied (updates that move the timestamp are "
            "copied again; rows sharing a timestamp are read together). 'timestamp+incrementing': "
            "rows whose (timestamp, incrementing value) pair comes after the last pair copied, in that "
            "order: updated rows are copied again, and no row is skipped when many share a timestamp.",
            _MODE_GROUP,
            1,
            Width.MEDIUM,
            "Table loading mode",
            dependents=(INCREMENTING_COLUMN_NAME_CONFIG, TIMESTAMP_COLUMN_NAME_CONFIG),
        )
        .define(
            INCREMENTING_COLUMN_NAME_CONFIG,
            ConfigType.STRING,
            None,
            Nullable(IDENTIFIER_VALIDATOR),
            Importance.MEDIUM,
            "Integer column that grows with every inserted row and is never null. Required in "
            "'incrementing' and 'timestamp+incrementing' modes.",
            _MODE_GROUP,
            2,
            Width.MEDIUM,
            "Incrementing column name",
        )
        .define(
            TIMESTAMP_COLUMN_NAME_CONFIG,
            ConfigType.LIST,
            "",
            ListOf(IDENTIFIER_VALIDATOR),
            Importance.MEDIUM,
            "Timestamp column set when a row is inserted and again whenever it changes; with several "
            "columns (comma-separated), a row's timestamp is the first of them that is not null. Rows "
            "whose timestamp is null are not copied. A column without time zone is read as UTC. "
            "Required in 'timestamp' and 'timestamp+incrementing' modes.",
            _MODE_GROUP,
            3,
            Width.MEDIUM,
            "Timestamp column names",
        )
        .define(
            TIMESTAMP_DELAY_INTERVAL_MS_CONFIG,
            ConfigType.LONG,
            0,
            Range.at_least(0),
            Importance.LOW,
            "In the timestamp modes, a row is copied only once its timestamp is at least this many "
            "milliseconds older than the database's clock, which leaves transactions that started "
            "earlier time to commit their rows before later timestamps are passed.",
            _MODE_GROUP,
            4,
            Width.SHORT,
            "Delay interval (ms)",
        )
    )
    return connection_config_def().merge(source)


def source_tables(config: AbstractConfig) -> list[str]:
    """The tables to copy: the whitelist's, else the old single table; none with a query."""
    tables = list(config.get_list(TABLE_WHITELIST_CONFIG))
    table = config.get_string(TABLE_CONFIG)
    return tables or ([table] if table else [])


def _missing_column(key: str, mode: str) -> str:
    return f"{key} is required when {MODE_CONFIG} is '{mode}'"


def config_problems(values: Mapping[str, Any], broken: Collection[str] = ()) -> list[tuple[str, str]]:
    """What is wrong with the keys taken together, as (key, message): a mode without its column,
    both or neither of query and table.whitelist, a query without a topic. Keys named in
    ``broken`` already have an error of their own and are not looked at."""

    def value(key: str) -> Any:
        return None if key in broken else values.get(key)

    problems: list[tuple[str, str]] = []
    mode = value(MODE_CONFIG)
    if isinstance(mode, str):
        if (
            uses_incrementing(mode)
            and INCREMENTING_COLUMN_NAME_CONFIG not in broken
            and not value(INCREMENTING_COLUMN_NAME_CONFIG)
        ):
            problems.append(
                (INCREMENTING_COLUMN_NAME_CONFIG, _missing_column(INCREMENTING_COLUMN_NAME_CONFIG, mode))
            )
        if (
            uses_timestamp(mode)
            and TIMESTAMP_COLUMN_NAME_CONFIG not in broken
            and not value(TIMESTAMP_COLUMN_NAME_CONFIG)
        ):
            problems.append(
                (TIMESTAMP_COLUMN_NAME_CONFIG, _missing_column(TIMESTAMP_COLUMN_NAME_CONFIG, mode))
            )
    if {TABLE_WHITELIST_CONFIG, TABLE_CONFIG, QUERY_CONFIG} & set(broken):
        return problems
    whitelist, table, query = value(TABLE_WHITELIST_CONFIG), value(TABLE_CONFIG), value(QUERY_CONFIG)
    if whitelist and table:
        problems.append(
            (
                TABLE_CONFIG,
                f"{TABLE_CONFIG} is the old name of {TABLE_WHITELIST_CONFIG}; set only "
                f"{TABLE_WHITELIST_CONFIG}",
            )
        )
    if query and (whitelist or table):
        problems.append(
            (
                QUERY_CONFIG,
                f"{QUERY_CONFIG} and {TABLE_WHITELIST_CONFIG} exclude each other: the connector copies "
                "either the result of one query or whole tables",
            )
        )
    elif not query and not whitelist and not table:
        problems.append(
            (TABLE_WHITELIST_CONFIG, f"Set {TABLE_WHITELIST_CONFIG} (the tables to copy) or {QUERY_CONFIG}")
        )
    if query and not value(TOPIC_PREFIX_CONFIG) and TOPIC_PREFIX_CONFIG not in broken:
        problems.append(
            (
                TOPIC_PREFIX_CONFIG,
                f"With {QUERY_CONFIG}, {TOPIC_PREFIX_CONFIG} is the topic's name and must not be empty",
            )
        )
    return problems
