"""Class data sharing (AppCDS) for the JVMs the compatibility tests start on Kafka's class paths:
Kafka 4.4 and 3.9 brokers, ZooKeeper, `kafka-storage format`, Kafka's tools, the Java client.

Such a JVM spends most of its start loading, parsing and verifying thousands of classes from the
jars. With the profile's archive it maps them, already parsed and verified: a Kafka 4.4 start took
10-13 s instead of 22-31 s on a busy 2-core machine (the storage format 2-3 s instead of 6-7 s).

The archive is made once per JDK, jars and JVM options, in $SAMSA_CACHE/cds/: a training run (a
broker started, a few tools run against it, the broker stopped cleanly) writes the classes each
JVM loads (-XX:DumpLoadedClassList), then `java -Xshare:dump` archives their union; a lock file
lets one process build it while the others wait. A JVM whose class path does not begin with the
archive's, or whose jars changed since, runs without it (-Xshare:auto, silently): the archive
changes how fast a JVM starts, never what it does. `SAMSA_COMPAT_CDS=0` turns it off.

Plain Python, no pytest (kafka_oracle.py uses it, also by hand).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENABLED = os.environ.get("SAMSA_COMPAT_CDS", "1") != "0"
BUILD_TIMEOUT = 300

# profile -> its archive, or None where there is none (off, or the build failed): decided once
# per process.
_archives: dict[str, Path | None] = {}


def options(profile: str) -> list[str]:
    """The JVM options that map the profile's archive (building it first if needed), or none."""
    if not ENABLED:
        return []
    if profile not in _archives:
        _archives[profile] = _archive(profile)
    path = _archives[profile]
    return [f"-XX:SharedArchiveFile={path}", "-Xshare:auto"] if path else []


def _archive(profile: str) -> Path | None:
    import kafka_oracle as ko  # kafka_oracle imports this module: import it when first needed

    if profile not in TRAININGS:
        return None
    try:
        path = ko.CACHE / "cds" / f"{profile}-{_key(profile)}.jsa"
        if path.is_file():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.parent / f"{profile}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it right now
            if not path.is_file():
                _build(profile, path)
        return path
    except Exception as e:  # no archive only costs time
        sys.stderr.write(f"class_sharing: no archive for {profile}, JVMs start without one: {e!r}\n")
        return None


def _key(profile: str) -> str:
    """What the archive depends on: the JDK, the jars (names, sizes, times), the JVM options."""
    import kafka_oracle as ko

    java = Path(ko.java()).resolve()
    jvm = java.parent.parent / "lib" / "modules"  # the JDK's class image
    parts = [str(java), *(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in (java, jvm) if p.exists())]
    jars = sorted((ko.CACHE / profile).glob("*.jar"))
    parts += [f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in jars]
    parts += ko.JVM_OPTS
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _build(profile: str, path: Path) -> None:
    import kafka_oracle as ko

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"{profile}-", dir=path.parent) as tmp:
        work = Path(tmp)
        lists = work / "class-lists"
        lists.mkdir()
        TRAININGS[profile](work, lists)
        names: dict[str, None] = {}  # the union, in first-loaded order
        for f in sorted(lists.glob("*.lst")):
            for line in f.read_text(errors="replace").splitlines():
                if line and not line.startswith("#"):
                    names.setdefault(line)
        class_list = work / "classes.lst"
        class_list.write_text("".join(f"{n}\n" for n in names))
        partial = work / "archive.jsa"
        dump = subprocess.run([ko.java(), *ko.JVM_OPTS, "-Xshare:dump", f"-XX:SharedClassListFile={class_list}",
                               f"-XX:SharedArchiveFile={partial}", "-cp", ko.class_path(profile)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
        if dump.returncode != 0 or not partial.is_file():
            raise RuntimeError(f"java -Xshare:dump exited {dump.returncode}: {dump.stdout[-2000:]}"
                               f"{dump.stderr[-2000:]}")
        os.replace(partial, path)
    sys.stderr.write(f"class_sharing: built {path} ({len(names)} classes) in {time.monotonic() - started:.0f} s\n")


def class_list_option(lists: Path) -> str:
    """Where a training JVM writes the classes it loads: a file of its own in `lists`."""
    fd, name = tempfile.mkstemp(suffix=".lst", dir=lists)
    os.close(fd)
    return f"-XX:DumpLoadedClassList={name}"


def _train_kafka4(work: Path, lists: Path) -> None:
    """kafka-storage format, a Kafka 4.4 broker, and the tools the tests run most against it."""
    import kafka_oracle as ko

    broker = ko.KafkaBroker(work / "kafka")
    broker.class_lists = lists
    broker.start()
    try:
        topic = ["--topic", "class-sharing"]
        for main_class, args, stdin in [
            ("org.apache.kafka.tools.TopicCommand", ["--create", *topic, "--partitions", "1"], None),
            ("org.apache.kafka.tools.TopicCommand", ["--describe", *topic], None),
            ("org.apache.kafka.tools.ConsoleProducer", topic, "one\ntwo\n"),
            ("org.apache.kafka.tools.consumer.ConsoleConsumer",
             [*topic, "--from-beginning", "--max-messages", "2", "--group", "class-sharing", "--timeout-ms", "30000"],
             None),
            ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["--describe", "--group", "class-sharing"],
             None),
            ("org.apache.kafka.tools.ConfigCommand", ["--describe", "--entity-type", "topics", "--entity-name",
                                                      "class-sharing"], None),
        ]:
            subprocess.run([ko.java(), *ko.JVM_OPTS, class_list_option(lists), "-cp", ko.class_path("kafka4"),
                            main_class, "--bootstrap-server", broker.bootstrap, *args],
                           input=stdin or "", capture_output=True, text=True, timeout=120, cwd=work)
    finally:
        broker.stop(60)  # SIGTERM: a clean exit writes the broker's whole list


def _train_kafka39(work: Path, lists: Path) -> None:
    """ZooKeeper and a Kafka 3.9 broker in ZooKeeper mode."""
    import kafka_oracle as ko

    zookeeper = ko.ZooKeeper(work / "zookeeper")
    zookeeper.class_lists = lists
    zookeeper.start()
    try:
        broker = ko.ZkKafkaBroker(work / "kafka", zookeeper.connect)
        broker.class_lists = lists
        broker.start()
        broker.stop(60)
    finally:
        zookeeper.stop(60)


TRAININGS = {"kafka4": _train_kafka4, "kafka39": _train_kafka39}
