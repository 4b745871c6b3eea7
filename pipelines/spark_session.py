"""A SparkSession for the pipelines, with Spark's Kafka connector on its class path.

The connector's jars (spark-sql-kafka-0-10_2.13 of pyspark's own version, its token provider,
kafka-clients, commons-pool2) come from Maven Central through scripts/fetch-jars.sh into
$SAMSA_CACHE/spark (default ~/.cache/samsa/spark) and reach the session as `spark.jars`: local
files, so a session never resolves packages at run time as `spark.jars.packages` would.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONNECTOR = "spark-sql-kafka-0-10_2.13"


class ConnectorMissing(RuntimeError):
    pass


def jar_cache() -> Path:
    return Path(os.environ.get("SAMSA_CACHE", Path.home() / ".cache" / "samsa")) / "spark"


def connector_jars() -> list[Path]:
    """The connector's jars, checked against the installed pyspark's version."""
    import pyspark

    jars = sorted(jar_cache().glob("*.jar"))
    wanted = f"{CONNECTOR}-{pyspark.__version__}.jar"
    if not any(j.name == wanted for j in jars):
        found = [j.name for j in jars if j.name.startswith(CONNECTOR)]
        raise ConnectorMissing(f"{wanted} is not in {jar_cache()} (found {found or 'nothing'}): "
                               "run `bash scripts/fetch-jars.sh spark` (jars/pom.xml pins the version "
                               "pyproject's pipeline extra pins for pyspark)")
    return jars


# The driver's JVM (it runs the executors too in local mode): C1 only and the serial collector, as
# the compat tests run Kafka: small jobs on a small machine, where C2's compile threads and a
# parallel GC cost more than they return.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"


def local_session(app_name: str, master: str = "local[2]", extra: dict[str, str] | None = None):
    """A SparkSession on this machine. Shuffles use as many partitions as there are cores (the
    default 200 would make every windowed count run 200 tasks and keep 200 state stores), the time
    zone is UTC (the windows' JSON is read back by other programs) and no web UI is started."""
    from pyspark.sql import SparkSession

    # The Python workers must be this interpreter, not the system's python without our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Local mode: the driver on loopback, not on whatever address the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.jars", ",".join(str(j) for j in connector_jars()))
               .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
