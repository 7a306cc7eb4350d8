"""Kafka Connect's converters (JSON with and without the `schemas.enable` envelope, String, ByteArray)
for record keys and values, in two forms:

- Spark column expressions for DataFrame pipelines: `to_connect(col)` turns the Kafka bytes of a read
  into the value a sink sees, `from_connect(col)` turns what a source produced into Kafka bytes.
  Invalid data fails the Spark job with a message naming the converter; a sink's `checked_frame`
  marks such a record in the batch's error column instead (errors.tolerance=all, record_errors.py).
- Record-level functions for record-level tasks, `to_connect_value` / `from_connect_value`, which follow
  Kafka's JsonConverter byte for byte where Python values allow (compact JSON, UTF-8, byte arrays as
  base64, maps with non-string keys as arrays of [key, value] pairs, the schema/payload envelope).

In DataFrame form the JSON converter works on JSON *text*: the sink gets the record's JSON text (for
the envelope, the text of its payload) as a string, and a string or binary column a source produces is
taken as JSON text, checked, and written as it is (wrapped in the envelope when enabled); struct, map
and array columns are serialised with `to_json`.

Converter names are resolved as Kafka Connect resolves plugin aliases: the full Kafka class name, the
simple class name, the simple name without `Converter`, and our own `sluiceway.converters.*` names.

The modules:

- `base.py`: the `Converter` interface, `ConverterError` and the Kafka class names;
- `simple.py`: `ByteArrayConverter` and `StringConverter`;
- `json_converter.py`: `JsonConverter`, as Spark expressions and per record;
- `connect_json.py`: Kafka's JsonConverter value mapping (Connect value and schema <-> JSON), schema
  inference;
- `registry.py`: name resolution and the connector/worker precedence (`converter_for`).
"""
