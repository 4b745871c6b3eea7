"""Encode and decode time per message: Samsa's codec against kio (and construct).

    python bench/codec.py [--quick] [--construct]
    SAMSA_PURE=1 python bench/codec.py    # the pure-Python codec alone

Messages, each at the latest version both Samsa and kio know: a Produce request (one 1 KiB batch,
and one of 1 MiB), a Fetch response (4 topics x 5 partitions x 64 KiB of records) and a Metadata
response (3 brokers, 10 topics x 10 partitions x 3 replicas). kio's values come from kio decoding
Samsa's bytes, so both encode the same message; construct's (bench/construct_codec.py) are checked
to encode to Samsa's bytes, and run compiled (construct's `.compile()`, its faster form). Samsa's
times are for the codec in use (C when samsa.wire._speedups is built) and for the pure-Python codec
beside it. Times are medians of rounds of the best of many short windows (the calls taking turns),
in microseconds per message; the ratio is the median of ratios taken within each round, so that
both sides ran under the same load.

An encode is timed up to what a sender hands the socket: for kio the bytes of its `io.BytesIO`
(`getvalue()`); for Samsa what the broker sends, `FrameBuffer.pieces()` of a `FrameBuffer` encoded
into: that buffer alone, or, when records of `codec.REFERENCE_MIN` bytes or more are referenced
rather than copied, the list of buffers one writev sends (the bytes around the records, and the
records themselves). Before timing, both are checked to be the same bytes. Samsa decodes records as
memoryviews into the frame; kio and construct copy them.
"""

from __future__ import annotations

import io
import statistics
import sys
import timeit
import uuid
from pathlib import Path

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from samsa.wire import codec
from samsa.wire.codec import REFERENCE_MIN, FrameBuffer
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

# One timing runs the call for about this long: short enough that on a busy machine most windows run
# without being preempted, so the best of many is the call's own time.
WINDOW = 0.005


def timer(fn, *args) -> tuple[timeit.Timer, int]:
    """A timer of fn(*args) (timeit runs the call itself, no lambda around it) and the number of
    calls that fill about WINDOW seconds."""
    names = [f"a{i}" for i in range(len(args))]
    t = timeit.Timer(f"fn({', '.join(names)})", globals={"fn": fn, **dict(zip(names, args))})
    number = 1
    while (elapsed := t.timeit(number)) < WINDOW / 10:
        number *= 10
    return t, max(1, round(number * WINDOW / elapsed))


def best_us(calls: dict[str, tuple], repeat: int) -> dict[str, float]:
    """Microseconds per call of each `name: (fn, *args)`, the best of `repeat` windows; the calls
    take turns, window by window, so that all of them run under the same load."""
    timers = {name: timer(fn, *args) for name, (fn, *args) in calls.items()}
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeat):
        for name, (t, number) in timers.items():
            best[name] = min(best[name], t.timeit(number) / number)
    return {name: seconds * 1e6 for name, seconds in best.items()}


def best_one_us(repeat: int, fn, *args) -> float:
    return best_us({"": (fn, *args)}, repeat)[""]


def frame_pieces(encode, version: int) -> list:
    """What a Samsa sender hands the socket: `encode` (a message's encode or _pure_encode) into a
    FrameBuffer, and the buffers of the frame."""
    out = FrameBuffer()
    encode(version, out)
    return out.pieces()


def kio_codec(samsa_bytes: bytes, kio_cls):
    reader, writer = entity_reader(kio_cls), entity_writer(kio_cls)
    entity, _ = reader(samsa_bytes, 0)

    def encode():
        buffer = io.BytesIO()
        writer(buffer, entity)
        return buffer.getvalue()

    assert encode() == samsa_bytes, "kio does not encode the same bytes"
    return (encode,), (reader, samsa_bytes, 0)


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


