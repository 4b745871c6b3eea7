"""Log compaction seen by confluent-kafka: keyed records and tombstones produced to a
cleanup.policy=compact topic read back, once the log cleaner has run, as the latest value of each
key at the offset it was written at; tombstones go after delete.retention.ms; a record without
key is refused."""

from __future__ import annotations

import time

import pytest
from compat_util import create_topic, wait_for
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

T = 15  # seconds: bound on every single client call
CLEANED_WITHIN = 60  # seconds: generous, the cleaner looks every 100 ms
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01",
             "delete.retention.ms": "500"}


def produce(bootstrap: str, topic: str, records, **extra) -> dict[bytes, int]:
    """Produce (key, value) pairs in order; returns each key's last offset."""
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "compression.type": "lz4",
            "batch.size": 1000, "message.timeout.ms": T * 1000}  # batches well under segment.bytes
    conf.update(extra)
    producer = Producer(conf)
    reports = []
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0,
                         on_delivery=lambda err, msg: reports.append((err, msg.key(), msg.offset())))
    assert producer.flush(T) == 0
    assert [err for err, _, _ in reports if err is not None] == []
    return {key: offset for _, key, offset in sorted(reports, key=lambda r: r[2])}


def read_from_beginning(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record, from the log start to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + T
        while time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error():
                    if message.error().code() == KafkaError._PARTITION_EOF:
                        return out
                    raise AssertionError(f"consume error: {message.error()}")
                out.append((message.offset(), message.key(), message.value()))
        raise AssertionError(f"no end of partition within {T}s")
    finally:
        consumer.close()


@pytest.mark.samsa_only("segment.bytes 2048: Kafka 4.x refuses less than 1 MB (INVALID_CONFIG), Samsa takes it")
def test_a_consumer_from_the_beginning_sees_the_latest_value_of_each_key(broker_factory, topic_name):
    broker = broker_factory(overrides={"log.cleaner.backoff.ms": 100})
    create_topic(broker.bootstrap, topic_name, config=COMPACTED)
    keys = [b"key-%d" % i for i in range(10)]
    # An idempotent producer whose last batch is overwritten later: the cleaner keeps it empty.
    produce(broker.bootstrap, topic_name, [(key, b"first " + key * 4) for key in keys],
            **{"enable.idempotence": True, "linger.ms": 0})
    updates = [(key, b"round %d of %s" % (r, key * 4)) for r in range(5) for key in keys]
    deletes = [(key, None) for key in keys[8:]]
    last = produce(broker.bootstrap, topic_name, updates + deletes)
    # Unique keys after them, so the updates are in segments the cleaner may clean.
    fillers = [(b"filler-%03d" % i, b"x" * 100) for i in range(60)]
    last.update(produce(broker.bootstrap, topic_name, fillers))
    latest = {key: value for key, value in updates + deletes + fillers}
    expected = sorted((last[key], key, value) for key, value in latest.items())

    def compacted():
        seen = read_from_beginning(broker.bootstrap, topic_name)
        return seen if len({key for _, key, _ in seen}) == len(seen) else None
    seen = wait_for(compacted, CLEANED_WITHIN, interval=0.5, what="a compacted log")
    # The newest fillers are in the active segment; everything else is one record a key.
    assert seen == expected

    # Past delete.retention.ms, the next pass (new data makes the log dirty again) drops the tombstones.
    time.sleep(0.6)
    more = [(b"late-%03d" % i, b"y" * 100) for i in range(60)]
    last.update(produce(broker.bootstrap, topic_name, more))
    expected = sorted((last[key], key, value) for key, value in {**latest, **dict(more)}.items() if value is not None)
    wait_for(lambda: read_from_beginning(broker.bootstrap, topic_name) == expected, CLEANED_WITHIN, interval=0.5,
             what="tombstones removed")


def test_a_record_without_key_is_refused(broker_factory, topic_name):
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "message.timeout.ms": T * 1000,
                         "retries": 0})
    errors = []
    producer.produce(topic_name, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert producer.flush(T) == 0
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD
