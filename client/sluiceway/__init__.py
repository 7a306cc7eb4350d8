"""Sluiceway: a Kafka Connect-style data-integration system with a gRPC control plane
and executors that run every pipeline on Apache Spark through Spark Connect.

This package holds the generated API (`sluiceway.api.v1`), the client library, the CLI
and the connector SDK (`sluiceway.connect`).
"""

__version__ = "0.1.0"
