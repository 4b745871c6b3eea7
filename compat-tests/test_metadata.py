"""Metadata: automatic topic creation (and when it must not happen), unknown-topic errors with
auto-creation off, topic ids (unique, stable across restarts, new after re-creation)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from compat_util import confluent_admin, confluent_consume_all, create_topic, wait_for
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, Uuid
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka import errors as KErrors
from kafka.admin import OffsetSpec

T = 15


def topic_id(bootstrap, name):
    admin = confluent_admin(bootstrap)
    return str(admin.describe_topics(TopicCollection([name]), request_timeout=T)[name].result(T).topic_id)


def topic_exists(bootstrap, name) -> bool:
    return name in confluent_admin(bootstrap).list_topics(timeout=5).topics


def test_auto_create_on_produce(broker_factory, topic_name):
    b = broker_factory({"auto.create.topics.enable": "true", "num.partitions": 3})
    # confluent-kafka: a producer's metadata request creates the topic with num.partitions.
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "message.timeout.ms": 10000})
    reports = []
    for i in range(6):
        p.produce(topic_name, b"v%d" % i, key=b"k%d" % i, on_delivery=lambda e, m: reports.append((e, m.partition())))
    assert p.flush(T) == 0
    assert all(e is None for e, _ in reports), reports
    md = confluent_admin(b.bootstrap).list_topics(topic=topic_name, timeout=5).topics[topic_name]
    assert md.error is None and sorted(md.partitions) == [0, 1, 2]
    assert topic_id(b.bootstrap, topic_name) != str(Uuid(0, 0))

    # kafka-python's producer too.
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=T * 1000, enable_idempotence=False)
    try:
        meta = kp.send(topic_name + "-kp", b"x", partition=2).get(T)
        assert meta.offset == 0
    finally:
        kp.close(T)
    assert len(confluent_admin(b.bootstrap).list_topics(topic=topic_name + "-kp", timeout=5)
               .topics[topic_name + "-kp"].partitions) == 3

    # A consumer's metadata request (allow_auto_topic_creation=false) must not create a topic.
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "compat-unused", "allow.auto.create.topics": False})
    try:
        t = c.list_topics(topic=topic_name + "-consumer", timeout=5).topics[topic_name + "-consumer"]
        assert t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    finally:
        c.close()
    assert not topic_exists(b.bootstrap, topic_name + "-consumer")


def test_unknown_topic_when_auto_create_off(broker_factory, topic_name):
    b = broker_factory({"auto.create.topics.enable": "false"})
    admin = confluent_admin(b.bootstrap)
    t = admin.list_topics(topic=topic_name, timeout=5).topics[topic_name]
    assert t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # confluent-kafka producer: the message fails, nothing is created.
    errs = []
    p = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 5000,
                  "topic.metadata.propagation.max.ms": 1000})
    p.produce(topic_name, b"lost", on_delivery=lambda e, m: errs.append(e))
    p.flush(T)
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), errs[0]

    # kafka-python producer: metadata never shows the topic.
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, max_block_ms=2000, enable_idempotence=False)
    try:
        with pytest.raises((KErrors.KafkaTimeoutError, KErrors.UnknownTopicOrPartitionError)):
            kp.send(topic_name, b"lost").get(5)
    finally:
        kp.close(5)

    # ListOffsets / DescribeConfigs on the missing topic.
    ka = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=T * 1000)
    try:
        with pytest.raises(KErrors.UnknownTopicOrPartitionError):
            ka.list_partition_offsets({TopicPartition(topic_name, 0): OffsetSpec.LATEST})
        d = ka.describe_topics([topic_name])[0]
        assert d["error_code"] == KErrors.UnknownTopicOrPartitionError.errno
    finally:
        ka.close()

    if shutil.which("kcat"):
        out = subprocess.run(["kcat", "-b", b.bootstrap, "-m", "10", "-L", "-J", "-t", topic_name],
                             capture_output=True, timeout=30)
        md = json.loads(out.stdout)
        assert md["topics"][0]["topic"] == topic_name
        assert "Unknown topic" in md["topics"][0].get("error", ""), md

    assert not topic_exists(b.bootstrap, topic_name)

    # Explicit creation still works.
    create_topic(b.bootstrap, topic_name, partitions=2)
    p2 = Producer({"bootstrap.servers": b.bootstrap})
    p2.produce(topic_name, b"kept", partition=1)
    assert p2.flush(T) == 0
    assert [m.value() for m in confluent_consume_all(b.bootstrap, topic_name, {1: 1})[1]] == [b"kept"]


def test_topic_ids_unique_stable_and_renewed(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=2, config={"retention.ms": "86400000"})
    create_topic(b.bootstrap, topic_name + "-other")
    tid = topic_id(b.bootstrap, topic_name)
    assert tid != topic_id(b.bootstrap, topic_name + "-other")

    # kafka-python sees the same id in its Metadata response.
    ka = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=T * 1000)
    try:
        kp_id = ka.describe_topics([topic_name])[0]["topic_id"]
    finally:
        ka.close()
    assert str(kp_id).replace("-", "") != "0" * 32

    # Still alive when the topic is deleted below: its metadata request for the vanished topic must
    # not create it again (Kafka's auto.create.topics.enable is true; CI once saw that recreation
    # land just before the test's own CreateTopics, which then failed with TOPIC_ALREADY_EXISTS).
    p = Producer({"bootstrap.servers": b.bootstrap, "allow.auto.create.topics": False})
    p.produce(topic_name, b"before restart", partition=1)
    assert p.flush(T) == 0

    b.restart()
    assert topic_id(b.bootstrap, topic_name) == tid, "topic id must survive a restart"
    md = confluent_admin(b.bootstrap).list_topics(topic=topic_name, timeout=5).topics[topic_name]
    assert sorted(md.partitions) == [0, 1]
    assert [m.value() for m in confluent_consume_all(b.bootstrap, topic_name, {1: 1})[1]] == [b"before restart"]

    admin = confluent_admin(b.bootstrap)
    admin.delete_topics([topic_name], operation_timeout=T)[topic_name].result(T)
    # Kafka's broker drops the topic once it has replayed the controller's record: a just-restarted
    # Kafka on a loaded machine took longer than T once.
    wait_for(lambda: not topic_exists(b.bootstrap, topic_name), 4 * T, what="topic deleted")
    create_topic(b.bootstrap, topic_name)
    assert topic_id(b.bootstrap, topic_name) != tid, "a re-created topic gets a new id"
