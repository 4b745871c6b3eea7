"""kafka-python 3.0 against a real broker: produce/consume with every codec, its default
(idempotent) producer, admin operations incl. DescribeLogDirs, ListOffsets specs, long poll.
Tests of other features turn idempotence off so that each fails for its own feature only."""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest
from compat_util import CODECS, by_partition, make_records, wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors
from kafka.admin import (
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
    OffsetSpec,
)

T = 15


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=T * 1000,
                         client_id="compat-kafka-python")
    yield a
    a.close()


def producer(bootstrap, **extra):
    conf = dict(bootstrap_servers=bootstrap, acks="all", linger_ms=5, request_timeout_ms=T * 1000,
                max_block_ms=T * 1000, enable_idempotence=False)
    conf.update(extra)
    return KafkaProducer(**conf)


def consume(bootstrap, topic, counts: dict[int, int], start: int = 0, timeout: float = 20, **extra):
    """Read {partition: count} records from offset `start` with assign(): exactly that many."""
    conf = dict(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                fetch_max_wait_ms=100, request_timeout_ms=T * 1000, auto_offset_reset="earliest")
    conf.update(extra)
    c = KafkaConsumer(**conf)
    try:
        tps = [TopicPartition(topic, p) for p in counts]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, start)
        got = {p: [] for p in counts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in counts.items()):
            assert time.monotonic() < deadline, \
                f"consumed { {p: len(v) for p, v in got.items()} } of {counts} in {timeout}s"
            for tp, recs in c.poll(timeout_ms=500).items():
                got[tp.partition].extend(recs)
        more = c.poll(timeout_ms=300)
        assert not any(more.values()), f"more records than produced: {more}"
        return got
    finally:
        c.close()


def create(admin, name, partitions=1, configs=None):
    admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1,
                                "configs": configs or {}}})
    wait_for(lambda: _partitions(admin, name) == partitions, T, what=f"{name} with {partitions} partitions")


def _partitions(admin, name):
    d = admin.describe_topics([name])[0]
    return len(d["partitions"]) if d["error_code"] == 0 else None


def send_all(p, topic, recs):
    futs = [p.send(topic, value=r.value, key=r.key, headers=r.headers or None, partition=r.partition,
                   timestamp_ms=r.timestamp) for r in recs]
    p.flush(T)
    return [f.get(T) for f in futs]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, admin, topic_name, codec):
    create(admin, topic_name, partitions=2)
    recs = make_records(40, partitions=2, seed=3 + len(codec), null_header_values=False, allow_null_key_and_value=False)
    p = producer(broker.bootstrap, compression_type=None if codec == "none" else codec)
    try:
        metas = send_all(p, topic_name, recs)
    finally:
        p.close(T)
    per_part = {}
    for r, m in zip(recs, metas):
        assert m.partition == r.partition
        per_part.setdefault(m.partition, []).append(m.offset)
        assert m.timestamp == r.timestamp
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), f"partition {part} acked offsets {offs}"

    expected = by_partition(recs)
    got = consume(broker.bootstrap, topic_name, {p_: len(v) for p_, v in expected.items()})
    for part, rs in expected.items():
        assert [c.offset for c in got[part]] == list(range(len(rs)))
        for c, r in zip(got[part], rs):
            assert (c.key, c.value, list(c.headers or []), c.timestamp, c.timestamp_type) == \
                (r.key, r.value, r.headers, r.timestamp, 0), f"partition {part} offset {c.offset}"


def test_default_idempotent_producer(broker, admin, topic_name):
    """kafka-python 3.0 producers are idempotent unless told otherwise (InitProducerId, sequences)."""
    create(admin, topic_name)
    recs = make_records(10, seed=1, null_header_values=False, allow_null_key_and_value=False)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", max_block_ms=T * 1000,
                      request_timeout_ms=T * 1000)
    assert p.config["enable_idempotence"], "kafka-python's default changed"
    try:
        metas = send_all(p, topic_name, recs)
    finally:
        p.close(T)
    assert [m.offset for m in metas] == list(range(10))
    got = consume(broker.bootstrap, topic_name, {0: 10})
    assert [c.value for c in got[0]] == [r.value for r in recs]


