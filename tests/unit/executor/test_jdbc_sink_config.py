"""JdbcSink's keys without a database: defaults, the checks of keys against each other (through
validation, on the key at fault, and at start), and which columns a batch writes for each
pk.mode."""

from __future__ import annotations

import pytest

from sluiceway.connect import (
    AbstractConfig,
    ConfigException,
    ConnectException,
    PluginRegistry,
    validate_connector_config,
)
from sluiceway.connect.data.schema import (
    BYTES_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    array_schema,
    struct_schema,
    timestamp_schema,
)
from sluiceway_executor.connectors.jdbc_sink import JdbcSinkConnector, JdbcSinkTask
from sluiceway_executor.connectors.jdbc_sink_columns import TableColumns, columns_to_add, plan_columns
from sluiceway_executor.connectors.jdbc_sink_config import SinkSettings, sink_config_def

URL = "jdbc:postgresql://localhost:5432/app"
VALUE = struct_schema(
    {"id": INT64_SCHEMA, "name": OPTIONAL_STRING_SCHEMA, "qty": OPTIONAL_INT32_SCHEMA, "raw": BYTES_SCHEMA}
)
KEY = struct_schema({"region": STRING_SCHEMA, "id": INT64_SCHEMA})


def sink(**extra: str) -> dict[str, str]:
    return {"name": "out", "connector.class": "JdbcSink", "connection.url": URL, "topics": "a", **extra}


def errors(config: dict[str, str]) -> dict[str, list[str]]:
    return dict(validate_connector_config(PluginRegistry.of(JdbcSinkConnector), config).errors())


def settings(**props: str) -> SinkSettings:
    return SinkSettings.from_config(AbstractConfig(sink_config_def(), {"connection.url": URL, **props}))


def test_defaults_are_kafkas() -> None:
    assert errors(sink()) == {}
    assert settings() == SinkSettings(
        table_name_format="${topic}",
        insert_mode="insert",
        pk_mode="none",
        pk_fields=(),
        fields_whitelist=(),
        auto_create=False,
        auto_evolve=False,
        delete_enabled=False,
        batch_size=3000,
        db_timezone="UTC",
    )


@pytest.mark.parametrize("mode", ["upsert", "update"])
def test_upsert_and_update_need_a_primary_key(mode: str) -> None:
    problems = errors(sink(**{"insert.mode": mode}))
    assert list(problems) == ["insert.mode"]
    assert "pk.mode" in problems["insert.mode"][0]
    for pk_mode in ("kafka", "record_key", "record_value"):
        assert errors(sink(**{"insert.mode": mode, "pk.mode": pk_mode})) == {}


def test_deletes_need_the_record_key_as_primary_key() -> None:
    for pk_mode in ("none", "kafka", "record_value"):
        problems = errors(sink(**{"delete.enabled": "true", "pk.mode": pk_mode}))
        assert list(problems) == ["delete.enabled"], pk_mode
        assert "record_key" in problems["delete.enabled"][0]
    assert errors(sink(**{"delete.enabled": "true", "pk.mode": "record_key", "insert.mode": "upsert"})) == {}


def test_bad_values_are_refused_on_their_own_key() -> None:
    problems = errors(
        sink(
            **{
                "insert.mode": "merge",
                "pk.mode": "everything",
                "db.timezone": "Mars/Olympus",
                "batch.size": "0",
                "auto.create": "maybe",
            }
        )
    )
    assert set(problems) == {"insert.mode", "pk.mode", "db.timezone", "batch.size", "auto.create"}
    # A key that is broken on its own is not also blamed for its combinations.
    assert errors(sink(**{"insert.mode": "upsert", "pk.mode": "everything"})).keys() == {"pk.mode"}


def test_kafka_primary_key_names_three_columns_or_none() -> None:
    assert list(errors(sink(**{"pk.mode": "kafka", "pk.fields": "t,p"}))) == ["pk.fields"]
    assert errors(sink(**{"pk.mode": "kafka", "pk.fields": "t,p,o"})) == {}
    assert list(errors(sink(**{"pk.mode": "record_value", "pk.fields": "id,id"}))) == ["pk.fields"]


def test_connector_and_task_refuse_what_validation_refuses() -> None:
    props = {"connection.url": URL, "insert.mode": "upsert"}
    with pytest.raises(ConfigException, match=r"insert\.mode"):
        JdbcSinkConnector().start(props)
    with pytest.raises(ConfigException, match=r"insert\.mode"):
        JdbcSinkTask().start(props)
    connector = JdbcSinkConnector()
    connector.start({**props, "pk.mode": "record_value", "pk.fields": "id"})
    assert len(connector.task_configs(2)) == 2


