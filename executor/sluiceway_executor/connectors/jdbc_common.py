"""What JdbcSource and JdbcSink share: the connection keys (named as in Kafka's JDBC connectors),
the options Spark's JDBC reader and writer get from them, and the check that keeps configs from
putting anything but SQL identifiers into SQL text.

Spark is not imported here: the control plane loads these plugins to validate configs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeGuard

from sluiceway.connect import (
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConfigType,
    ConfigValue,
    Importance,
    Lambda,
    Width,
)

__all__ = [
    "CONNECTION_PASSWORD_CONFIG",
    "CONNECTION_URL_CONFIG",
    "CONNECTION_USER_CONFIG",
    "IDENTIFIER",
    "IDENTIFIER_VALIDATOR",
    "POSTGRESQL_DRIVER",
    "POSTGRESQL_SESSION_INIT",
    "add_problems",
    "check_identifier",
    "connection_config_def",
    "is_int",
    "jdbc_options",
]

CONNECTION_URL_CONFIG: Final = "connection.url"
CONNECTION_USER_CONFIG: Final = "connection.user"
CONNECTION_PASSWORD_CONFIG: Final = "connection.password"

POSTGRESQL_DRIVER: Final = "org.postgresql.Driver"
# What the source runs first in every PostgreSQL session Spark's reader opens: timestamps in UTC, so
# a `timestamp` column (without time zone) means the same instant whatever the server's zone is.
POSTGRESQL_SESSION_INIT: Final = "SET TIME ZONE 'UTC'"

_CONNECTION_GROUP = "Database"

# An SQL identifier, optionally schema-qualified; a part in double quotes keeps its case and may
# hold any character. Only such names are put into SQL text, so configs cannot inject SQL.
_IDENTIFIER_PART = r'(?:[A-Za-z_][A-Za-z0-9_$]*|"(?:[^"]|"")+")'
IDENTIFIER: Final = re.compile(rf"{_IDENTIFIER_PART}(?:\.{_IDENTIFIER_PART})*")


def _check_jdbc_url(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.startswith("jdbc:"):
        raise ConfigException(name, value, "A JDBC URL must start with 'jdbc:'")


def check_identifier(name: str, value: Any) -> None:
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise ConfigException(
            name, value, "Not an SQL identifier (letters, digits, _ and $, or a double-quoted name)"
        )


IDENTIFIER_VALIDATOR: Final = Lambda(
    check_identifier, "SQL identifier, optionally schema-qualified; double-quote a part to keep its case"
)


def connection_config_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            CONNECTION_URL_CONFIG,
            ConfigType.STRING,
            validator=Lambda(_check_jdbc_url, "JDBC URL (jdbc:...)"),
            importance=Importance.HIGH,
            documentation=(
                "Database that Spark's JDBC reader and writer connect to, e.g. "
                "jdbc:postgresql://localhost:5432/db. The database's driver JAR must be on Spark's "
                "classpath; for jdbc:postgresql: URLs the connector names the driver class itself."
            ),
            group=_CONNECTION_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="JDBC URL",
        )
        .define(
            CONNECTION_USER_CONFIG,
            ConfigType.STRING,
            None,
            None,
            Importance.HIGH,
            "Database user Spark logs in as; leave it unset when the URL includes the user.",
            _CONNECTION_GROUP,
            2,
            Width.MEDIUM,
            "JDBC User",
        )
        .define(
            CONNECTION_PASSWORD_CONFIG,
            ConfigType.PASSWORD,
            None,
            None,
            Importance.HIGH,
            "Password of connection.user; API answers show it masked.",
            _CONNECTION_GROUP,
            3,
            Width.MEDIUM,
            "JDBC Password",
        )
    )


def jdbc_options(config: AbstractConfig) -> dict[str, str]:
    """Spark JDBC options for the configured database: url, user, password, and for PostgreSQL
    the driver class."""
    url = config.get_string(CONNECTION_URL_CONFIG) or ""
    options = {"url": url}
    user = config.get_string(CONNECTION_USER_CONFIG)
    if user:
        options["user"] = user
    password = config.get_password(CONNECTION_PASSWORD_CONFIG)
    if password is not None:
        options["password"] = password.value
    # Other databases' drivers are found by Spark from the URL when their JAR is on its classpath.
    if url.startswith("jdbc:postgresql:"):
        options["driver"] = POSTGRESQL_DRIVER
    return options


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


Problems = Callable[[Mapping[str, Any], set[str]], Iterable[tuple[str, str]]]


def add_problems(values: list[ConfigValue], problems: Problems) -> list[ConfigValue]:
    """``values`` (a connector's validation) with the errors ``problems`` finds between keys added
    to the keys they name; ``problems`` gets the parsed values and the keys already in error."""
    by_name = {value.name: value for value in values}
    parsed = {value.name: value.value for value in values}
    broken = {value.name for value in values if value.errors}
    for name, message in problems(parsed, broken):
        by_name[name].add_error(message)
    return values
