"""Kafka's own Java client (kafka-clients 4.4) as Java applications and Spark use it: java/JavaClient.java,
compiled once per source version, run once per scenario group (one JVM each), its JSON lines checked
here, the same on Samsa and on Kafka.

Scenarios: the default (idempotent) producer with lz4 and zstd read back; consumer groups with the
classic protocol and with group.protocol=consumer; assign/seek/position/seekToEnd/offsetsForTimes;
the Admin client; transactions with sendOffsetsToTransaction, commit and abort seen by
read_committed; createAcls/describeAcls on a broker with an authorizer.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import class_sharing
from kafka_oracle import CACHE, JVM_OPTS, OracleUnavailable, class_path, java

JAVA_DIR = Path(__file__).resolve().parent / "java"
SOURCES = sorted(JAVA_DIR.glob("*.java"))
RUN_TIMEOUT = 180
# The client's log4j2 (on Kafka's class path) to stderr: stdout carries only the JSON lines.
LOG4J2 = ("status = warn\nappender.err.type = Console\nappender.err.name = err\nappender.err.target = SYSTEM_ERR\n"
          "appender.err.layout.type = PatternLayout\nappender.err.layout.pattern = %d %p %m (%c)%n\n"
          "rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = err\n")


@pytest.fixture(scope="session")
def java_client() -> list[str]:
    """The command that runs JavaClient (its scenario, bootstrap and prefix follow), compiled into
    $SAMSA_CACHE/java-build/<hash of the sources> unless already there."""
    try:
        kafka_jars = class_path("kafka4")
        java_bin = java()
    except OracleUnavailable as e:
        pytest.skip(str(e))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in SOURCES)).hexdigest()[:16]
    build = CACHE / "java-build" / digest
    if not (build / "JavaClient.class").is_file():
        tmp = build.with_name(f"{digest}.tmp-{uuid.uuid4().hex[:6]}")
        tmp.mkdir(parents=True)
        javac = os.environ.get("JAVAC") or str(Path(java_bin).resolve().with_name("javac"))
        done = subprocess.run([javac, "-d", str(tmp), "-cp", kafka_jars, *map(str, SOURCES)],
                              capture_output=True, text=True, timeout=RUN_TIMEOUT)
        assert done.returncode == 0, f"javac failed:\n{done.stderr}"
        (tmp / "log4j2.properties").write_text(LOG4J2)
        try:
            tmp.rename(build)  # atomic: a concurrent session compiling the same sources loses nothing
        except OSError:  # that session was first: its build is the same
            shutil.rmtree(tmp, ignore_errors=True)
    # Kafka's jars first: a JVM maps the shared class archive only if its class path begins with
    # the archive's.
    return [java_bin, *JVM_OPTS, *class_sharing.options("kafka4"),
            f"-Dlog4j2.configurationFile={build / 'log4j2.properties'}", "-cp", f"{kafka_jars}:{build}", "JavaClient"]


def run(java_client: list[str], scenario: str, bootstrap: str) -> dict[str, list[dict]]:
    """The scenario's JSON lines, by check name; the run's random name prefix reads "P"."""
    prefix = f"java-{scenario}-{uuid.uuid4().hex[:8]}"
    done = subprocess.run([*java_client, scenario, bootstrap, prefix], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT)
    assert done.returncode == 0, f"JavaClient {scenario} exited {done.returncode}:\n{done.stderr[-6000:]}"
    checks: dict[str, list[dict]] = {}
    for line in done.stdout.replace(prefix, "P").splitlines():
        d = json.loads(line)
        checks.setdefault(d.pop("check"), []).append(d)
    return checks


def body(i: int, prefix: str = "v") -> str:
    return f"{prefix}-{i}-" + "the quick brown fox jumps over the lazy dog " * (1 + i % 10)


def test_idempotent_producer_lz4_zstd(broker, java_client):
    lines = run(java_client, "produce", broker.bootstrap)["produce"]
    assert [d["codec"] for d in lines] == ["lz4", "zstd"]
    for d in lines:
        assert d["offsets"] == [i // 2 for i in range(40)]  # record i to partition i % 2
        read = sorted(d["read"], key=lambda r: int(r["key"][2:]))
        assert [(r["partition"], r["offset"], r["key"], r["value"], r["timestamp"], r["headers"]) for r in read] == [
            (i % 2, i // 2, f"k-{i}", body(i), i * 1000, [f"i={i}"]) for i in range(40)]
        # Idempotent by default: the broker holds one producer's state, sequences 0..19, per partition.
        assert d["producers"] == {
            f"P-{d['codec']}-{p}": [{"epoch": 0, "last_sequence": 19, "has_id": True}] for p in (0, 1)}


def test_consumer_groups_classic_and_consumer_protocol(broker, java_client):
    lines = run(java_client, "groups", broker.bootstrap)["group"]
    assert [d["protocol"] for d in lines] == ["classic", "consumer"]
    for d in lines:
        protocol = d["protocol"]
        assert sorted(d["first"], key=lambda v: int(v[2:])) == [f"v-{i}" for i in range(30)]
        assert d["assignment"] == [f"P-{protocol}-{p}" for p in range(3)]
        assert sorted(d["committed"].values()) == [10, 10, 10]
        # The group's next member resumes at the commit: only what came after it.
        assert sorted(d["second"], key=lambda v: int(v[2:])) == [f"v-{i}" for i in range(30, 36)]


def test_assign_seek_position_offsets_for_times(broker, java_client):
    (d,) = run(java_client, "seek", broker.bootstrap)["seek"]
    assert d == {"at_beginning": 0, "after_seek": 5, "first_offset": 5, "count": 15, "after_poll": 20,
                 "at_end": 20, "after_seek_metadata": 12, "for_time": 7, "for_time_ts": 7000,
                 "for_between": 8, "for_future": None, "beginning": 0, "end": 20}


def test_admin_client(broker, java_client):
    c = {k: v if len(v) > 1 else v[0] for k, v in run(java_client, "admin", broker.bootstrap).items()}
    cluster = c["describe_cluster"]
    assert cluster["cluster_id"] and cluster["node_ids"] == [0] and cluster["node_ports"] == [broker.port]
    assert cluster["controller_in_nodes"]
    assert c["create_topics"] == {"again": "TopicExistsException"}
    topic = c["describe_topics"]
    assert (topic["internal"], topic["topic_id_set"]) == (False, True)
    assert (topic["partitions"], topic["leaders"], topic["replicas"], topic["isr"]) == (
        [0, 1, 2], [0, 0, 0], [1, 1, 1], [1, 1, 1])
    # [value, source, read-only, sensitive]
    assert c["describe_configs"]["entries"] == {
        "retention.ms": ["3600000", "DYNAMIC_TOPIC_CONFIG", False, False],
        "cleanup.policy": ["delete", "DYNAMIC_TOPIC_CONFIG", False, False],
        "segment.bytes": ["1073741824", "DEFAULT_CONFIG", False, False]}
    assert c["incremental_alter_configs"]["entries"] == {
        "retention.ms": ["7200000", "DYNAMIC_TOPIC_CONFIG", False, False],
        "cleanup.policy": ["delete", "DEFAULT_CONFIG", False, False],
        "segment.ms": ["600000", "DYNAMIC_TOPIC_CONFIG", False, False]}
    assert c["create_partitions"] == {"partitions": 5}
    assert c["delete_records"] == {"low_watermark": 4}
    # [offset, timestamp - base] for 10 records at base + i s, the first 4 deleted; no transaction,
    # so read_committed answers the same.
    expected = {"earliest": [4, -1], "latest": [10, -1], "max_timestamp": [9, 9000], "for_timestamp": [6, 6000],
                "earliest_local": [4, -1]}
    assert c["list_offsets"]["answers"] == {"read_uncommitted": expected, "read_committed": expected}
    assert c["list_consumer_groups"] == {
        "consumed": 6, "groups": [{"state": "Stable", "type": "Classic", "simple": False}]}
    live, empty = c["describe_consumer_groups"]
    (member,) = live["live"].pop("members")
    assert live["live"] == {"state": "Stable", "type": "Classic", "simple": False, "assignor": "range",
                            "coordinator": 0}
    assert (member["client_id_set"], member["member_id_set"]) == (True, True)
    assert member["assignment"] == [f"P-admin-{p}" for p in range(5)]
    assert empty["empty"] == {"state": "Empty", "type": "Classic", "simple": False, "assignor": "",
                              "coordinator": 0, "members": []}
    assert c["list_consumer_group_offsets"]["offsets"] == {"P-admin-0": 10, **{f"P-admin-{p}": 0 for p in (1, 2, 3, 4)}}
    altered = c["alter_consumer_group_offsets"]
    assert altered["offsets"] == {"P-admin-0": 5, **{f"P-admin-{p}": 0 for p in (1, 2, 3, 4)}}
    assert altered["metadata"] == "moved"
    assert c["resume_after_alter"] == {"values": [f"v-{i}" for i in range(5, 10)]}


def test_transactions_send_offsets_commit_abort(broker, java_client):
    c = run(java_client, "transactions", broker.bootstrap)
    committed = [f"committed-{i}" for i in range(10)]
    aborted = [f"aborted-{i}" for i in range(5)]
    opened = [f"open-{i}" for i in range(3)]
    # 10 committed (0-9, marker 10), 5 aborted (11-15, marker 16), 3 in the open transaction (17-19).
    (open_,) = c["while_open"]
    assert open_["latest"] == {"read_uncommitted": 20, "read_committed": 17}
    assert open_["seen"] == {"read_committed": committed, "end": 17}
    (done,) = c["transactions"]
    assert done["seen"] == {
        "read_committed": {"values": committed + opened, "offsets": [*range(10), 17, 18, 19], "end": 21},
        "read_uncommitted": {"values": committed + aborted + opened,
                             "offsets": [*range(10), *range(11, 16), 17, 18, 19], "end": 21}}
    # The aborted transaction's offset (3) was dropped with it: the group stays at the committed 10.
    assert done["group_offsets"] == {"P-in-0": 10}


AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


def test_create_describe_acls(broker_factory, java_client):
    b = broker_factory(overrides=AUTHORIZER)
    c = run(java_client, "acls", b.bootstrap)
    (acls,) = c["describe_acls"]
    alice_topic = "TOPIC P-acl LITERAL User:alice * READ ALLOW"
    alice_group = "GROUP P-g LITERAL User:alice 127.0.0.1 READ ALLOW"
    bob_prefix = "TOPIC P- PREFIXED User:bob * WRITE DENY"
    assert acls == {
        "any": [alice_group, bob_prefix, alice_topic],
        "topic_literal": [alice_topic],
        "topic_match": [bob_prefix, alice_topic],
        "alice": [alice_group, alice_topic]}
    assert c["acl_enforced"] == [{"produce_error": "TopicAuthorizationException"}]
