"""The driver program of the embedded Spark Connect server. `start_spark_connect` hands this file to
spark-submit; the Spark context it opens serves Spark Connect through Spark's own plugin
(`spark.plugins=org.apache.spark.sql.connect.SparkConnectPlugin`), as PySpark itself does for
`--remote local`.

Why not Spark's `SparkConnectServer` class: it turns artifact isolation on for every session, and
an isolated session gets Python workers of its own, each of which imports pyspark, pyarrow and our
data sources again. Measured here (2026-11-29), that cost every new session about 6 s of CPU and
made its first write to Kafka take 6 to 8 s instead of half a second; every executor, and every
executor restart, opens a new session. Our sessions add no artifacts (plugins come from
`plugin.path`), so the embedded server turns isolation off and its sessions share one pool of warm
Python workers.

The program holds the Spark context until its standard input closes. spark-submit's JVM starts it
with a pipe there and keeps that open as long as it lives, so this process never outlives it.

Run by spark-submit as a file, with the Python of this project; it imports nothing of ours."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main() -> None:
    # A classic Spark driver: `embedded.spark_process_env` keeps PySpark's Spark Connect client
    # variables out of this program's environment, so the builder does not make a client instead.
    SparkSession.builder.getOrCreate()
    # Nothing is ever written here: read returns when the JVM's end of the pipe closes.
    sys.stdin.buffer.read()


if __name__ == "__main__":
    main()
