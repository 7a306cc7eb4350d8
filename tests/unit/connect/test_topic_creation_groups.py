"""KIP-158's run-time model: the topic creation groups built from a source connector's config, and
which group decides how a topic is created."""

from __future__ import annotations

import pytest

from sluiceway.connect import ConfigException
from sluiceway.connect.topic_creation_config import (
    TopicCreationGroup,
    group_for_topic,
    topic_creation_groups,
    uses_topic_creation,
)

BASE = {
    "name": "src",
    "connector.class": "DataGenSource",
    "topic": "t",
    "topic.creation.default.replication.factor": "-1",
    "topic.creation.default.partitions": "3",
}


def groups_of(**extra: str) -> tuple[TopicCreationGroup, ...]:
    return topic_creation_groups({**BASE, **extra})


def chosen(groups: tuple[TopicCreationGroup, ...], topic: str) -> str:
    return group_for_topic(groups, topic).name


def test_listed_groups_come_in_order_then_default() -> None:
    groups = groups_of(
        **{
            "topic.creation.groups": "second, first",
            "topic.creation.first.include": "x",
            "topic.creation.second.include": "y",
        }
    )
    assert [g.name for g in groups] == ["second", "first", "default"]


def test_the_first_listed_group_that_matches_wins() -> None:
    groups = groups_of(
        **{
            "topic.creation.groups": "narrow,wide",
            "topic.creation.narrow.include": "orders-eu",
            "topic.creation.wide.include": "orders-.*",
        }
    )
    assert chosen(groups, "orders-eu") == "narrow"
    assert chosen(groups, "orders-us") == "wide"
    # Listed the other way round, the wide group takes both.
    swapped = groups_of(
        **{
            "topic.creation.groups": "wide,narrow",
            "topic.creation.narrow.include": "orders-eu",
            "topic.creation.wide.include": "orders-.*",
        }
    )
    assert chosen(swapped, "orders-eu") == "wide"


def test_exclude_passes_a_topic_on_to_the_next_group_or_default() -> None:
    groups = groups_of(
        **{
            "topic.creation.groups": "public,audit",
            "topic.creation.public.include": "orders-.*, users-.*",
            "topic.creation.public.exclude": ".*-internal",
            "topic.creation.audit.include": "orders-.*",
        }
    )
    assert chosen(groups, "users-eu") == "public"
    assert chosen(groups, "orders-internal") == "audit"
    assert chosen(groups, "users-internal") == "default"


def test_a_topic_no_group_takes_falls_to_default() -> None:
    groups = groups_of(**{"topic.creation.groups": "a", "topic.creation.a.include": "a-.*"})
    assert chosen(groups, "b-1") == "default"
    assert chosen(groups_of(), "anything") == "default"


def test_patterns_match_the_whole_name() -> None:
    group = TopicCreationGroup("g", ("orders", "users-[0-9]+"), ("users-0",), 1, 1)
    assert group.matches("orders")
    assert not group.matches("orders-1")  # a prefix is not enough
    assert not group.matches("my-orders")  # nor a suffix
    assert group.matches("users-12")
    assert not group.matches("users-0")
    # Alternatives joined at the top level: each is anchored at both ends.
    assert not group.matches("ordersusers-1")
    # A pattern's inline flags are its own, wherever it stands in the list.
    flagged = groups_of(**{"topic.creation.groups": "f", "topic.creation.f.include": "logs, (?i)orders-.*"})[
        0
    ]
    assert flagged.matches("ORDERS-1")
    assert flagged.matches("logs")
    assert not flagged.matches("LOGS")


def test_a_group_without_include_patterns_takes_nothing() -> None:
    groups = groups_of(**{"topic.creation.groups": "empty", "topic.creation.empty.partitions": "9"})
    empty = groups[0]
    assert empty.include == ()
    assert not empty.matches("t")
    assert chosen(groups, "t") == "default"


def test_groups_inherit_only_partitions_and_replication_factor_from_default() -> None:
    groups = groups_of(
        **{
            "topic.creation.default.cleanup.policy": "delete",
            "topic.creation.default.retention.ms": "1000",
            "topic.creation.groups": "inherits,own",
            "topic.creation.inherits.include": "i-.*",
            "topic.creation.own.include": "o-.*",
            "topic.creation.own.partitions": "7",
            "topic.creation.own.replication.factor": "2",
            "topic.creation.own.cleanup.policy": "compact",
            "topic.creation.own.min.insync.replicas": "2",
        }
    )
    by_name = {g.name: g for g in groups}
    assert (by_name["inherits"].partitions, by_name["inherits"].replication_factor) == (3, -1)
    assert by_name["inherits"].configs == {}
    assert (by_name["own"].partitions, by_name["own"].replication_factor) == (7, 2)
    assert by_name["own"].configs == {"cleanup.policy": "compact", "min.insync.replicas": "2"}
    assert by_name["default"].configs == {"cleanup.policy": "delete", "retention.ms": "1000"}
    assert by_name["own"].describe() == (
        "partitions=7, replication.factor=2, cleanup.policy=compact, min.insync.replicas=2"
    )


def test_default_include_and_exclude_are_ignored() -> None:
    groups = groups_of(
        **{
            "topic.creation.default.include": "nothing-matches-this",
            "topic.creation.default.exclude": ".*",
        }
    )
    (default,) = groups
    assert (default.include, default.exclude) == ((), ())
    assert default.matches("any-topic")
    # They are the group's own keys, not topic-level settings for the broker.
    assert default.configs == {}


def test_listing_default_adds_nothing() -> None:
    groups = groups_of(
        **{
            "topic.creation.groups": "default, a",
            "topic.creation.a.include": "a-.*",
            "topic.creation.default.include": "a-.*",
        }
    )
    assert [g.name for g in groups] == ["a", "default"]
    assert chosen(groups, "b") == "default"


def test_keys_of_a_longer_group_name_are_not_settings_of_the_shorter_one() -> None:
    groups = groups_of(
        **{
            "topic.creation.groups": "a,a.b",
            "topic.creation.a.include": "a-.*",
            "topic.creation.a.b.include": "b-.*",
            "topic.creation.a.b.partitions": "5",
            "topic.creation.a.retention.ms": "10",
        }
    )
    by_name = {g.name: g for g in groups}
    assert by_name["a"].configs == {"retention.ms": "10"}
    assert by_name["a.b"].partitions == 5


def test_an_invalid_config_raises() -> None:
    with pytest.raises(ConfigException, match=r"topic\.creation\.default\.partitions"):
        topic_creation_groups({"topic.creation.default.replication.factor": "1"})
    with pytest.raises(ConfigException, match="listed again: a"):
        groups_of(**{"topic.creation.groups": "a,b,a"})
    with pytest.raises(ConfigException, match=r"topic\.creation\.a\.include"):
        groups_of(**{"topic.creation.groups": "a", "topic.creation.a.include": "(unclosed"})


def test_uses_topic_creation_is_any_topic_creation_key() -> None:
    assert not uses_topic_creation({"topic": "t", "topic.creationx": "1"})
    assert uses_topic_creation({"topic.creation.groups": ""})
