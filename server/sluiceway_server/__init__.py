"""The Sluiceway control plane: API servicers, herder, cluster membership and Kafka-backed stores."""
