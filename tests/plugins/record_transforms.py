"""A record-level transform plugin for tests, loaded from plugin.path by the executor and inside
Spark's Python workers: it adds a SHA-256 fingerprint of a name to each value, in Python, and
fails on request (a DataException for names it rejects, a RetriableException the first few times
it sees a flaky name, counted in files so every Spark worker sees the same count)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from sluiceway.connect import ConfigDef, ConfigType, DataException, Importance, RetriableException
from sluiceway.connect.data import OPTIONAL_STRING_SCHEMA, Schema, struct_schema
from sluiceway.connect.transforms import ConnectRecord, RecordTransformation


def fingerprint(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:16]


class Fingerprint(RecordTransformation):
    """Adds ``fingerprint`` (the first 16 hex digits of the SHA-256 of the value's ``field``) to a
    struct value or a JSON object, and a ``fingerprinted`` header; drops records whose name is in
    ``drop``; raises DataException for names in ``reject``, and RetriableException for names in
    ``flaky`` until it has been called ``flaky.tries`` times on that name (counted in
    ``flaky.dir``)."""

    ALIASES = ("Fingerprint",)

    def config(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("field", ConfigType.STRING, "name", importance=Importance.HIGH, documentation="")
            .define("drop", ConfigType.LIST, "", importance=Importance.LOW, documentation="")
            .define("reject", ConfigType.LIST, "", importance=Importance.LOW, documentation="")
            .define("flaky", ConfigType.LIST, "", importance=Importance.LOW, documentation="")
            .define("flaky.tries", ConfigType.INT, 0, importance=Importance.LOW, documentation="")
            .define("flaky.dir", ConfigType.STRING, "", importance=Importance.LOW, documentation="")
        )

    def result_schemas(
        self, key_schema: Schema | None, value_schema: Schema | None
    ) -> tuple[Schema | None, Schema | None]:
        if value_schema is None:
            return key_schema, None
        fields = [(f.name, f.schema) for f in value_schema.fields]
        value = struct_schema([*fields, ("fingerprint", OPTIONAL_STRING_SCHEMA)], name=value_schema.name)
        return key_schema, value

    def apply_record(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value is None:
            return record
        value = json.loads(record.value) if record.value_schema is None else dict(record.value)
        name = str(value[self.settings.get_string("field")])
        if name in self.settings.get_list("reject"):
            raise DataException(f"the name {name} is rejected")
        if name in self.settings.get_list("drop"):
            return None
        if name in self.settings.get_list("flaky"):
            self._flake(name)
        value["fingerprint"] = fingerprint(name)
        headers = (*record.headers, ("fingerprinted", b"yes"))
        out = json.dumps(value) if record.value_schema is None else value
        return record.replace(value=out, headers=headers)

    def _flake(self, name: str) -> None:
        tries = Path(self.settings.get_string("flaky.dir") or ".") / f"{name}.tries"
        seen = int(tries.read_text()) if tries.exists() else 0
        tries.write_text(str(seen + 1))
        if seen < self.settings.get_int("flaky.tries"):
            raise RetriableException(f"{name} is not ready yet (try {seen + 1})")
