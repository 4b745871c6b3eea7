"""Durability: a 10 MB data set produced with acks=all survives kill -9 of the broker in the
middle of more produce traffic; after a restart on the same data dir every acknowledged record
is there, at its acknowledged offset, with its content, offsets are dense and appends continue
after them. (With the default flush policy, data in the page cache survives the death of the
process, so nothing acknowledged may be lost.)"""

from __future__ import annotations

import hashlib
import threading
import time

import pytest
from compat_util import create_topic, wait_for
from confluent_kafka import Consumer, Producer, TopicPartition

PARTITIONS = 3
RECORD = 1024
PHASE1_RECORDS = 10 * 1024  # 10 MB
T = 120


def payload(seq: int) -> bytes:
    """1 KB, deterministic from seq, half of it incompressible."""
    head = b"%010d|" % seq
    rnd = hashlib.sha256(head).digest() * 16  # 512 bytes
    return (head + rnd + b"x" * RECORD)[:RECORD]


class Acked:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_offset: dict[tuple[int, int], int] = {}  # (partition, offset) -> seq
        self.failed = 0
        self.duplicates: list[tuple[int, int]] = []

    def callback(self, seq):
        def on_delivery(err, msg):
            with self.lock:
                if err is None:
                    key = (msg.partition(), msg.offset())
                    if key in self.by_offset:
                        self.duplicates.append(key)
                    self.by_offset[key] = seq
                else:
                    self.failed += 1
        return on_delivery


def read_everything(bootstrap, topic, timeout=T):
    """{partition: [(offset, value)]} from offset 0 to the high watermark of each partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "compat-unused", "enable.auto.commit": False,
                  "auto.offset.reset": "error", "fetch.wait.max.ms": 100})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(PARTITIONS)}
        for p, (low, _high) in ends.items():
            assert low == 0, f"partition {p} starts at {low}"
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS) if ends[p][1] > 0])
        got = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < ends[p][1] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, \
                f"read { {p: len(v) for p, v in got.items()} } of high watermarks {ends}"
            for m in c.consume(1000, 0.5):
                assert not m.error(), m.error()
                got[m.partition()].append((m.offset(), m.value()))
        return got, {p: h for p, (_, h) in ends.items()}
    finally:
        c.close()


@pytest.mark.slow
def test_kill9_loses_nothing_acknowledged(broker_factory, topic_name):
    b = broker_factory()
    create_topic(b.bootstrap, topic_name, partitions=PARTITIONS)
    acked = Acked()
    conf = {"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "none",
            "message.timeout.ms": 60000, "queue.buffering.max.kbytes": 65536}

    # Phase 1: 10 MB, every record acknowledged.
    p = Producer(conf)
    for seq in range(PHASE1_RECORDS):
        while True:
            try:
                p.produce(topic_name, payload(seq), key=b"%d" % seq, partition=seq % PARTITIONS,
                          on_delivery=acked.callback(seq))
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(T) == 0, "phase 1 not delivered in time"
    assert acked.failed == 0 and len(acked.by_offset) == PHASE1_RECORDS

    # Phase 2: keep producing; kill -9 the broker once some more records are acknowledged.
    p2 = Producer({**conf, "message.timeout.ms": 5000, "retries": 0})
    stop = threading.Event()
    sent = {"n": 0}

    def produce_more():
        seq = PHASE1_RECORDS
        while not stop.is_set():
            try:
                p2.produce(topic_name, payload(seq), key=b"%d" % seq, partition=seq % PARTITIONS,
                           on_delivery=acked.callback(seq))
                seq += 1
                sent["n"] += 1
            except BufferError:
                pass
            p2.poll(0.001 if seq % 50 else 0.01)

    th = threading.Thread(target=produce_more, daemon=True)
    th.start()
    try:
        wait_for(lambda: len(acked.by_offset) >= PHASE1_RECORDS + 500, 60, what="500 more acknowledgements")
        b.kill()
    finally:
        stop.set()
        th.join(30)
    p2.flush(20)  # the rest fails or times out: the broker is gone
    acked_total = dict(acked.by_offset)
    assert not acked.duplicates, f"offsets acknowledged twice: {acked.duplicates[:5]}"
    assert len(acked_total) >= PHASE1_RECORDS + 500

    b.start()
    got, highs = read_everything(b.bootstrap, topic_name)

    for part in range(PARTITIONS):
        offsets = [o for o, _ in got[part]]
        assert offsets == list(range(highs[part])), f"partition {part}: offsets not dense"
    stored = {(part, o): v for part in range(PARTITIONS) for o, v in got[part]}
    missing = [k for k in acked_total if k not in stored]
    assert not missing, f"{len(missing)} acknowledged records lost after kill -9, e.g. {sorted(missing)[:5]}"
    wrong = [k for k, seq in acked_total.items() if stored[k] != payload(seq)]
    assert not wrong, f"{len(wrong)} acknowledged records differ after kill -9, e.g. {sorted(wrong)[:5]}"
    assert sum(highs.values()) >= len(acked_total)

    # Appends continue right after the recovered log end.
    p3 = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    reports = []
    for part in range(PARTITIONS):
        p3.produce(topic_name, b"after restart", partition=part,
                   on_delivery=lambda e, m: reports.append((e, m.partition(), m.offset())))
    assert p3.flush(30) == 0
    assert sorted((part, off) for e, part, off in reports if e is None) == sorted(highs.items())
