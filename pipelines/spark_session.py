"""A SparkSession for the pipelines, with Spark's Kafka connector on its class path.

The connector's jars (spark-sql-kafka-0-10_2.13 of pyspark's own version, its token provider,
kafka-clients, commons-pool2) come from Maven Central through scripts/fetch-jars.sh into
$SAMSA_CACHE/spark (default ~/.cache/samsa/spark) and reach the session as `spark.jars`: local
files, so a session never resolves packages at run time as `spark.jars.packages` would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path
from typing import BinaryIO, TextIO

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


# What the driver's JVM logs without -v: errors only. Spark's own default (its log4j2-defaults with
# the shell's level, WARN) prints a dozen WARN lines a run (NativeCodeLoader, AQE disabled, a batch
# falling behind, a producer that lost its broker at the end). PySpark's driver counts as a shell:
# Spark compares the level of its logger (PythonGatewayServer's) with the root's and, when they
# differ, prints "Setting default log level" to stderr; so that one is set too.
QUIET_LOG4J2 = """\
status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""
# A JVM started with an incubator module (Spark's launcher adds jdk.incubator.vector) says so on
# stderr, unconditionally: the one line no log level reaches.
JVM_NOTICES = (b"WARNING: Using incubator modules:",)


def local_session(app_name: str, master: str = "local[2]", extra: dict[str, str] | None = None,
                  verbose: bool = False):
    """A SparkSession on this machine. Shuffles use as many partitions as there are cores (the
    default 200 would make every windowed count run 200 tasks and keep 200 state stores), the time
    zone is UTC (the windows' JSON is read back by other programs) and no web UI is started.
    Without `verbose` the driver logs errors only and its JVM's start-up notice is left out;
    with it, Spark logs as it does by default (WARN and above)."""
    from pyspark.sql import SparkSession

    # The Python workers must be this interpreter, not the system's python without our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Local mode: the driver on loopback, not on whatever address the host name resolves to.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = DRIVER_JAVA_OPTIONS
    if not verbose:
        java_options += f" -Dlog4j2.configurationFile=file:{quiet_log4j2_file()}"
    settings = {"spark.master": master, "spark.app.name": app_name,
                "spark.jars": ",".join(str(j) for j in connector_jars()),
                "spark.driver.extraJavaOptions": java_options,
                "spark.sql.shuffle.partitions": "2",
                "spark.sql.session.timeZone": "UTC",
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                **(extra or {})}
    if not verbose:
        start_quiet_context(settings)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if verbose:
        session.sparkContext.setLogLevel("WARN")
    return session


def quiet_log4j2_file() -> Path:
    """QUIET_LOG4J2 in a file of its own (one per content, so concurrent runs share it safely)."""
    path = Path(tempfile.gettempdir()) / f"samsa-spark-log4j2-{zlib.crc32(QUIET_LOG4J2.encode()):08x}.properties"
    if not path.exists():
        fd, partial = tempfile.mkstemp(dir=path.parent, suffix=".partial")
        with os.fdopen(fd, "w") as file:
            file.write(QUIET_LOG4J2)
        os.replace(partial, path)
    return path


def start_quiet_context(settings: dict[str, str]) -> None:
    """The SparkContext (unless one runs already) on a driver JVM whose stderr passes through a
    thread that drops JVM_NOTICES and forwards every other line (errors among them)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._active_spark_context is not None:
        return
    conf = SparkConf().setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=forward_stderr, args=(gateway.proc.stderr, sys.stderr), daemon=True,
                     name="spark-driver-stderr").start()
    SparkContext(conf=conf, gateway=gateway)


def forward_stderr(source: BinaryIO, target: TextIO) -> None:
    """Every line of `source` but JVM_NOTICES to `target`, until `source` ends."""
    for line in source:
        if not line.startswith(JVM_NOTICES):
            target.write(line.decode(errors="replace"))
            target.flush()
