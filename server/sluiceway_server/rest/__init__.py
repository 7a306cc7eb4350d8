"""Kafka Connect's REST API on the control plane: a thin HTTP front on the replica's own gRPC API."""
