"""confluent-kafka (librdkafka 2.16) against a real broker: produce/consume with every codec,
admin operations, offsets by time, long-poll wake-up."""

from __future__ import annotations

import json
import statistics
import threading
import time

import pytest
from compat_util import (
    CODECS,
    by_partition,
    confluent_admin,
    confluent_consume_all,
    create_topic,
    make_records,
    wait_for,
)
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
    Uuid,
)
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

T = 15  # seconds: bound on every single client call


def producer(bootstrap, **extra):
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 15000, "socket.timeout.ms": 10000}
    conf.update(extra)
    return Producer(conf)


def produce_all(p: Producer, topic: str, recs, timeout: float = T):
    """Produce recs to their partitions; returns the delivery reports in produce order."""
    reports: list = [None] * len(recs)

    def cb(i):
        def on_delivery(err, msg):
            reports[i] = (err, msg.partition(), msg.offset(), msg.timestamp())
        return on_delivery

    for i, r in enumerate(recs):
        kw = {"headers": r.headers} if r.headers else {}
        p.produce(topic, value=r.value, key=r.key, partition=r.partition, timestamp=r.timestamp,
                  on_delivery=cb(i), **kw)
    left = p.flush(timeout)
    assert left == 0, f"{left} messages not delivered in {timeout}s"
    errs = [(i, rep) for i, rep in enumerate(reports) if rep is None or rep[0] is not None]
    assert not errs, f"delivery failures: {errs[:5]}"
    return reports


def msg_tuple(m):
    return (m.key(), m.value(), m.headers() or [], m.timestamp())


# -- produce / consume ---------------------------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    recs = make_records(40, partitions=2, seed=hash(codec) & 0xFFFF)
    p = producer(broker.bootstrap, **{"compression.type": codec})
    reports = produce_all(p, topic_name, recs)

    # Acknowledged offsets: consecutive from 0 in each partition, in produce order.
    per_part: dict[int, list[int]] = {}
    for r, (_, part, off, ts) in zip(recs, reports):
        assert part == r.partition
        assert ts == (TIMESTAMP_CREATE_TIME, r.timestamp)
        per_part.setdefault(part, []).append(off)
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), f"partition {part} acked offsets {offs}"

    expected = by_partition(recs)
    got = confluent_consume_all(broker.bootstrap, topic_name, {p_: len(v) for p_, v in expected.items()})
    for part, rs in expected.items():
        msgs = got[part]
        assert [m.offset() for m in msgs] == list(range(len(rs)))
        for m, r in zip(msgs, rs):
            assert m.topic() == topic_name
            assert msg_tuple(m) == (r.key, r.value, r.headers, (TIMESTAMP_CREATE_TIME, r.timestamp)), \
                f"partition {part} offset {m.offset()}"


def test_consume_from_middle_and_watermarks(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    recs = make_records(30, seed=7)
    produce_all(producer(broker.bootstrap, **{"compression.type": "lz4", "linger.ms": 50}), topic_name, recs)
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 13}, start=17)
    assert [m.offset() for m in got[0]] == list(range(17, 30))
    assert [m.value() for m in got[0]] == [r.value for r in recs[17:]]

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compat-unused"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=T) == (0, 30)
    finally:
        c.close()


def test_log_append_time_topic(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    recs = make_records(5, seed=3, base_ts=1_000_000_000_000)  # 2001: far from now
    reports = produce_all(producer(broker.bootstrap), topic_name, recs)
    after = int(time.time() * 1000)
    for _, _, _, (ts_type, ts) in reports:
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME
        assert before - 1000 <= ts <= after + 1000
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 5})
    for m, rep in zip(got[0], reports):
        assert m.timestamp() == rep[3], "consumer sees the broker's append time"


def test_idempotent_producer(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    recs = make_records(20, seed=11)
    p = producer(broker.bootstrap, **{"enable.idempotence": True, "compression.type": "gzip"})
    reports = produce_all(p, topic_name, recs)
    assert [r[2] for r in reports] == list(range(20))
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 20})
    assert [m.value() for m in got[0]] == [r.value for r in recs]


def test_large_message_and_batch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    big = bytes(range(256)) * 3000  # 768 KB, under the default 1 MB max.message.bytes
    p = producer(broker.bootstrap, **{"compression.type": "none"})
    p.produce(topic_name, big, partition=0)
    for i in range(2000):
        p.produce(topic_name, b"small-%d" % i, partition=0)
    assert p.flush(T) == 0
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 2001})
    assert got[0][0].value() == big
    assert [m.value() for m in got[0][1:]] == [b"small-%d" % i for i in range(2000)]


