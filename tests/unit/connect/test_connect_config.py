"""ConfigDef, parsing by Kafka's rules, validators and AbstractConfig."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluiceway.connect import (
    NO_DEFAULT,
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConfigType,
    Importance,
    ListOf,
    NonEmptyString,
    NonEmptyStringWithoutControlChars,
    Nullable,
    Password,
    Range,
    RegexValidator,
    UniqueItems,
    ValidString,
    Width,
    convert_to_string,
)
from sluiceway.connect.config import parse_type


def _key(type_: ConfigType) -> Any:
    return ConfigDef().define("k", type_, None).keys()["k"]


def parse(type_: ConfigType, raw: str) -> Any:
    return parse_type("k", raw, type_)


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("TRUE", True), (" False ", False), ("fAlSe", False)],
)
def test_boolean_is_case_insensitive_and_trimmed(raw: str, expected: bool) -> None:
    assert parse(ConfigType.BOOLEAN, raw) is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", "t"])
def test_boolean_rejects_anything_else(raw: str) -> None:
    with pytest.raises(ConfigException, match="expected true or false") as e:
        parse(ConfigType.BOOLEAN, raw)
    assert e.value.name == "k"


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1), st.sampled_from(["", " ", "\t"]))
def test_int_round_trips_every_32_bit_value(number: int, pad: str) -> None:
    assert parse(ConfigType.INT, f"{pad}{number}{pad}") == number


@given(st.one_of(st.integers(max_value=-(2**31) - 1), st.integers(min_value=2**31)))
def test_int_rejects_values_outside_32_bits(number: int) -> None:
    with pytest.raises(ConfigException, match="does not fit in INT, which holds -2147483648 to 2147483647"):
        parse(ConfigType.INT, str(number))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trips_every_64_bit_value(number: int) -> None:
    assert parse(ConfigType.LONG, str(number)) == number


@pytest.mark.parametrize("raw", ["abc", "1.5", "1_000", "0x10", "", "+", "1e3", "٣"])
def test_int_rejects_non_decimal_integers(raw: str) -> None:
    with pytest.raises(ConfigException, match="not a decimal integer"):
        parse(ConfigType.INT, raw)


def test_short_is_16_bit() -> None:
    assert parse(ConfigType.SHORT, "-32768") == -32768
    with pytest.raises(ConfigException, match="SHORT"):
        parse(ConfigType.SHORT, "32768")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1.5", 1.5), ("2", 2.0), ("1e3", 1000.0), (".5", 0.5), ("3d", 3.0), ("-Infinity", float("-inf"))],
)
def test_double_follows_java_syntax(raw: str, expected: float) -> None:
    assert parse(ConfigType.DOUBLE, raw) == expected


@pytest.mark.parametrize("raw", ["abc", "inf", "1_0", ""])
def test_double_rejects_non_java_numbers(raw: str) -> None:
    with pytest.raises(ConfigException, match="not a decimal number"):
        parse(ConfigType.DOUBLE, raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", []),
        ("   ", []),
        ("a", ["a"]),
        ("a, b ,c", ["a", "b", "c"]),
        ("a,,b", ["a", "", "b"]),
        ("a,", ["a", ""]),
    ],
)
def test_list_splits_on_commas_like_kafka(raw: str, expected: list[str]) -> None:
    assert parse(ConfigType.LIST, raw) == expected


@given(st.lists(st.text(alphabet="abcxyz.-_0123456789", min_size=1), min_size=1))
def test_list_round_trips_items_without_commas(items: list[str]) -> None:
    assert parse(ConfigType.LIST, ", ".join(items)) == items
    assert convert_to_string(items, ConfigType.LIST) == ",".join(items)


def test_string_is_trimmed_like_java() -> None:
    assert parse(ConfigType.STRING, "  x y \n") == "x y"


def test_password_is_hidden() -> None:
    value = parse(ConfigType.PASSWORD, " s3cret ")
    assert isinstance(value, Password)
    assert value.value == "s3cret"
    assert str(value) == repr(value) == "[hidden]"
    assert convert_to_string(value, ConfigType.PASSWORD) == "[hidden]"
    assert "s3cret" not in f"{value} {[value]}"


@pytest.mark.parametrize("raw", ["org.apache.kafka.connect.json.JsonConverter", "a.b$Inner", "Simple"])
def test_class_names_are_checked_for_form(raw: str) -> None:
    assert parse(ConfigType.CLASS, raw) == raw


def test_class_name_with_spaces_is_rejected() -> None:
    with pytest.raises(ConfigException, match="expected a class name"):
        parse(ConfigType.CLASS, "a b")


# --- definitions ----------------------------------------------------------------------------


def example() -> ConfigDef:
    return (
        ConfigDef()
        .define("req", ConfigType.STRING, validator=NonEmptyString(), importance=Importance.HIGH, group="G1")
        .define("count", ConfigType.INT, 5, Range.between(1, 10), group="G2", order_in_group=1)
        .define("ratio", ConfigType.DOUBLE, "0.5", Range.at_least(0))
        .define("names", ConfigType.LIST, "a,b", group="G1")
        .define("secret", ConfigType.PASSWORD, None)
        .define("flag", ConfigType.BOOLEAN, False, width=Width.SHORT, display_name="Flag")
    )


def test_keys_keep_definition_order_and_groups_first_appearance() -> None:
    definition = example()
    assert list(definition.keys()) == ["req", "count", "ratio", "names", "secret", "flag"]
    assert definition.groups() == ["G1", "G2"]


def test_key_metadata() -> None:
    keys = example().keys()
    assert keys["req"].required
    assert keys["req"].default is NO_DEFAULT
    assert keys["req"].default_as_string() is None
    assert keys["count"].default_as_string() == "5"
    assert keys["count"].valid_values() == "[1,...,10]"
    assert keys["ratio"].default == 0.5
    assert keys["ratio"].valid_values() == "[0,...]"
    assert keys["names"].default_as_string() == "a,b"
    assert keys["secret"].default_as_string() is None
    assert keys["flag"].default_as_string() == "false"
    assert keys["flag"].display_name == "Flag"
    assert keys["count"].display_name == "count"
    assert keys["flag"].valid_values() == ""


def test_duplicate_definition_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="already has a definition"):
        ConfigDef().define("a", ConfigType.INT, 1).define("a", ConfigType.INT, 2)


def test_invalid_default_is_rejected_at_definition() -> None:
    with pytest.raises(ConfigException, match="lowest accepted value is 1"):
        ConfigDef().define("a", ConfigType.INT, 0, Range.at_least(1))
    with pytest.raises(ValueError, match="does not fit"):
        ConfigDef().define("a", ConfigType.INT, 1.5)


def test_merge_appends_new_keys_and_first_definition_wins() -> None:
    first = ConfigDef().define("a", ConfigType.INT, 1).define("b", ConfigType.STRING, "x", group="One")
    second = ConfigDef().define("b", ConfigType.INT, 2, group="Two").define("c", ConfigType.LIST, "")
    merged = first.merge(second)
    assert list(merged.keys()) == ["a", "b", "c"]
    assert merged.keys()["b"].type is ConfigType.STRING
    assert merged.groups() == ["One"]
    assert list(first.keys()) == ["a", "b"]  # the originals are unchanged


def test_parse_returns_typed_values_and_defaults() -> None:
    values = example().parse({"req": "x", "count": "7", "secret": "pw", "unknown": "ignored"})
    assert values == {
        "req": "x",
        "count": 7,
        "ratio": 0.5,
        "names": ["a", "b"],
        "secret": Password("pw"),
        "flag": False,
    }


def test_parse_reports_missing_required_key() -> None:
    with pytest.raises(ConfigException) as e:
        example().parse({})
    assert e.value.name == "req"
    assert str(e.value) == "req: required, and not set (it has no default)"


def test_parse_reports_first_invalid_value() -> None:
    with pytest.raises(ConfigException) as e:
        example().parse({"req": "x", "count": "11"})
    assert e.value.name == "count"
    assert str(e.value) == "count: the highest accepted value is 10 (got 11)"


def test_parse_gives_each_caller_its_own_list_default() -> None:
    definition = example()
    definition.parse({"req": "x"})["names"].append("z")
    assert definition.parse({"req": "x"})["names"] == ["a", "b"]


def test_validate_collects_every_error() -> None:
    values = {v.name: v for v in example().validate({"count": "abc", "ratio": "-1", "flag": "maybe"})}
    assert list(values) == ["req", "count", "ratio", "names", "secret", "flag"]
    assert values["req"].errors == ["required, and not set (it has no default)"]
    assert values["count"].errors == ["not a decimal integer (got abc)"]
    assert values["count"].value is None
    assert values["ratio"].errors == ["the lowest accepted value is 0 (got -1.0)"]
    assert values["flag"].errors == ["expected true or false (got maybe)"]
    # Each error sits under its key, so it does not repeat the key; the exception's text does.
    with pytest.raises(ConfigException) as raised:
        example().parse({"req": "x", "count": "abc"})
    assert str(raised.value) == "count: not a decimal integer (got abc)"
    assert raised.value.detail == "not a decimal integer (got abc)"
    assert values["names"].errors == []
    assert values["names"].value == ["a", "b"]


class ModeRecommender:
    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]:
        return ["x", "y"] if parsed.get("mode") == "fancy" else []

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool:
        return parsed.get("mode") == "fancy"


def test_validate_fills_recommended_values_and_visibility() -> None:
    definition = (
        ConfigDef()
        .define("mode", ConfigType.STRING, "plain", dependents=["detail"])
        .define("detail", ConfigType.STRING, None, recommender=ModeRecommender())
    )
    plain = {v.name: v for v in definition.validate({})}
    assert plain["detail"].visible is False
    assert plain["detail"].recommended_values == []
    fancy = {v.name: v for v in definition.validate({"mode": "fancy"})}
    assert fancy["detail"].visible is True
    assert fancy["detail"].recommended_values == ["x", "y"]


def test_undefined_dependent_is_reported() -> None:
    definition = ConfigDef().define("a", ConfigType.STRING, "", dependents=["ghost"])
    values = {v.name: v for v in definition.validate({})}
    assert values["ghost"].errors == ["ghost: named as a dependent but has no definition"]
    with pytest.raises(ConfigException, match="ghost"):
        definition.parse({})


# --- validators -----------------------------------------------------------------------------


def test_valid_string_case_sensitivity() -> None:
    strict = ValidString.in_("none", "all")
    strict("k", "all")
    with pytest.raises(ConfigException, match="expected one of none, all"):
        strict("k", "ALL")
    assert strict.describe() == "[none, all]"
    relaxed = ValidString.in_("parquet", "json", case_insensitive=True)
    relaxed("k", "PARQUET")
    with pytest.raises(ConfigException, match="one of parquet, json, in any case"):
        relaxed("k", "xml")
    assert relaxed.describe() == "[parquet, json], any case"


def test_non_empty_string_without_control_chars() -> None:
    validator = NonEmptyStringWithoutControlChars()
    validator("name", None)
    validator("name", "ok name")
    with pytest.raises(ConfigException, match="empty string is not accepted"):
        validator("name", "")
    with pytest.raises(ConfigException, match="character codes 10, 127"):
        validator("name", "a\nb\x7f")


def test_regex_validator() -> None:
    validator = RegexValidator()
    validator("k", "topic-.*")
    validator("k", ["a", "b+"])
    validator("k", None)
    with pytest.raises(ConfigException, match="not a valid Python regular expression"):
        validator("k", "(unclosed")


def test_list_of_unique_and_nullable() -> None:
    ListOf(NonEmptyString())("k", ["a", "b"])
    with pytest.raises(ConfigException, match="empty string is not accepted"):
        ListOf(NonEmptyString())("k", ["a", ""])
    with pytest.raises(ConfigException, match="an alias appears more than once"):
        UniqueItems("unique aliases")("k", ["a", "a"])
    Nullable(Range.at_least(0))("k", None)
    with pytest.raises(ConfigException, match="lowest accepted value is 0"):
        Nullable(Range.at_least(0))("k", -1)
    with pytest.raises(ConfigException, match="a number is required"):
        Range.at_least(0)("k", None)


# --- AbstractConfig -------------------------------------------------------------------------


def test_abstract_config_typed_getters() -> None:
    config = AbstractConfig(example(), {"req": "x", "secret": "pw", "extra.a": "1"})
    assert config.get_string("req") == "x"
    assert config.get_int("count") == 5
    assert config.get_long("count") == 5
    assert config.get_double("ratio") == 0.5
    assert config.get_list("names") == ["a", "b"]
    assert config.get_boolean("flag") is False
    password = config.get_password("secret")
    assert password is not None
    assert password.value == "pw"
    assert config.originals() == {"req": "x", "secret": "pw", "extra.a": "1"}
    assert config.originals_with_prefix("extra.") == {"a": "1"}
    with pytest.raises(ConfigException, match="is of type INT"):
        config.get_string("count")
    with pytest.raises(ConfigException, match="not a defined key"):
        config.get_int("nope")


def test_abstract_config_raises_on_invalid_props() -> None:
    with pytest.raises(ConfigException) as e:
        AbstractConfig(example(), {"req": ""})
    assert e.value.name == "req"


def test_config_exception_message_forms() -> None:
    assert str(ConfigException("a", 3, "too big")) == "a: too big (got 3)"
    assert str(ConfigException("a", None)) == "a: value not accepted"
    assert str(ConfigException(None, message="plain")) == "plain"
    assert str(ConfigException("a", Password("x"), "bad")) == "a: bad (got [hidden])"
