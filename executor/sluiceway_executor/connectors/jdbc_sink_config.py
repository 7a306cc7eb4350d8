"""JdbcSink's keys (named, where the meaning is the same, as in Kafka's JDBC sink connector), their
documentation, the checks of keys against each other, and ``SinkSettings``: the parsed config the
task works from.

Spark is not imported here: the control plane loads this module to validate configs.
"""

from __future__ import annotations

import zoneinfo
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sluiceway.connect import (
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    Lambda,
    NonEmptyString,
    Range,
    ValidString,
    Width,
)
from sluiceway_executor.connectors.jdbc_common import connection_config_def

__all__ = [
    "AUTO_CREATE_CONFIG",
    "AUTO_EVOLVE_CONFIG",
    "BATCH_SIZE_CONFIG",
    "DB_TIMEZONE_CONFIG",
    "DELETE_ENABLED_CONFIG",
    "FIELDS_WHITELIST_CONFIG",
    "INSERT_MODES",
    "INSERT_MODE_CONFIG",
    "INSERT_MODE_INSERT",
    "INSERT_MODE_UPDATE",
    "INSERT_MODE_UPSERT",
    "KAFKA_PK_FIELDS",
    "PK_FIELDS_CONFIG",
    "PK_MODES",
    "PK_MODE_CONFIG",
    "PK_MODE_KAFKA",
    "PK_MODE_NONE",
    "PK_MODE_RECORD_KEY",
    "PK_MODE_RECORD_VALUE",
    "TABLE_NAME_FORMAT_CONFIG",
    "TOPIC_PLACEHOLDER",
    "SinkSettings",
    "check_sink_config",
    "config_problems",
    "sink_config_def",
]

TABLE_NAME_FORMAT_CONFIG: Final = "table.name.format"
INSERT_MODE_CONFIG: Final = "insert.mode"
PK_MODE_CONFIG: Final = "pk.mode"
PK_FIELDS_CONFIG: Final = "pk.fields"
FIELDS_WHITELIST_CONFIG: Final = "fields.whitelist"
AUTO_CREATE_CONFIG: Final = "auto.create"
AUTO_EVOLVE_CONFIG: Final = "auto.evolve"
DELETE_ENABLED_CONFIG: Final = "delete.enabled"
BATCH_SIZE_CONFIG: Final = "batch.size"
DB_TIMEZONE_CONFIG: Final = "db.timezone"

TOPIC_PLACEHOLDER: Final = "${topic}"

INSERT_MODE_INSERT: Final = "insert"
INSERT_MODE_UPSERT: Final = "upsert"
INSERT_MODE_UPDATE: Final = "update"
INSERT_MODES: Final = (INSERT_MODE_INSERT, INSERT_MODE_UPSERT, INSERT_MODE_UPDATE)

PK_MODE_NONE: Final = "none"
PK_MODE_KAFKA: Final = "kafka"
PK_MODE_RECORD_KEY: Final = "record_key"
PK_MODE_RECORD_VALUE: Final = "record_value"
PK_MODES: Final = (PK_MODE_NONE, PK_MODE_KAFKA, PK_MODE_RECORD_KEY, PK_MODE_RECORD_VALUE)

# The columns that pk.mode=kafka writes when pk.fields does not rename them: topic, partition, offset.
KAFKA_PK_FIELDS: Final = ("__connect_topic", "__connect_partition", "__connect_offset")

_WRITES_GROUP = "Writes"
_DATA_GROUP = "Data Mapping"
_DDL_GROUP = "DDL Support"