def test_message_too_large_rejected(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": "10000"})
    errs = []
    p = producer(broker.bootstrap, **{"compression.type": "none", "message.max.bytes": 2_000_000})
    p.produce(topic_name, b"x" * 50_000, partition=0, on_delivery=lambda e, m: errs.append(e))
    assert p.flush(T) == 0
    assert errs and errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, errs


# -- admin -------------------------------------------------------------------------------------

def describe_topic_configs(admin, topic, settled: dict[str, str | None] | None = None):
    """A topic's configs; with `settled`, once those configs show those values (None: the default).
    Kafka applies an alter to its brokers' metadata after answering it, so a describe right after
    may still show the old value; clients wait for it, as Kafka's own tests do."""
    res = ConfigResource(ResourceType.TOPIC, topic)

    def describe():
        return admin.describe_configs([res], request_timeout=T)[res].result(T)

    def shows_settled():
        entries = describe()
        return all((entries[k].is_default if v is None else entries[k].value == v) for k, v in settled.items()) \
            and entries

    return wait_for(shows_settled, T, what=f"{topic} configs {settled}") if settled else describe()


def test_create_topic_with_partitions_and_configs(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    cfg = {"retention.ms": "123456789", "cleanup.policy": "compact", "max.message.bytes": "200000"}
    admin.create_topics([NewTopic(topic_name, 3, 1, config=cfg)], operation_timeout=T)[topic_name].result(T)

    def topic_with_3_partitions():
        t = admin.list_topics(topic=topic_name, timeout=5).topics.get(topic_name)
        return t if t and t.error is None and len(t.partitions) == 3 else None

    md = wait_for(topic_with_3_partitions, T, what="3 partitions")
    node_ids = set(admin.list_topics(timeout=5).brokers)
    for pm in md.partitions.values():
        assert pm.leader in node_ids
        assert pm.replicas == [pm.leader] and pm.isrs == [pm.leader]

    entries = describe_topic_configs(admin, topic_name)
    for k, v in cfg.items():
        assert entries[k].value == v
        assert entries[k].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        assert not entries[k].is_default
    # Defaults that Kafka reports for every topic.
    assert entries["segment.bytes"].value == "1073741824"
    assert entries["segment.bytes"].is_default
    assert entries["min.insync.replicas"].value == "1"

    # The configs take effect: a compacted topic refuses records without a key.
    errs = {}
    p = producer(broker.bootstrap)
    p.produce(topic_name, b"no key", partition=0, on_delivery=lambda err, m: errs.__setitem__(m.value(), err))
    p.produce(topic_name, b"keyed", key=b"k", partition=1, on_delivery=lambda err, m: errs.__setitem__(m.value(), err))
    assert p.flush(T) == 0
    assert errs[b"no key"] is not None and errs[b"no key"].code() == KafkaError.INVALID_RECORD, errs
    assert errs[b"keyed"] is None, errs

    # Creating it again: TOPIC_ALREADY_EXISTS.
    with pytest.raises(KafkaException) as ei:
        admin.create_topics([NewTopic(topic_name, 1, 1)], operation_timeout=T)[topic_name].result(T)
    assert ei.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_create_topic_errors(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)

    def create(name, *args, **kw):
        return admin.create_topics([NewTopic(name, *args, **kw)], operation_timeout=T)[name]

    cases = [
        (topic_name + "-rf", dict(num_partitions=1, replication_factor=3), KafkaError.INVALID_REPLICATION_FACTOR),
        (topic_name + "-cfg", dict(num_partitions=1, replication_factor=1, config={"retention.ms": "soon"}),
         KafkaError.INVALID_CONFIG),
        (topic_name + "-unk", dict(num_partitions=1, replication_factor=1, config={"no.such.config": "1"}),
         KafkaError.INVALID_CONFIG),
        ("bad/name", dict(num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
        ("x" * 250, dict(num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
    ]
    for name, kw, code in cases:
        with pytest.raises(KafkaException) as ei:
            create(name, **kw).result(T)
        assert ei.value.args[0].code() == code, (name, kw, ei.value)

    # validate_only: answers success, creates nothing.
    fut = admin.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True, operation_timeout=T)[topic_name]
    assert fut.result(T) is None
    assert topic_name not in admin.list_topics(timeout=5).topics


def test_delete_topics(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(producer(broker.bootstrap), topic_name, make_records(4, partitions=2))
    admin.delete_topics([topic_name], operation_timeout=T)[topic_name].result(T)
    wait_for(lambda: topic_name not in admin.list_topics(timeout=5).topics, T, what="topic gone")

    with pytest.raises(KafkaException) as ei:
        admin.delete_topics([topic_name], operation_timeout=T)[topic_name].result(T)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # Re-created under the same name, it starts empty at offset 0 with a new topic id.
    create_topic(broker.bootstrap, topic_name)
    reports = produce_all(producer(broker.bootstrap), topic_name, make_records(2))
    assert [r[2] for r in reports] == [0, 1]


def test_create_partitions(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin.create_partitions([NewPartitions(topic_name, 5)], operation_timeout=T)[topic_name].result(T)
    wait_for(lambda: len(admin.list_topics(topic=topic_name, timeout=5).topics[topic_name].partitions) == 5,
             T, what="5 partitions")
    # The new partitions take data.
    recs = make_records(10, partitions=5)
    reports = produce_all(producer(broker.bootstrap), topic_name, recs)
    assert sorted({r[1] for r in reports}) == [0, 1, 2, 3, 4]
    got = confluent_consume_all(broker.bootstrap, topic_name, {4: 2})
    assert [m.value() for m in got[4]] == [r.value for r in recs if r.partition == 4]

    for count, code in [(3, KafkaError.INVALID_PARTITIONS), (5, KafkaError.INVALID_PARTITIONS)]:
        with pytest.raises(KafkaException) as ei:
            admin.create_partitions([NewPartitions(topic_name, count)], operation_timeout=T)[topic_name].result(T)
        assert ei.value.args[0].code() == code, (count, ei.value)
    missing = topic_name + "-missing"
    with pytest.raises(KafkaException) as ei:
        admin.create_partitions([NewPartitions(missing, 3)], operation_timeout=T)[missing].result(T)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_topic_and_broker(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name)
    entries = describe_topic_configs(admin, topic_name)
    expected_defaults = {
        "cleanup.policy": "delete",
        "retention.ms": "604800000",
        "retention.bytes": "-1",
        "segment.bytes": "1073741824",
        "max.message.bytes": "1048588",
        "message.timestamp.type": "CreateTime",
        "compression.type": "producer",
        "min.insync.replicas": "1",
    }
    for k, v in expected_defaults.items():
        assert k in entries, f"{k} missing from DescribeConfigs"
        assert entries[k].value == v, k
        assert not entries[k].is_sensitive
        if k == "min.insync.replicas":
            # Kafka 4.x (KIP-966, ELR on) writes the cluster-wide default min.insync.replicas
            # when the cluster is formatted, and Samsa on fresh log dirs: a dynamic default.
            assert entries[k].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, entries[k]
        else:
            assert entries[k].is_default, k

    node_id = admin.describe_cluster(request_timeout=T).result(T).nodes[0].id
    res = ConfigResource(ResourceType.BROKER, str(node_id))
    bentries = admin.describe_configs([res], request_timeout=T)[res].result(T)
    assert bentries["num.partitions"].value == "1"
    assert bentries["auto.create.topics.enable"].value == "true"
    assert "log.dirs" in bentries or "log.dir" in bentries

    missing = ConfigResource(ResourceType.TOPIC, topic_name + "-missing")
    with pytest.raises(KafkaException) as ei:
        admin.describe_configs([missing], request_timeout=T)[missing].result(T)
    assert ei.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_whole_set(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "1000000"})
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.ms": "3600000"})
    admin.alter_configs([res], request_timeout=T)[res].result(T)
    entries = describe_topic_configs(admin, topic_name, settled={"segment.ms": "3600000", "retention.ms": None})
    assert entries["segment.ms"].value == "3600000" and not entries["segment.ms"].is_default
    # Legacy AlterConfigs replaces the topic's whole set: retention.ms went back to its default.
    assert entries["retention.ms"].value == "604800000" and entries["retention.ms"].is_default

    bad = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.ms": "often"})
    with pytest.raises(KafkaException) as ei:
        admin.alter_configs([bad], request_timeout=T)[bad].result(T)
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_incremental_alter_configs(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "1000000"})

    def alter(*entries):
        res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=list(entries))
        return admin.incremental_alter_configs([res], request_timeout=T)[res].result(T)

    alter(ConfigEntry("segment.ms", "3600000", incremental_operation=AlterConfigOpType.SET))
    e = describe_topic_configs(admin, topic_name, settled={"segment.ms": "3600000"})
    assert e["segment.ms"].value == "3600000"
    assert e["retention.ms"].value == "1000000", "incremental alter keeps the other settings"

    alter(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    e = describe_topic_configs(admin, topic_name, settled={"retention.ms": None})
    assert e["retention.ms"].value == "604800000" and e["retention.ms"].is_default
    assert e["segment.ms"].value == "3600000"

    alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND))
    e = describe_topic_configs(admin, topic_name, settled={"cleanup.policy": "delete,compact"})
    assert e["cleanup.policy"].value == "delete,compact"
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    e = describe_topic_configs(admin, topic_name, settled={"cleanup.policy": "compact"})
    assert e["cleanup.policy"].value == "compact"

    with pytest.raises(KafkaException) as ei:
        alter(ConfigEntry("max.message.bytes", "lots", incremental_operation=AlterConfigOpType.SET))
    assert ei.value.args[0].code() == KafkaError.INVALID_CONFIG

    # The changed setting takes effect: a message over the new limit is rejected.
    alter(ConfigEntry("max.message.bytes", "5000", incremental_operation=AlterConfigOpType.SET))
    describe_topic_configs(admin, topic_name, settled={"max.message.bytes": "5000"})
    errs = []
    p = producer(broker.bootstrap, **{"compression.type": "none"})
    p.produce(topic_name, b"y" * 20_000, key=b"k", partition=0, on_delivery=lambda err, m: errs.append(err))
    assert p.flush(T) == 0
    assert errs[0] is not None and errs[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_delete_records(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    recs = make_records(20, partitions=2)
    produce_all(producer(broker.bootstrap), topic_name, recs)  # 10 per partition

    futs = admin.delete_records([TopicPartition(topic_name, 0, 4), TopicPartition(topic_name, 1, -1)],
                                request_timeout=T, operation_timeout=T)
    lows = {tp.partition: f.result(T).low_watermark for tp, f in futs.items()}
    assert lows == {0: 4, 1: 10}

    offs = admin.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.earliest(),
                               TopicPartition(topic_name, 1): OffsetSpec.earliest()}, request_timeout=T)
    assert {tp.partition: f.result(T).offset for tp, f in offs.items()} == {0: 4, 1: 10}

    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 6}, start=4)
    assert [m.value() for m in got[0]] == [r.value for r in recs if r.partition == 0][4:]

    # Fetching below the log start: OFFSET_OUT_OF_RANGE, reset to earliest lands on 4.
    got = confluent_consume_all(broker.bootstrap, topic_name, {0: 6}, start=0,
                                extra={"auto.offset.reset": "earliest"})
    assert got[0][0].offset() == 4

    # Beyond the high watermark: OFFSET_OUT_OF_RANGE.
    futs = admin.delete_records([TopicPartition(topic_name, 0, 11)], request_timeout=T, operation_timeout=T)
    with pytest.raises(KafkaException) as ei:
        list(futs.values())[0].result(T)
    assert ei.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster(broker):
    admin = confluent_admin(broker.bootstrap)
    desc = admin.describe_cluster(request_timeout=T).result(T)
    assert desc.cluster_id, "cluster id must be set"
    assert len(desc.nodes) == 1
    node = desc.nodes[0]
    assert (node.host, node.port) == ("127.0.0.1", broker.port)
    assert desc.controller is not None and desc.controller.id == node.id
    md = admin.list_topics(timeout=5)
    assert md.cluster_id == desc.cluster_id
    assert list(md.brokers) == [node.id]
    assert md.controller_id == node.id


def test_describe_topics_topic_ids(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name, partitions=3)
    create_topic(broker.bootstrap, topic_name + "-b")
    descs = admin.describe_topics(TopicCollection([topic_name, topic_name + "-b"]), request_timeout=T)
    d1, d2 = descs[topic_name].result(T), descs[topic_name + "-b"].result(T)
    zero = Uuid(0, 0)
    assert str(d1.topic_id) != str(zero) and str(d2.topic_id) != str(zero)
    assert str(d1.topic_id) != str(d2.topic_id)
    assert [p.id for p in d1.partitions] == [0, 1, 2]
    assert not d1.is_internal


def test_list_offsets_by_time(broker, topic_name):
    admin = confluent_admin(broker.bootstrap)
    create_topic(broker.bootstrap, topic_name)
    base = (int(time.time()) - 7200) * 1000
    # Offsets 0..5 with non-monotonic timestamps; the maximum is at offset 3.
    stamps = [base + 1000, base + 5000, base + 3000, base + 9000, base + 2000, base + 7000]
    p = producer(broker.bootstrap, **{"linger.ms": 0})
    for i, ts in enumerate(stamps):
        p.produce(topic_name, b"v%d" % i, partition=0, timestamp=ts)
        if i % 2:
            p.flush(T)  # some in one batch, some in separate batches
    assert p.flush(T) == 0
    tp = TopicPartition(topic_name, 0)

    def lookup(spec):
        r = admin.list_offsets({tp: spec}, request_timeout=T)[tp].result(T)
        return r.offset, r.timestamp

    assert lookup(OffsetSpec.earliest())[0] == 0
    assert lookup(OffsetSpec.latest())[0] == 6
    assert lookup(OffsetSpec.max_timestamp()) == (3, base + 9000)
    # The first offset whose timestamp is >= the one asked for.
    assert lookup(OffsetSpec.for_timestamp(base))[0] == 0
    assert lookup(OffsetSpec.for_timestamp(base + 1000)) == (0, base + 1000)
    assert lookup(OffsetSpec.for_timestamp(base + 1001)) == (1, base + 5000)
    assert lookup(OffsetSpec.for_timestamp(base + 6000)) == (3, base + 9000)
    assert lookup(OffsetSpec.for_timestamp(base + 9001))[0] == -1

    missing = TopicPartition(topic_name + "-missing", 0)
    with pytest.raises(KafkaException) as ei:
        admin.list_offsets({missing: OffsetSpec.latest()}, request_timeout=T)[missing].result(T)
    # librdkafka finds no leader for a topic that Metadata says does not exist.
    assert ei.value.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._NOENT), ei.value


