"""What the embedded standalone cluster is given, held to what deploy/README.md tells an operator of a
remote Spark cluster (its "What a remote Spark cluster needs" section), and the cluster's log files
among those `sluiceway dev` sets aside for the next run. Starting the cluster for real is for
tests/cluster."""

from __future__ import annotations

import sys
from pathlib import Path

from sluiceway_server.dev import STACK_LOGS
from sluiceway_server.spark_cluster import EmbeddedSparkCluster

README = Path(__file__).resolve().parents[3] / "deploy" / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def _cluster(tmp_path: Path) -> EmbeddedSparkCluster:
    return EmbeddedSparkCluster(
        master_port=7077, master_ui_port=8080, work_dir=tmp_path, log_dir=tmp_path, worker_cores=1
    )


def test_the_spark_connect_server_gets_what_the_remote_cluster_section_names(tmp_path: Path) -> None:
    conf = _cluster(tmp_path).connect_conf()
    section = _section("What a remote Spark cluster needs")
    for key in ("spark.pyspark.python", "spark.pyspark.driver.python"):
        assert conf[key] == sys.executable
        assert f"`{key}`" in section, key
    # The JDBC driver's two flags, which start_spark_connect passes for every master.
    assert "`--driver-class-path JAR`" in section and "`--jars JAR`" in section
    assert "`plugin.path`" in section


def test_master_and_workers_share_the_worker_timeout_and_the_master_recovers(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    properties = dict(
        line.split("=", 1) for line in cluster._properties().read_text().splitlines() if "=" in line
    )
    assert properties["spark.deploy.recoveryMode"] == "FILESYSTEM"
    assert Path(properties["spark.deploy.recoveryDirectory"]).is_dir()
    assert properties["spark.worker.timeout"] == "10"
    assert cluster.master_url == "spark://127.0.0.1:7077"


def test_the_cluster_logs_are_among_the_stack_logs() -> None:
    for name in ("spark-master.log", "spark-master-2.log", "spark-worker-1.log", "spark-worker-2.log.3"):
        assert STACK_LOGS.fullmatch(name), name
    assert not STACK_LOGS.fullmatch("spark-worker.log")