def test_no_primary_key_writes_every_value_field() -> None:
    columns = plan_columns(settings(), None, VALUE)
    assert [(c.name, c.source, c.key) for c in columns] == [
        ("id", ("value", "id"), False),
        ("name", ("value", "name"), False),
        ("qty", ("value", "qty"), False),
        ("raw", ("value", "raw"), False),
    ]


def test_kafka_primary_key_columns_and_their_renaming() -> None:
    columns = plan_columns(settings(**{"pk.mode": "kafka", "fields.whitelist": "name"}), None, VALUE)
    assert [(c.name, c.schema, c.source, c.key) for c in columns] == [
        ("__connect_topic", STRING_SCHEMA, ("topic",), True),
        ("__connect_partition", INT32_SCHEMA, ("partition",), True),
        ("__connect_offset", INT64_SCHEMA, ("offset",), True),
        ("name", OPTIONAL_STRING_SCHEMA, ("value", "name"), False),
    ]
    renamed = plan_columns(settings(**{"pk.mode": "kafka", "pk.fields": "t,p,o"}), None, VALUE)
    assert [c.name for c in renamed if c.key] == ["t", "p", "o"]


def test_record_key_columns_from_a_struct_or_a_primitive_key() -> None:
    all_fields = plan_columns(settings(**{"pk.mode": "record_key"}), KEY, VALUE)
    # The key's fields come first; the value's field of the same name is not written twice.
    assert [(c.name, c.source, c.key) for c in all_fields][:3] == [
        ("region", ("key", "region"), True),
        ("id", ("key", "id"), True),
        ("name", ("value", "name"), False),
    ]
    picked = plan_columns(settings(**{"pk.mode": "record_key", "pk.fields": "region"}), KEY, VALUE)
    assert [c.name for c in picked if c.key] == ["region"]
    assert "id" in [c.name for c in picked if not c.key]
    string_key = plan_columns(
        settings(**{"pk.mode": "record_key", "pk.fields": "code"}), OPTIONAL_STRING_SCHEMA, VALUE
    )
    assert (string_key[0].name, string_key[0].source, string_key[0].schema) == (
        "code",
        ("key",),
        STRING_SCHEMA,
    )
    with pytest.raises(ConnectException, match=r"pk\.fields must name the one column"):
        plan_columns(settings(**{"pk.mode": "record_key"}), STRING_SCHEMA, VALUE)
    with pytest.raises(ConnectException, match="'nope'"):
        plan_columns(settings(**{"pk.mode": "record_key", "pk.fields": "nope"}), KEY, VALUE)


def test_record_value_columns_and_the_whitelist() -> None:
    columns = plan_columns(
        settings(**{"pk.mode": "record_value", "pk.fields": "id", "fields.whitelist": "qty"}), None, VALUE
    )
    assert [(c.name, c.key) for c in columns] == [("id", True), ("qty", False)]
    every = plan_columns(settings(**{"pk.mode": "record_value"}), None, VALUE)
    assert all(c.key for c in every)
    # A key column is never null, whatever the field says.
    assert not every[1].schema.optional


def test_fields_that_cannot_be_columns_are_refused() -> None:
    nested = struct_schema({"id": INT64_SCHEMA, "tags": array_schema(STRING_SCHEMA)})
    with pytest.raises(ConnectException, match="'tags' is a array"):
        plan_columns(settings(), None, nested)
    with pytest.raises(ConnectException, match="structs with a schema"):
        plan_columns(settings(), None, STRING_SCHEMA)
    with pytest.raises(ConnectException, match="No column"):
        plan_columns(settings(**{"fields.whitelist": "other"}), None, VALUE)


def test_missing_columns_and_what_auto_evolve_may_add() -> None:
    evolved = struct_schema(
        {
            "id": INT64_SCHEMA,
            "note": OPTIONAL_STRING_SCHEMA,
            "n": INT32_SCHEMA.with_options(default=7),
            "at": timestamp_schema(optional=True),
        }
    )
    columns = plan_columns(settings(), None, evolved)
    table = TableColumns(True, frozenset({"id"}))
    assert [c.name for c in columns_to_add("t", table, columns, auto_evolve=True)] == ["note", "n", "at"]
    assert columns_to_add("t", TableColumns(True, frozenset({"id", "note", "n", "at"})), columns, False) == []
    with pytest.raises(
        ConnectException, match=r"Table t has no column 'note', 'n', 'at'.*auto.evolve is off"
    ):
        columns_to_add("t", table, columns, auto_evolve=False)
    required = plan_columns(settings(), None, struct_schema({"id": INT64_SCHEMA, "must": BYTES_SCHEMA}))
    with pytest.raises(ConnectException, match=r"'must'.*required field without a default"):
        columns_to_add("t", table, required, auto_evolve=True)
