#!/usr/bin/env bash
# Runs a Spark Connect server in the foreground from the Sluiceway image (installed there as
# /usr/local/bin/sluiceway-spark-connect), with the image's Python as Spark's Python, so the
# executors' jobs find this project's data sources and confluent-kafka:
#
#   docker run --entrypoint sluiceway-spark-connect -p 15002:15002 sluiceway:VERSION [OPTION...]
#
# Settings (environment):
#   SPARK_CONNECT_MASTER        the Spark master URL (default local[*]: Spark runs in this container)
#   SPARK_CONNECT_PORT          the Spark Connect gRPC port (default 15002)
#   SPARK_CONNECT_BIND_ADDRESS  the address it listens on (default 0.0.0.0: every interface)
#   SPARK_CONNECT_DRIVER_HOST   the address Spark's executors reach this driver on
#                               (spark.driver.host; the driver then binds every interface). Needed
#                               with a remote master when this container's host name does not
#                               resolve where those executors run.
#   SLUICEWAY_JDBC_JARS         JDBC driver jars, comma-separated paths, put on the driver's class path
#                               and sent to Spark's executors (what the JDBC connectors need)
#   SPARK_HOME, PYSPARK_PYTHON  set by the image: pyspark's directory and the image's Python
#
# OPTIONs are passed to spark-submit as they are, after the ones above (a later --conf of the
# same key wins): e.g. --driver-memory 4g, --conf spark.sql.shuffle.partitions=8.
set -euo pipefail

: "${SPARK_HOME:?SPARK_HOME must name the pyspark directory that holds bin/spark-submit}"
python=${PYSPARK_PYTHON:-/opt/sluiceway/bin/python}

args=(
  --class org.apache.spark.sql.connect.service.SparkConnectServer
  --master "${SPARK_CONNECT_MASTER:-local[*]}"
  --conf "spark.connect.grpc.binding.port=${SPARK_CONNECT_PORT:-15002}"
  --conf "spark.connect.grpc.binding.address=${SPARK_CONNECT_BIND_ADDRESS:-0.0.0.0}"
  --conf "spark.pyspark.python=$python"
  --conf "spark.pyspark.driver.python=$python"
)
if [ -n "${SPARK_CONNECT_DRIVER_HOST:-}" ]; then
  args+=(--conf "spark.driver.host=$SPARK_CONNECT_DRIVER_HOST" --conf spark.driver.bindAddress=0.0.0.0)
fi

if [ -n "${SLUICEWAY_JDBC_JARS:-}" ]; then
  jars=()
  IFS=',' read -r -a listed <<<"$SLUICEWAY_JDBC_JARS"
  for jar in "${listed[@]}"; do
    jar=${jar#"${jar%%[![:space:]]*}"}
    jar=${jar%"${jar##*[![:space:]]}"}
    [ -n "$jar" ] || continue
    if [ ! -f "$jar" ]; then
      echo "sluiceway-spark-connect: SLUICEWAY_JDBC_JARS names $jar, which is not a file" >&2
      exit 1
    fi
    jars+=("$jar")
  done
  if [ ${#jars[@]} -gt 0 ]; then
    # On the driver's own class path too, so java.sql.DriverManager finds a driver from the URL alone.
    args+=(--driver-class-path "$(IFS=:; echo "${jars[*]}")" --jars "$(IFS=,; echo "${jars[*]}")")
  fi
fi

# `spark-internal` stands for the application: the server's class is on Spark's own class path.
exec "$SPARK_HOME/bin/spark-submit" "${args[@]}" "$@" spark-internal