def test_admin_topic_lifecycle(broker, admin, topic_name):
    res = admin.create_topics({topic_name: {"num_partitions": 3, "replication_factor": 1,
                                            "configs": {"retention.ms": "3600000"}}})
    t = res["topics"][0]
    assert t["error_code"] == 0 and t["num_partitions"] == 3 and t["replication_factor"] == 1
    assert t["topic_id"] and str(t["topic_id"]) != "00000000-0000-0000-0000-000000000000"
    wait_for(lambda: _partitions(admin, topic_name) == 3, T, what="3 partitions")
    assert topic_name in admin.list_topics()

    with pytest.raises(Errors.TopicAlreadyExistsError):
        admin.create_topics({topic_name: {"num_partitions": 1}})

    desc = admin.describe_topics([topic_name])[0]
    assert desc["topic_id"] == t["topic_id"]
    assert [p["partition_index"] for p in sorted(desc["partitions"], key=lambda p: p["partition_index"])] == [0, 1, 2]

    admin.create_partitions({topic_name: 4})
    wait_for(lambda: _partitions(admin, topic_name) == 4, T, what="4 partitions")
    with pytest.raises(Errors.InvalidPartitionsError):
        admin.create_partitions({topic_name: 2})

    admin.delete_topics([topic_name])
    wait_for(lambda: topic_name not in admin.list_topics(), T, what="topic deleted")
    with pytest.raises(Errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name])


def test_describe_and_alter_configs(broker, admin, topic_name):
    create(admin, topic_name, configs={"retention.ms": "3600000"})
    res = ConfigResource(ConfigResourceType.TOPIC, topic_name)

    def cfg(filter_="all"):
        return admin.describe_configs([res], config_filter=filter_)["topic"][topic_name]

    modified = cfg("modified")
    assert set(modified) == {"retention.ms"}, f"only retention.ms is set on the topic: {sorted(modified)}"
    assert modified["retention.ms"]["value"] == "3600000"
    assert modified["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    all_ = cfg("all")
    assert all_["cleanup.policy"]["value"] == "delete"
    assert all_["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    def alter(configs, incremental):
        r = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name, configs=configs)],
                                incremental=incremental)
        return r["topic"][topic_name]  # 'OK' or the error, as text: this call does not raise

    # Incremental: set one, keep the other.
    assert alter({"segment.ms": (AlterConfigOp.SET, "7200000")}, True) == "OK"
    m = cfg("modified")
    assert {k: v["value"] for k, v in m.items()} == {"retention.ms": "3600000", "segment.ms": "7200000"}

    assert alter({"retention.ms": (AlterConfigOp.DELETE, None)}, True) == "OK"
    m = cfg("modified")
    assert {k: v["value"] for k, v in m.items()} == {"segment.ms": "7200000"}

    # Legacy AlterConfigs (kafka-python re-sends the other modified keys, since the request replaces
    # the whole set of topic overrides).
    assert alter({"retention.bytes": "100000000"}, False) == "OK"
    m = cfg("modified")
    assert {k: v["value"] for k, v in m.items()} == {"retention.bytes": "100000000", "segment.ms": "7200000"}

    assert "InvalidConfigurationError" in alter({"retention.bytes": (AlterConfigOp.SET, "many")}, True)
    assert "InvalidConfigurationError" in alter({"retention.bytes": "many"}, False)
    assert cfg("modified")["retention.bytes"]["value"] == "100000000"

    cluster = admin.describe_cluster()
    bid = str(cluster["brokers"][0]["broker_id"])
    b = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, bid)], config_filter="all")["broker"][bid]
    assert b["auto.create.topics.enable"]["value"] == "true"
    assert b["log.retention.hours"]["value"] == "168"


