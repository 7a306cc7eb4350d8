"""Code that the connector SDK (`sluiceway.connect`), the client library (`sluiceway.client`), the
CLI, the control plane (`sluiceway_server`) and the executors (`sluiceway_executor`) all use.

It imports nothing else of `sluiceway` but the generated `sluiceway.api` and the error classes of
`sluiceway.errors` (tests/unit/test_import_graph.py holds it to that).

- names: connector and task resource names, the one parser and formatter
- limits: the documented limits of the API and the executor protocol; echo() for errors
- offsets: offsets as typed OffsetMaps, and the offsets topic's key and value bytes
- kafka_errors: which Kafka client errors pass by themselves (the retry loops' transient test)
- retry: the one retry policy (RetryPolicy, Retry, Deadline)
- transport: TransportSecurity, the TLS, mutual TLS and bearer token of a gRPC channel
- properties: Java .properties text and SLUICEWAY_<KEY> variables
- secrets: which config keys hold secrets, and hiding values
- logging_setup: configure_logging for the control plane and executor processes
- traces: the summary of a status trace for display
"""
