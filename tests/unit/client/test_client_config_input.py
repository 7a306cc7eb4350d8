"""Config input: key=value arguments, Java .properties and JSON files, offsets files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.client._config_input import (
    ConfigInputError,
    format_properties,
    load_config_file,
    load_offsets_file,
    parse_config_json,
    parse_key_values,
    parse_offsets_json,
    parse_properties,
)


def test_key_values() -> None:
    assert parse_key_values(["a=1", "b=x=y", "c=", " d =v"]) == {"a": "1", "b": "x=y", "c": "", "d": "v"}
    with pytest.raises(ConfigInputError, match="key=value"):
        parse_key_values(["novalue"])
    with pytest.raises(ConfigInputError, match="empty key"):
        parse_key_values(["=x"])


PROPERTIES = r"""# A comment \
not.continued=because comments do not continue
! another comment
   # indented comment
key1 = value1
key2:value2
key3 value3
key4   =   spaced value<TRAILING>
key5=multi\
       line\
   value
path=c:\\dir\\file
unicode=\u00e9\u4e2d\uD83D\uDE00
esc\ key\=\:=a\=b\:c
empty
tabs=\t\n\r\f
hash=#not a comment
cont.blank=a\

after=blank continuation ended the line
last=trailing backslash at eof\
""".replace("<TRAILING>", "   ")


def test_properties_syntax() -> None:
    parsed = parse_properties(PROPERTIES)
    assert parsed == {
        "not.continued": "because comments do not continue",
        "key1": "value1",
        "key2": "value2",
        "key3": "value3",
        "key4": "spaced value   ",
        "key5": "multilinevalue",
        "path": "c:\\dir\\file",
        "unicode": "é中😀",
        "esc key=:": "a=b:c",
        "empty": "",
        "tabs": "\t\n\r\f",
        "hash": "#not a comment",
        "cont.blank": "a",
        "after": "blank continuation ended the line",
        "last": "trailing backslash at eof",
    }


def test_properties_line_endings_and_later_keys_win() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}


def test_properties_separator_rules() -> None:
    # Whitespace then one '=' or ':' separates; a second one belongs to the value.
    assert parse_properties("k  =  = v") == {"k": "= v"}
    assert parse_properties("k == v") == {"k": "= v"}
    assert parse_properties("k : v") == {"k": "v"}
    assert parse_properties("=v") == {"": "v"}
    assert parse_properties("k\\\\=v") == {"k\\": "v"}


def test_properties_bad_unicode_escape() -> None:
    with pytest.raises(ConfigInputError, match="line 2"):
        parse_properties("a=1\nb=\\u12x4")
    with pytest.raises(ConfigInputError, match="surrogate"):
        parse_properties("b=\\uD83D")


def test_format_properties_escapes() -> None:
    text = format_properties({" k=:": " v#!\\", "a": "x y"})
    assert text == "\\ k\\=\\:=\\ v\\#\\!\\\\\na=x y\n"


@given(
    st.dictionaries(
        # Encodable text: no lone surrogates, which no config file can hold.
        st.text(alphabet=st.characters(codec="utf-8")),
        st.text(alphabet=st.characters(codec="utf-8")),
        max_size=8,
    )
)
def test_properties_round_trip(config: dict[str, str]) -> None:
    assert parse_properties(format_properties(config)) == config


def test_json_flat_and_kafka_connect_bodies() -> None:
    flat = parse_config_json('{"connector.class": "X", "tasks.max": 2, "enabled": true, "ratio": 0.5}')
    assert flat.config == {"connector.class": "X", "tasks.max": "2", "enabled": "true", "ratio": "0.5"}
    assert flat.name is None

    body = parse_config_json(
        '{"name": "gen", "config": {"topic": "t", "gone": null}, "initial_state": "PAUSED"}'
    )
    assert body.name == "gen"
    assert body.initial_state == "PAUSED"
    assert body.config == {"topic": "t", "gone": None}
    with pytest.raises(ConfigInputError, match="only meaningful for a patch"):
        body.values_only("f.json")

    # `connectors get --output json` output reads back too.
    got = parse_config_json(json.dumps({"name": "connectors/gen", "config": {"a": "b"}, "tasks": []}))
    assert (got.name, got.config) == ("gen", {"a": "b"})


@pytest.mark.parametrize(
    ("text", "message"),
    [("[1]", "JSON object"), ("{", "invalid JSON"), ('{"a": {"b": 1}}', "must be a string")],
)
def test_bad_json_configs(text: str, message: str) -> None:
    with pytest.raises(ConfigInputError, match=message):
        parse_config_json(text)


def test_load_config_file_detects_the_format(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"k": "v"}')
    (tmp_path / "a.properties").write_text("{=brace key\n")
    (tmp_path / "sniffed").write_text('  {"k": "json"}')
    (tmp_path / "plain").write_text("k=props\n")
    (tmp_path / "latin1.properties").write_bytes("k=caf\xe9\n".encode("latin-1"))
    assert load_config_file(tmp_path / "a.json").config == {"k": "v"}
    assert load_config_file(tmp_path / "a.properties").config == {"{": "brace key"}
    assert load_config_file(tmp_path / "sniffed").config == {"k": "json"}
    assert load_config_file(tmp_path / "plain").config == {"k": "props"}
    assert load_config_file(tmp_path / "latin1.properties").config == {"k": "café"}
    with pytest.raises(ConfigInputError, match="cannot read"):
        load_config_file(tmp_path / "missing.json")


def test_offsets_files(tmp_path: Path) -> None:
    body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": "t", "kafka_partition": 1}, "offset": None},
        ]
    }
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps(body))
    assert load_offsets_file(path) == body["offsets"]
    assert parse_offsets_json(json.dumps(body["offsets"])) == body["offsets"]
    with pytest.raises(ConfigInputError, match="'offsets' list"):
        parse_offsets_json("{}")
    with pytest.raises(ConfigInputError, match="partition"):
        parse_offsets_json('{"offsets": [{"offset": {}}]}')
    with pytest.raises(ConfigInputError, match="object or null"):
        parse_offsets_json('{"offsets": [{"partition": {}, "offset": 5}]}')
