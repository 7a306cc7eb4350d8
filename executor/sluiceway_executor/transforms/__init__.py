"""Built-in transforms and predicates (Kafka Connect's SMTs as Spark column expressions), and the
chain that applies a connector's (``chain.py``). BUILT_IN_TRANSFORMS and BUILT_IN_PREDICATES are
what ``built_in_plugins`` registers.

None of these modules imports Spark at import time: the control plane loads them to validate configs.
"""

from collections.abc import Sequence
from typing import Final

from sluiceway.connect.transform_plugins import (
    PREDICATES_GROUP,
    TRANSFORMS_GROUP,
    TransformPlugins,
    installed,
)
from sluiceway.connect.transforms import AnyTransformation, Predicate
from sluiceway_executor.transforms.field_transforms import (
    InsertFieldKey,
    InsertFieldValue,
    MaskFieldKey,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
)
from sluiceway_executor.transforms.header_transforms import HeaderFromKey, HeaderFromValue
from sluiceway_executor.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from sluiceway_executor.transforms.record_transforms import (
    DropHeaders,
    Filter,
    InsertHeader,
    RegexRouter,
    TimestampRouter,
)
from sluiceway_executor.transforms.shape_transforms import (
    CastKey,
    CastValue,
    ExtractFieldKey,
    ExtractFieldValue,
    FlattenKey,
    FlattenValue,
    HoistFieldKey,
    HoistFieldValue,
    ValueToKey,
)
from sluiceway_executor.transforms.sql_transform import Sql
from sluiceway_executor.transforms.time_transforms import TimestampConverterKey, TimestampConverterValue

__all__ = ["BUILT_IN_PREDICATES", "BUILT_IN_TRANSFORMS", "built_in_plugins"]

BUILT_IN_TRANSFORMS: Final[tuple[type[AnyTransformation], ...]] = (
    CastKey,
    CastValue,
    DropHeaders,
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    FlattenKey,
    FlattenValue,
    HeaderFromKey,
    HeaderFromValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    InsertHeader,
    MaskFieldKey,
    MaskFieldValue,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    Sql,
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
    ValueToKey,
)

BUILT_IN_PREDICATES: Final[tuple[type[Predicate], ...]] = (HasHeaderKey, RecordIsTombstone, TopicNameMatches)


def built_in_plugins(plugin_path: Sequence[str] = ()) -> TransformPlugins:
    """The built-in transforms and predicates and those installed distributions publish as entry
    points, with ``plugin_path`` for plugins of one's own."""
    return TransformPlugins(
        (*BUILT_IN_TRANSFORMS, *installed(TRANSFORMS_GROUP)),
        (*BUILT_IN_PREDICATES, *installed(PREDICATES_GROUP)),
        plugin_path,
    )
