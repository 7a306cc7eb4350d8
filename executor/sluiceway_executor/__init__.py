"""Sluiceway executors: task runners, Spark data sources, converters and built-in connectors."""
