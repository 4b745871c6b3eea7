"""The C codec (samsa.wire._speedups, interpreting the generated field programs) against the pure
one: every message at every version, both directions, from default and hypothesis-drawn messages and
from mutated bytes. The two must build the same objects, write the same bytes and refuse bad input
with the same CodecError subclass.

Skipped, with the reason, when the extension is not built (`pip install -e .`, or
`python setup.py build_ext --inplace` for a source tree on PYTHONPATH) or SAMSA_PURE is set.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import types
import uuid
import weakref
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.wire import codec, program
from samsa.wire.codec import REFERENCE_MIN, FrameBuffer
from samsa.wire.exceptions import CodecError, UnsupportedVersionError
from samsa.wire.messages import MODULES
from samsa.wire.protocol import message_class

sys.path.insert(0, str(Path(__file__).resolve().parent))
from codec_pair import check_decode, check_encode, same  # noqa: E402
from wire_strategies import message_strategy, mutated  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
needs_speedups = pytest.mark.skipif(not codec.ACCELERATED, reason=f"C codec not in use: {codec.SPEEDUPS_MISSING}")

ALL_CLASSES = [message_class(name) for name in sorted(MODULES)]
CASES = [(cls, v) for cls in ALL_CLASSES for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]

MetadataResponse = message_class("MetadataResponse")
ProduceRequest = message_class("ProduceRequest")
FetchResponse = message_class("FetchResponse")
ApiVersionsResponse = message_class("ApiVersionsResponse")


def case_id(case) -> str:
    cls, version = case
    return f"{cls.__name__}-v{version}"


@needs_speedups
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_c_and_pure_codecs_agree(case):
    cls, version = case
    check_decode(cls, check_encode(cls(), version), version)

    @settings(max_examples=6, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(message_strategy(cls, version), st.data())
    def check(message, data):
        encoded = check_encode(message, version)
        _, (decoded, end) = check_decode(cls, encoded, version)
        assert end == len(encoded) and same(decoded, cls._pure_decode_from(encoded, version)[0])
        check_decode(cls, data.draw(mutated(encoded)), version)

    check()


def test_the_extension_was_built_for_these_programs():
    if codec.ACCELERATED:
        assert codec._speedups.OPCODES == program.OPCODES and codec._speedups.INTERFACE == codec._INTERFACE
    else:
        pytest.skip(f"C codec not in use: {codec.SPEEDUPS_MISSING}")


def test_samsa_pure_forces_the_pure_codec():
    check = "from samsa.wire import codec, protocol as p; print(codec.ACCELERATED, p.message_class('ProduceRequest')._accel)"
    env = {**os.environ, "SAMSA_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "None"]


def metadata():
    topic = MetadataResponse.MetadataResponseTopic(name="t", topic_id=uuid.UUID(int=7 << 64 | 9), partitions=[
        MetadataResponse.MetadataResponsePartition(partition_index=1, replica_nodes=list(range(40)))])
    return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092)],
                            cluster_id="c", topics=[topic])


@needs_speedups
def test_decoding_from_any_position_and_buffer_type():
    data = bytes(metadata().encode(12))
    framed = b"head" + data + b"tail"
    message, end = MetadataResponse.decode_from(framed, 12, 4)
    assert end == 4 + len(data) and same(message, MetadataResponse._pure_decode_from(framed, 12, 4)[0])
    for buf in (bytearray(data), memoryview(data), memoryview(framed)[4:-4]):
        assert same(MetadataResponse.decode(buf, 12), MetadataResponse.decode(data, 12))
    assert MetadataResponse.decode(buf=data, version=12, pos=0) == message
    with pytest.raises(CodecError):
        MetadataResponse.decode_from(data, 12, len(data) + 1)
    beyond = MetadataResponse.VALID_VERSIONS[1] + 1
    with pytest.raises(UnsupportedVersionError, match=f"has no version {beyond}"):
        MetadataResponse.decode(data, beyond)


@needs_speedups
def test_records_are_slices_of_the_frame_whatever_the_buffer():
    batches = [bytes([i]) * (100 + i) for i in range(3)]
    parts = [ProduceRequest.PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)]
    data = bytes(ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=parts)])
                 .encode(11))
    for buf in (data, bytearray(data), memoryview(b"x" + data)[1:]):
        decoded = ProduceRequest.decode(buf, 11)
        views = [p.records for p in decoded.topic_data[0].partition_data]
        assert [v.tobytes() for v in views] == batches
        assert all(type(v) is memoryview and v.obj is (buf.obj if type(buf) is memoryview else buf) for v in views)
        assert all(v.readonly == (type(buf) is not bytearray) and v.contiguous and v.format == "B" for v in views)


@needs_speedups
def test_encoding_into_frame_buffers_leaves_the_same_holes():
    class Slice:
        size = 70000

        def read_bytes(self):
            return b"s" * self.size

    large, at_limit, below = b"r" * (REFERENCE_MIN + 5000), bytearray(b"a" * REFERENCE_MIN), memoryview(b"b" * (REFERENCE_MIN - 1))
    records = [Slice(), large, None, Slice(), b"small", at_limit, below]
    partitions = [FetchResponse.PartitionData(partition_index=i, records=r) for i, r in enumerate(records)]
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=partitions)])
    for version in (4, 12, 17):
        c, pure = FrameBuffer(b"pre"), FrameBuffer(b"pre")
        response.encode(version, c)
        response._pure_encode(version, pure)
        assert c == pure and c.holes == pure.holes
        assert [type(h) for _, h in c.holes] == [Slice, bytes, Slice, bytearray]
        assert c.holes[1][1] is large and c.holes[3][1] is at_limit  # referenced, not copied
        assert check_encode(response, version) == bytes(response._pure_encode(version))


@needs_speedups
def test_encode_appends_to_the_buffer_given_and_falls_back_for_others():
    out = bytearray(b"head")
    assert metadata().encode(12, out) is out and out[4:] == metadata()._pure_encode(12)
    assert metadata().encode(12, out=None) == metadata()._pure_encode(12)


@needs_speedups
def test_values_a_version_cannot_carry_or_a_type_cannot_hold_fail_alike():
    bad = [
        (MetadataResponse(cluster_authorized_operations=5), 11),  # UnsupportedVersionError: not in v11
        (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host=None)]), 12),
        (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(port=2**31)]), 12),
        (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(port="9092")]), 12),
        (MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host=b"h")]), 12),
        (MetadataResponse(brokers=None), 12),
        (MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(partitions=[
            MetadataResponse.MetadataResponsePartition(replica_nodes=[1, None])])]), 12),
        (MetadataResponse(cluster_id="x" * 40000), 8),  # longer than an int16 length
        (MetadataResponse(cluster_id="\udc80"), 12),  # not encodable as UTF-8
        (ApiVersionsResponse(finalized_features_epoch="x"), 3),  # a bad tagged value
        (ApiVersionsResponse(_unknown_tagged=[(-1, b"")]), 3),
        (ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(partition_data=[
            ProduceRequest.PartitionProduceData(records=42)])]), 11),
    ]
    for message, version in bad:
        assert check_encode(message, version) is None, f"{message!r} v{version} was encoded"


@needs_speedups
def test_structs_of_other_classes_are_read_by_attribute():
    """The C encoder reads slots only from the layout's own class; anything else goes by name."""
    broker = types.SimpleNamespace(node_id=3, host="h", port=1, rack=None, _unknown_tagged=None)
    message = MetadataResponse(brokers=[broker])
    assert check_encode(message, 12) == bytes(MetadataResponse(brokers=[
        MetadataResponse.MetadataResponseBroker(node_id=3, host="h", port=1)]).encode(12))

    class Sub(MetadataResponse.MetadataResponseBroker):
        __slots__ = ()

    assert check_encode(MetadataResponse(brokers=[Sub(node_id=3, host="h", port=1)]), 12) is not None