def _check_zone(name: str, value: Any) -> None:
    try:
        zoneinfo.ZoneInfo(value)
    except (TypeError, ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise ConfigException(
            name, value, "Not a known time zone (an IANA name such as UTC or Europe/Paris)"
        ) from None


def sink_config_def() -> ConfigDef:
    sink = (
        ConfigDef()
        .define(
            INSERT_MODE_CONFIG,
            ConfigType.STRING,
            INSERT_MODE_INSERT,
            ValidString.in_(*INSERT_MODES),
            Importance.HIGH,
            "How records become rows. 'insert': every record is appended as a new row. 'upsert': a "
            "record replaces the row with its primary key, or adds it when there is none (needs a "
            "pk.mode other than 'none'). 'update': a record changes the row with its primary key and "
            "is dropped when there is none (needs a pk.mode other than 'none'). In 'upsert' and "
            "'update' only the newest record of each key in a batch is applied.",
            _WRITES_GROUP,
            1,
            Width.MEDIUM,
            "Insert mode",
        )
        .define(
            BATCH_SIZE_CONFIG,
            ConfigType.INT,
            3000,
            Range.at_least(1),
            Importance.MEDIUM,
            "How many rows Spark's JDBC writer sends to the database in one round trip (its "
            "'batchsize' option). A Spark batch of records is written as a whole either way.",
            _WRITES_GROUP,
            2,
            Width.SHORT,
            "Rows per round trip",
        )
        .define(
            DELETE_ENABLED_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Whether a record without a value (a tombstone) deletes the row with the record's key. "
            "Needs pk.mode 'record_key'. When off, tombstones are skipped.",
            _WRITES_GROUP,
            3,
            Width.SHORT,
            "Enable deletes",
        )
        .define(
            TABLE_NAME_FORMAT_CONFIG,
            ConfigType.STRING,
            TOPIC_PLACEHOLDER,
            NonEmptyString(),
            Importance.MEDIUM,
            "The table each record goes to; '${topic}' stands for the record's topic, so one "
            "connector can fill a table per topic. 'schema.table' names a table of a schema; a name "
            "that is not a plain SQL identifier (a topic with '-' or '.') is quoted as one name.",
            _DATA_GROUP,
            1,
            Width.LONG,
            "Table name format",
        )
        .define(
            PK_MODE_CONFIG,
            ConfigType.STRING,
            PK_MODE_NONE,
            ValidString.in_(*PK_MODES),
            Importance.HIGH,
            "Where the primary key comes from. 'none': the table has none. 'kafka': the record's "
            "topic, partition and offset, in the three columns pk.fields names (by default "
            "__connect_topic, __connect_partition, __connect_offset). 'record_key': the record's key: "
            "the fields of a struct key (pk.fields picks some, empty means all), or a key that is "
            "not a struct, in the one column pk.fields names. 'record_value': fields of the record's "
            "value (pk.fields picks them, empty means all).",
            _DATA_GROUP,
            2,
            Width.MEDIUM,
            "Primary key mode",
            dependents=(PK_FIELDS_CONFIG,),
        )
        .define(
            PK_FIELDS_CONFIG,
            ConfigType.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Comma-separated primary key columns; what they mean depends on pk.mode (see there). "
            "With 'kafka', three names or none.",
            _DATA_GROUP,
            3,
            Width.LONG,
            "Primary key fields",
        )
        .define(
            FIELDS_WHITELIST_CONFIG,
            ConfigType.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Comma-separated fields of the record's value that are written; empty means all of them. "
            "Primary key columns are written in any case.",
            _DATA_GROUP,
            4,
            Width.LONG,
            "Fields whitelist",
        )
        .define(
            DB_TIMEZONE_CONFIG,
            ConfigType.STRING,
            "UTC",
            Lambda(_check_zone, "IANA time zone name"),
            Importance.MEDIUM,
            "The time zone whose wall-clock time a Timestamp field is written as into a column "
            "without time zone (and read back as by JdbcSource when it is UTC).",
            _DATA_GROUP,
            5,
            Width.MEDIUM,
            "Database time zone",
        )
        .define(
            AUTO_CREATE_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Whether a missing table is created, with a column per written field (typed from the "
            "record's schema) and the primary key of pk.mode. When off, a batch for a missing table "
            "fails.",
            _DDL_GROUP,
            1,
            Width.SHORT,
            "Auto-create",
        )
        .define(
            AUTO_EVOLVE_CONFIG,
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Whether fields the table has no column for are added as columns. Only optional fields "
            "and fields with a default can be added; columns are never changed or dropped. When off, "
            "a batch with such fields fails.",
            _DDL_GROUP,
            2,
            Width.SHORT,
            "Auto-evolve",
        )
    )
    return connection_config_def().merge(sink)


def config_problems(values: Mapping[str, Any], broken: Collection[str] = ()) -> list[tuple[str, str]]:
    """What is wrong with the keys taken together, as (key, message): upsert or update without a
    primary key, deletes without the record key as primary key, a kafka primary key with other than
    three names. Keys named in ``broken`` have an error of their own and are not looked at."""

    def value(key: str) -> Any:
        return None if key in broken else values.get(key)

    problems: list[tuple[str, str]] = []
    insert_mode, pk_mode = value(INSERT_MODE_CONFIG), value(PK_MODE_CONFIG)
    if insert_mode in (INSERT_MODE_UPSERT, INSERT_MODE_UPDATE) and pk_mode == PK_MODE_NONE:
        problems.append(
            (
                INSERT_MODE_CONFIG,
                f"{INSERT_MODE_CONFIG} '{insert_mode}' finds rows by their primary key: set "
                f"{PK_MODE_CONFIG} to '{PK_MODE_KAFKA}', '{PK_MODE_RECORD_KEY}' or '{PK_MODE_RECORD_VALUE}'",
            )
        )
    if value(DELETE_ENABLED_CONFIG) is True and pk_mode is not None and pk_mode != PK_MODE_RECORD_KEY:
        problems.append(
            (
                DELETE_ENABLED_CONFIG,
                f"A tombstone deletes the row of its key, so {DELETE_ENABLED_CONFIG} needs "
                f"{PK_MODE_CONFIG} '{PK_MODE_RECORD_KEY}'",
            )
        )
    pk_fields = value(PK_FIELDS_CONFIG)
    if pk_mode == PK_MODE_KAFKA and pk_fields and len(pk_fields) != len(KAFKA_PK_FIELDS):
        problems.append(
            (
                PK_FIELDS_CONFIG,
                f"With {PK_MODE_CONFIG} '{PK_MODE_KAFKA}', {PK_FIELDS_CONFIG} names the topic, partition "
                "and offset columns: three names, or none for the defaults",
            )
        )
    if pk_fields and len(set(pk_fields)) != len(pk_fields):
        problems.append((PK_FIELDS_CONFIG, f"{PK_FIELDS_CONFIG} names a column twice"))
    return problems


def check_sink_config(config: AbstractConfig) -> None:
    """Raises ConfigException for the first problem ``config_problems`` finds."""
    problems = config_problems(config.values())
    if problems:
        name, message = problems[0]
        raise ConfigException(name, config.get(name), message)


@dataclass(frozen=True)
class SinkSettings:
    """The sink's keys, parsed and checked against each other."""

    table_name_format: str = TOPIC_PLACEHOLDER
    insert_mode: str = INSERT_MODE_INSERT
    pk_mode: str = PK_MODE_NONE
    pk_fields: tuple[str, ...] = ()
    fields_whitelist: tuple[str, ...] = ()
    auto_create: bool = False
    auto_evolve: bool = False
    delete_enabled: bool = False
    batch_size: int = 3000
    db_timezone: str = "UTC"

    @classmethod
    def from_config(cls, config: AbstractConfig) -> SinkSettings:
        check_sink_config(config)
        return cls(
            table_name_format=config.get_string(TABLE_NAME_FORMAT_CONFIG) or TOPIC_PLACEHOLDER,
            insert_mode=config.get_string(INSERT_MODE_CONFIG) or INSERT_MODE_INSERT,
            pk_mode=config.get_string(PK_MODE_CONFIG) or PK_MODE_NONE,
            pk_fields=tuple(config.get_list(PK_FIELDS_CONFIG)),
            fields_whitelist=tuple(config.get_list(FIELDS_WHITELIST_CONFIG)),
            auto_create=config.get_boolean(AUTO_CREATE_CONFIG),
            auto_evolve=config.get_boolean(AUTO_EVOLVE_CONFIG),
            delete_enabled=config.get_boolean(DELETE_ENABLED_CONFIG),
            batch_size=config.get_int(BATCH_SIZE_CONFIG),
            db_timezone=config.get_string(DB_TIMEZONE_CONFIG) or "UTC",
        )