def test_offsets_for_times_consumer(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    recs = make_records(10, seed=5)
    produce_all(producer(broker.bootstrap, **{"compression.type": "snappy"}), topic_name, recs)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compat-unused"})
    try:
        res = c.offsets_for_times([TopicPartition(topic_name, 0, recs[6].timestamp)], timeout=T)
        assert res[0].offset == 6
    finally:
        c.close()


# -- long poll ---------------------------------------------------------------------------------

def fetch_counting_consumer(bootstrap, **conf):
    """An assign()-only consumer and a dict whose "n" follows how many Fetch requests librdkafka
    has sent (from its statistics, every 100 ms): the broker's long poll seen from the client."""
    fetches = {"n": 0}

    def on_stats(js):
        st = json.loads(js)
        fetches["n"] = sum(b.get("req", {}).get("Fetch", 0) for b in st.get("brokers", {}).values())

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False,
                  "statistics.interval.ms": 100, "stats_cb": on_stats, **conf})
    return c, fetches


def test_long_poll_wakes_on_produce(broker, topic_name):
    """A consumer parked in a long fetch (fetch.wait.max.ms=5000) gets a new record within 100 ms
    of the producer's acknowledgement."""
    create_topic(broker.bootstrap, topic_name)
    c, fetches = fetch_counting_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1,
                                                               "socket.timeout.ms": 20000})
    received: list[tuple[float, bytes]] = []
    stop = threading.Event()
    errors = []

    def run():
        while not stop.is_set():
            m = c.poll(0.01)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
                continue
            received.append((time.monotonic(), m.value()))

    c.assign([TopicPartition(topic_name, 0, 0)])
    th = threading.Thread(target=run, daemon=True)
    th.start()
    p = producer(broker.bootstrap, **{"linger.ms": 0})
    lat = []
    try:
        wait_for(lambda: fetches["n"] >= 1, T, what="first fetch")
        for i in range(5):
            time.sleep(0.3)  # let the consumer park in its long fetch
            acked = []
            p.produce(topic_name, b"ping-%d" % i, partition=0,
                      on_delivery=lambda err, m, acked=acked: acked.append((time.monotonic(), err)))
            assert p.flush(T) == 0 and acked[0][1] is None
            r = wait_for(lambda i=i: [x for x in received if x[1] == b"ping-%d" % i], 10, interval=0.001,
                         what=f"ping-{i}")
            lat.append(r[0][0] - acked[0][0])
    finally:
        stop.set()
        th.join(10)
        c.close()
    assert not errors, errors
    assert statistics.median(lat) < 0.1, f"receive minus ack latencies (s): {lat}"
    assert max(lat) < 1.0, f"receive minus ack latencies (s): {lat}"


def test_fetch_waits_for_data(broker, topic_name):
    """An empty partition: the broker holds each fetch for fetch.wait.max.ms instead of answering
    at once (a broker that does not would be asked hundreds of times)."""
    create_topic(broker.bootstrap, topic_name)
    c, fetches = fetch_counting_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 1000, "fetch.error.backoff.ms": 0})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        deadline = time.monotonic() + 10
        while fetches["n"] < 1 and time.monotonic() < deadline:
            c.poll(0.05)
        start_n, t0 = fetches["n"], time.monotonic()
        while time.monotonic() - t0 < 3.0:
            assert c.poll(0.05) is None
        n = fetches["n"] - start_n
    finally:
        c.close()
    assert 1 <= n <= 6, f"{n} fetch requests in 3 s with fetch.wait.max.ms=1000"