def measure(message, version: int, kio_cls, rounds: int, repeat: int) -> dict[str, float]:
    """Median over `rounds` of each time (best of `repeat`), and of each round's kio / Samsa ratio:
    a ratio taken within one round compares the two under the same load on a shared machine."""
    data = bytes(message.encode(version))
    cls = type(message)
    assert cls.decode(data, version) == message
    assert bytes(message._pure_encode(version)) == data
    kio_encode, kio_decode = kio_codec(data, kio_cls)
    for encode in (message.encode, message._pure_encode):
        assert b"".join(frame_pieces(encode, version)) == data
    calls = {  # each a function and its arguments
        "encode": (frame_pieces, message.encode, version),
        "pure encode": (frame_pieces, message._pure_encode, version),
        "kio encode": kio_encode,
        "decode": (cls.decode, data, version),
        "pure decode": (cls._pure_decode_from, data, version),
        "kio decode": kio_decode,
    }
    samples: dict[str, list[float]] = {name: [] for name in [*calls, "encode x", "decode x"]}
    for _ in range(rounds):
        for name, us in best_us(calls, repeat).items():
            samples[name].append(us)
        for way in ("encode", "decode"):
            samples[f"{way} x"].append(samples[f"kio {way}"][-1] / samples[way][-1])
    return ({name: statistics.median(values) for name, values in samples.items()}
            | {"bytes": len(data), "buffers": len(frame_pieces(message.encode, version))})


def construct_times(message, version: int, construct_struct, repeat: int) -> tuple[float, float]:
    compiled = construct_struct.compile()  # construct's faster form: generated Python
    value = construct_value(message)
    data = bytes(message.encode(version))
    assert compiled.build(value) == data, "construct does not encode the same bytes"
    return best_one_us(repeat, compiled.build, value), best_one_us(repeat, compiled.parse, data)


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    rounds, repeat = (3, 12) if quick else (5, 40)
    print(f"codec: {'C (samsa.wire._speedups)' if codec.ACCELERATED else 'pure Python: ' + codec.SPEEDUPS_MISSING}; "
          f"medians of {rounds} rounds, each time the best of {repeat} windows of {WINDOW * 1e3:.0f} ms, "
          f"in microseconds")
    print(f"encode: kio to bytes (BytesIO.getvalue()); Samsa to FrameBuffer.pieces(), the buffers one writev "
          f"sends (bufs): the encoded bytearray alone, or with records of {REFERENCE_MIN} bytes or more "
          f"referenced, not copied: the bytes around them and the records")
    header = (f"{'message':24} {'bytes':>9} {'bufs':>4} | {'encode':>8} {'pure':>8} {'kio':>8} {'x':>6} |"
              f" {'decode':>8} {'pure':>8} {'kio':>8} {'x':>6}")
    print(header)
    print("-" * len(header))
    for name, message, version, kio_cls, _construct_struct in cases():
        t = measure(message, version, kio_cls, rounds, repeat)
        print(f"{name:24} {t['bytes']:9} {t['buffers']:4} | {t['encode']:8.2f} {t['pure encode']:8.2f}"
              f" {t['kio encode']:8.2f} {t['encode x']:6.2f} | {t['decode']:8.2f} {t['pure decode']:8.2f}"
              f" {t['kio decode']:8.2f} {t['decode x']:6.2f}")
    print("x = kio time / Samsa time, the median of the rounds' ratios (above 1: Samsa is faster)")
    records = batch(1024 * 1024)
    print(f"Copying the 1 MiB batch into a new bytearray, which encoding it into one buffer would cost: "
          f"{best_one_us(repeat, bytearray, records):.1f} us")
    sliced = fetch_response(FileSlice(len(batch(64 * 1024))))
    zero_copy = best_one_us(repeat, frame_pieces, sliced.encode, 17)
    print(f"Fetch v17 encoded as the broker does, records left as FrameBuffer holes for sendfile: {zero_copy:.1f} us")
    if "--construct" in argv:
        for name, message, version, _, construct_struct in cases():
            if construct_struct is not None:
                enc, dec = construct_times(message, version, construct_struct, repeat)
                print(f"construct (compiled), {name}: encode {enc:.1f} us, decode {dec:.1f} us")


if __name__ == "__main__":
    main(sys.argv)