@needs_speedups
def test_tagged_fields_and_unknown_tags_in_tag_order():
    message = ApiVersionsResponse(finalized_features_epoch=7, _unknown_tagged=[(40, b"yz"), (9, b"x"), (0, b"")])
    data = check_encode(message, 3)
    assert data.endswith(b"\x04" + b"\x00\x00" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x09\x01x" + b"\x28\x02yz")
    check_decode(ApiVersionsResponse, data, 3)
    # A known tag whose value runs past the size its tag gives it is refused by both.
    short = data.replace(b"\x01\x08" + (7).to_bytes(8, "big"), b"\x01\x04" + (7).to_bytes(8, "big"))
    assert check_decode(ApiVersionsResponse, short, 3)[0] == "error"


@needs_speedups
def test_huge_counts_are_refused_before_anything_is_allocated():
    for count in (b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x07"):  # int32 max, the largest 5-byte varint
        data = b"\x00\x00\x00\x00" + count
        assert check_decode(MetadataResponse, data, 12 if len(count) == 5 else 8)[0] == "error"


class Sentinel:
    """Something a weak reference can watch, to see a value released."""


@needs_speedups
def test_freed_structs_are_reused_and_still_collected():
    Broker = MetadataResponse.MetadataResponseBroker
    data = bytes(metadata().encode(12))
    decoded = MetadataResponse.decode(data, 12)
    freed = id(decoded.brokers[-1])
    del decoded
    reused = Broker(node_id=1)  # takes the block just freed
    assert id(reused) == freed and reused == Broker(node_id=1) and reused.host == "" and reused.rack is None
    # A reused block is tracked by the garbage collector like any other: a cycle through it goes.
    watched = Sentinel()
    gone = weakref.ref(watched)
    reused.host = [reused, watched]
    del reused, watched
    gc.collect()
    assert gone() is None
    for _ in range(3):  # decoding into reused blocks builds the same messages
        assert MetadataResponse.decode(data, 12) == metadata()


@needs_speedups
def test_subclasses_of_generated_structs_release_their_fields():
    class Sub(MetadataResponse.MetadataResponseBroker):  # with a __dict__ and weak references
        pass

    watched, extra = Sentinel(), Sentinel()
    gone, extra_gone = weakref.ref(watched), weakref.ref(extra)
    sub = Sub(node_id=2, host=watched)
    sub.extra = extra
    sub_gone = weakref.ref(sub)
    del sub, watched, extra
    assert gone() is None and extra_gone() is None and sub_gone() is None


@needs_speedups
def test_decoded_strings_are_the_pure_codecs_and_short_ascii_ones_shared():
    names = ["t", "", "x" * 64, "y" * 65, "ünïcode", "ascii-then-ü", *(f"topic-{i}" for i in range(2000))]
    topics = [MetadataResponse.MetadataResponseTopic(name=n) for n in names]
    data = check_encode(MetadataResponse(topics=topics), 12)
    check_decode(MetadataResponse, data, 12)  # the same values, and types, as the pure codec's
    assert [t.name for t in MetadataResponse.decode(data, 12).topics] == names
    data = check_encode(MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t")]), 12)
    first, again = (MetadataResponse.decode(data, 12) for _ in range(2))
    assert again.topics[0].name is first.topics[0].name