def test_delete_records_and_list_offsets(broker, admin, topic_name):
    create(admin, topic_name)
    base = (int(time.time()) - 3600) * 1000
    stamps = [base + 10, base + 50, base + 30, base + 90, base + 20]
    p = producer(broker.bootstrap)
    try:
        for i, ts in enumerate(stamps):
            p.send(topic_name, b"v%d" % i, partition=0, timestamp_ms=ts).get(T)
    finally:
        p.close(T)
    tp = TopicPartition(topic_name, 0)

    def lo(spec):
        r = admin.list_partition_offsets({tp: spec})[tp]
        return r.offset, r.timestamp

    assert lo(OffsetSpec.EARLIEST)[0] == 0
    assert lo(OffsetSpec.LATEST)[0] == 5
    assert lo(OffsetSpec.MAX_TIMESTAMP) == (3, base + 90)
    assert lo(base + 25) == (1, base + 50)
    assert lo(base + 91)[0] == -1

    r = admin.delete_records({tp: 2})
    assert r[tp]["low_watermark"] == 2
    assert lo(OffsetSpec.EARLIEST)[0] == 2
    assert lo(OffsetSpec.LATEST)[0] == 5
    got = consume(broker.bootstrap, topic_name, {0: 3}, start=0)  # reset to the new start
    assert [c.offset for c in got[0]] == [2, 3, 4]
    with pytest.raises(Errors.OffsetOutOfRangeError):
        admin.delete_records({tp: 6})


def test_describe_cluster(broker, admin):
    c = admin.describe_cluster()
    assert c["cluster_id"]
    assert len(c["brokers"]) == 1
    b = c["brokers"][0]
    assert (b["host"], b["port"]) == ("127.0.0.1", broker.port)
    assert c["controller_id"] == b["broker_id"]


def test_describe_log_dirs(broker, admin, topic_name):
    create(admin, topic_name, partitions=2)
    payload = os.urandom(1000)
    p = producer(broker.bootstrap, compression_type=None)
    try:
        for _ in range(50):
            p.send(topic_name, payload, partition=0)
        p.flush(T)
    finally:
        p.close(T)
    out = admin.describe_log_dirs([topic_name])
    assert len(out) == 1
    dirs = out[0]["log_dirs"]
    assert len(dirs) == 1, dirs
    d = dirs[0]
    assert d["error_code"] == 0
    if not os.environ.get("SAMSA_COMPAT_BROKER_CMD"):
        assert os.path.realpath(d["log_dir"]) == os.path.realpath(broker.data_dir)
    topics = {t["name"]: t for t in d["topics"]}
    parts = {p_["partition_index"]: p_ for p_ in topics[topic_name]["partitions"]}
    assert set(parts) == {0, 1}
    assert parts[0]["partition_size"] >= 50 * 1000
    assert parts[0]["partition_size"] < 50 * 1000 * 2
    assert parts[1]["partition_size"] == 0
    assert parts[0]["offset_lag"] == 0


def test_long_poll_wakes_on_produce(broker, admin, topic_name):
    create(admin, topic_name)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                      fetch_max_wait_ms=5000, fetch_min_bytes=1, request_timeout_ms=30000)
    tp = TopicPartition(topic_name, 0)
    c.assign([tp])
    c.seek(tp, 0)
    received = []
    stop = threading.Event()
    polls = {"n": 0}

    def run():
        while not stop.is_set():
            for recs in c.poll(timeout_ms=50).values():
                for r in recs:
                    received.append((time.monotonic(), r.value))
            polls["n"] += 1

    th = threading.Thread(target=run, daemon=True)
    th.start()
    p = producer(broker.bootstrap, linger_ms=0)
    lat = []
    try:
        wait_for(lambda: polls["n"] >= 3, T, what="consumer polling")
        for i in range(5):
            time.sleep(0.3)
            p.send(topic_name, b"ping-%d" % i, partition=0).get(T)
            t_ack = time.monotonic()
            r = wait_for(lambda i=i: [x for x in received if x[1] == b"ping-%d" % i], 10, interval=0.001,
                         what=f"ping-{i}")
            lat.append(r[0][0] - t_ack)
    finally:
        stop.set()
        th.join(10)
        c.close()
        p.close(T)
    assert statistics.median(lat) < 0.1, f"receive minus ack latencies (s): {lat}"
    assert max(lat) < 1.0, f"receive minus ack latencies (s): {lat}"
