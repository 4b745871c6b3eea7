"""Issue 17's corrupt bytes: a bit flipped in the middle of a segment of a stopped broker. What
Kafka does, and Samsa with it (LogSegment.recover, LogSegment.read, FileLogInputStream.nextBatch,
ReplicaManager.readFromLocalLog):
- at a start after a crash, recovery re-reads the segments past the recovery point, checks each
  batch's CRC and cuts the log at the first bad one (and drops every later segment): the records
  before it stay, appends continue at its offset;
- a segment recovery does not scan (below the recovery point, or after a clean shutdown) is served
  as it is: a fetch does not check CRCs (the consumer does, check.crcs), so a flipped bit in a
  batch's records reaches the client unchanged; a batch whose length field no longer makes sense
  fails the offset search that walks over it, and that fetch gets CORRUPT_MESSAGE (Kafka's
  CorruptRecordException). Reads of what lies before it keep working."""

from __future__ import annotations

import time

import pytest
from compat_util import create_topic
from server_process import HOST
from wire_client import fetch_once, produce_one, values_by_offset

from samsa.wire.errors import ErrorCode
from samsa.wire.records import is_crc_valid, iter_batch_headers

BATCHES = 20
BAD = 10  # the batch (and offset: one record each) whose bytes are flipped
VALUE = 4000
# The bad batch in the first segment, not the active one (whose end is read at every start).
BROKER = {"log.segment.bytes": 64 * 1024}
# No index entries: every offset search walks the segment from its start, over the bad batch.
TOPIC = {"index.interval.bytes": str(1 << 20)}


def write_batches(broker, topic: str) -> dict[int, bytes]:
    create_topic(broker.bootstrap, topic, 1, TOPIC)
    written = {}
    for offset in range(BATCHES):
        value = (b"%04d" % offset) * (VALUE // 4)
        assert produce_one(HOST, broker.port, topic, 0, value) == (ErrorCode.NONE, offset)
        written[offset] = value
    return written


def flip(broker, topic: str, where) -> None:
    """Flip a bit of the BAD batch of the stopped broker's segment: `where(position, size)` says
    which byte."""
    segment = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    assert len(list(iter_batch_headers(bytes(data)))) < BATCHES, "the bad batch must not be in the active segment"
    position, header = list(iter_batch_headers(bytes(data)))[BAD]
    at = where(position, header.size)
    data[at] ^= 0x80 if at == position + 8 else 0x04
    segment.write_bytes(data)


def consumer_crc_error(bootstrap: str, topic: str):
    """The error librdkafka reports reading `topic` from its start with check.crcs (None if none)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crc-check", "check.crcs": True,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None:
                return message.error()
        return None
    finally:
        consumer.close()


def in_the_records(position: int, size: int) -> int:
    return position + size - 20


def in_the_length(position: int, size: int) -> int:
    return position + 8  # the length's high byte, whose sign bit is flipped: a negative length


@pytest.mark.samsa_only("flips bits in the broker's own segment files (Kafka's recovery is the reference, read)")
def test_recovery_after_a_crash_cuts_the_log_at_the_corrupt_batch(broker_factory, topic_name):
    broker = broker_factory(BROKER)
    written = write_batches(broker, topic_name)
    broker.kill()  # nothing was flushed: the recovery point is 0, the segment is recovered
    flip(broker, topic_name, in_the_records)
    broker.start()
    code, data = fetch_once(HOST, broker.port, topic_name, 0)
    assert code == ErrorCode.NONE
    assert values_by_offset(data) == {o: v for o, v in written.items() if o < BAD}
    assert produce_one(HOST, broker.port, topic_name, 0, b"after") == (ErrorCode.NONE, BAD)
    assert "Found invalid" in broker.output() or "corrupt" in broker.output().lower(), broker.output_tail()


@pytest.mark.samsa_only("flips bits in the broker's own segment files (Kafka's fetch path is the reference, read)")
def test_a_segment_not_recovered_is_served_as_it_is(broker_factory, topic_name):
    broker = broker_factory(BROKER)
    flipped_records, flipped_length = f"{topic_name}-records", f"{topic_name}-length"
    write_batches(broker, flipped_records)
    written = write_batches(broker, flipped_length)
    assert broker.stop() == 0  # a clean shutdown: no recovery at the next start
    flip(broker, flipped_records, in_the_records)
    flip(broker, flipped_length, in_the_length)
    broker.start()

    # A flipped bit in the records: sent unchanged, the CRC is the consumer's to check.
    code, data = fetch_once(HOST, broker.port, flipped_records, 0)
    assert code == ErrorCode.NONE
    batches = list(iter_batch_headers(data))
    assert len(batches) > BAD
    assert [is_crc_valid(data, p, h) for p, h in batches] == [o != BAD for o in range(len(batches))]
    error = consumer_crc_error(broker.bootstrap, flipped_records)
    assert error is not None and "crc" in str(error).lower(), error

    # The offset search walks over the bad length: CORRUPT_MESSAGE, as Kafka answers.
    assert fetch_once(HOST, broker.port, flipped_length, 0, BAD + 1)[0] == ErrorCode.CORRUPT_MESSAGE
    # What lies before it reads as ever.
    code, data = fetch_once(HOST, broker.port, flipped_length, 0, max_bytes=BAD * VALUE)
    assert code == ErrorCode.NONE
    values = values_by_offset(data)
    assert values and all(values[o] == written[o] for o in values) and max(values) < BAD
