"""Kafka Connect's predicates as boolean columns: TopicNameMatches, HasHeaderKey and
RecordIsTombstone, with Kafka's keys and class names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar, Final

from sluiceway.connect import NO_DEFAULT, ConfigDef, ConfigType, Importance
from sluiceway.connect.transforms import Predicate, RecordColumns, TransformContext
from sluiceway_executor.transforms.record_transforms import whole_match

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["HasHeaderKey", "RecordIsTombstone", "TopicNameMatches"]

_KAFKA_PREDICATES: Final = "org.apache.kafka.connect.transforms.predicates."


class TopicNameMatches(Predicate):
    """True for records whose whole topic matches ``pattern``."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{_KAFKA_PREDICATES}TopicNameMatches",)

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "pattern",
            ConfigType.STRING,
            NO_DEFAULT,
            None,
            Importance.MEDIUM,
            "What the whole topic must match.",
        )

    def configure(self, props: Mapping[str, str]) -> None:
        super().configure(props)
        self._pattern = whole_match(self.settings.get_string("pattern") or "")

    def test(self, records: RecordColumns, context: TransformContext) -> Column:
        return records.topic.rlike(self._pattern)


class HasHeaderKey(Predicate):
    """True for records with at least one header of the given name."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{_KAFKA_PREDICATES}HasHeaderKey",)

    def config(self) -> ConfigDef:
        return ConfigDef().define(
            "name", ConfigType.STRING, NO_DEFAULT, None, Importance.MEDIUM, "The header's name."
        )

    def test(self, records: RecordColumns, context: TransformContext) -> Column:
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual alias

        name = self.settings.get_string("name") or ""
        return F.coalesce(F.exists(records.headers, lambda h: h.getField("key") == F.lit(name)), F.lit(False))


class RecordIsTombstone(Predicate):
    """True for records whose value is null."""

    ALIASES: ClassVar[tuple[str, ...]] = (f"{_KAFKA_PREDICATES}RecordIsTombstone",)

    def test(self, records: RecordColumns, context: TransformContext) -> Column:
        return records.value.isNull()
