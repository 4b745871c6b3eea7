"""Encode and decode time per message: Samsa's generated codec against kio (and construct).

    python bench/codec.py [--quick]

Messages, each at the latest version both Samsa and kio know: a Produce request (one 1 KiB batch,
and one of 1 MiB), a Fetch response (4 topics x 5 partitions x 64 KiB of records) and a Metadata
response (3 brokers, 10 topics x 10 partitions x 3 replicas). kio's values come from kio decoding
Samsa's bytes, so both encode the same message; construct's (bench/construct_codec.py) are checked
to encode to Samsa's bytes, and run compiled (construct's `.compile()`, its faster form). Times are
the best of several runs, in microseconds per message.
Samsa decodes records as memoryviews into the frame; kio and construct copy them.
"""

from __future__ import annotations

import io
import sys
import timeit
import uuid
from pathlib import Path

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.wire.codec import FrameBuffer
from samsa.wire.protocol import message_class
from samsa.wire.records import Record, build_batch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import construct_codec  # noqa: E402

ProduceRequest = message_class("ProduceRequest")
FetchResponse = message_class("FetchResponse")
MetadataResponse = message_class("MetadataResponse")


def batch(total_size: int, record_size: int = 1024) -> bytes:
    value = bytes(range(256)) * (record_size // 256)
    count = max(1, total_size // record_size)
    return build_batch([Record(i, i, b"key-%d" % i, value, []) for i in range(count)], base_timestamp=1_700_000_000_000)


def produce_request(records: bytes):
    partition = ProduceRequest.PartitionProduceData(index=0, records=records)
    return ProduceRequest(acks=-1, timeout_ms=30000,
                          topic_data=[ProduceRequest.TopicProduceData(name="events", partition_data=[partition])])


class FileSlice:
    """Stands for records the broker sends from a log segment with sendfile."""

    def __init__(self, size: int) -> None:
        self.size = size


def fetch_response(records=None):
    records = batch(64 * 1024) if records is None else records
    topics = []
    for t in range(4):
        partitions = [FetchResponse.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                                                  log_start_offset=0, records=records) for p in range(5)]
        topics.append(FetchResponse.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=partitions))
    return FetchResponse(session_id=7, responses=topics)


def metadata_response():
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=n, host="broker-%d.example.com" % n, port=9092,
                                                       rack="rack-%d" % n) for n in range(3)]
    topics = []
    for t in range(10):
        partitions = [MetadataResponse.MetadataResponsePartition(
            partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
            isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3]) for p in range(10)]
        topics.append(MetadataResponse.MetadataResponseTopic(name="topic-%d" % t, topic_id=uuid.UUID(int=t + 1),
                                                             partitions=partitions, topic_authorized_operations=0))
    return MetadataResponse(brokers=brokers, cluster_id="cluster-1", controller_id=0, topics=topics)


# --- construct values ----------------------------------------------------------------------------

def construct_value(value):
    """A Samsa struct as the dict construct builds from: tagged sections empty, uuids as bytes."""
    if isinstance(value, list):
        return [construct_value(v) for v in value]
    if isinstance(value, uuid.UUID):
        return value.bytes
    if hasattr(value, "_fields"):
        fields = {f: construct_value(getattr(value, f)) for f in value._fields}
        return {**fields, "tagged": []}
    return value


# --- timing --------------------------------------------------------------------------------------

def best_us(fn, repeat: int) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat, number)) / number * 1e6


def kio_codec(samsa_bytes: bytes, kio_cls):
    reader, writer = entity_reader(kio_cls), entity_writer(kio_cls)
    entity, _ = reader(samsa_bytes, 0)

    def encode():
        buffer = io.BytesIO()
        writer(buffer, entity)
        return buffer.getvalue()

    assert encode() == samsa_bytes, "kio does not encode the same bytes"
    return encode, lambda: reader(samsa_bytes, 0)


def cases():
    small, large = batch(1024), batch(1024 * 1024)
    return [
        ("Produce v11, 1 KiB", produce_request(small), 11, load_request_schema(0, 11),
         construct_codec.ProduceRequestV11),
        ("Produce v11, 1 MiB", produce_request(large), 11, load_request_schema(0, 11),
         construct_codec.ProduceRequestV11),
        ("Fetch v17, 20 x 64 KiB", fetch_response(), 17, load_response_schema(1, 17), None),
        ("Metadata v12, 10x10", metadata_response(), 12, load_response_schema(3, 12),
         construct_codec.MetadataResponseV12),
    ]


def main(argv: list[str]) -> None:
    repeat = 3 if "--quick" in argv else 7
    header = (f"{'message':24} {'bytes':>9} | {'encode us':>9} {'kio':>9} {'x':>6} {'construct':>9} |"
              f" {'decode us':>9} {'kio':>9} {'x':>6} {'construct':>9}")
    print(header)
    print("-" * len(header))
    for name, message, version, kio_cls, construct_struct in cases():
        data = bytes(message.encode(version))
        cls = type(message)
        assert cls.decode(data, version) == message
        kio_encode, kio_decode = kio_codec(data, kio_cls)
        enc = best_us(lambda: message.encode(version), repeat)
        dec = best_us(lambda: cls.decode(data, version), repeat)
        kenc, kdec = best_us(kio_encode, repeat), best_us(kio_decode, repeat)
        cenc = cdec = "-"
        if construct_struct is not None:
            compiled = construct_struct.compile()  # construct's faster form: generated Python
            value = construct_value(message)
            assert compiled.build(value) == data, "construct does not encode the same bytes"
            cenc = f"{best_us(lambda: compiled.build(value), repeat):9.1f}"
            cdec = f"{best_us(lambda: compiled.parse(data), repeat):9.1f}"
        print(f"{name:24} {len(data):9} | {enc:9.1f} {kenc:9.1f} {kenc / enc:6.2f} {cenc:>9} |"
              f" {dec:9.1f} {kdec:9.1f} {kdec / dec:6.2f} {cdec:>9}")
    print("x = kio time / Samsa time (above 1: Samsa is faster)")
    sliced = fetch_response(FileSlice(len(batch(64 * 1024))))
    zero_copy = best_us(lambda: sliced.encode(17, FrameBuffer()), repeat)
    print(f"Fetch v17 encoded as the broker does, records left as FrameBuffer holes for sendfile: {zero_copy:.1f} us")


if __name__ == "__main__":
    main(sys.argv)
