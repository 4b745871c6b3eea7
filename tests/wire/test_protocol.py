"""Framing and headers, and how the codec meets bad bytes: one error type, no other exception, no hang."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from samsa.wire.codec import FrameBuffer, read_uvarint, uvarint
from samsa.wire.exceptions import CodecError, UnsupportedVersionError
from samsa.wire.messages import APIS
from samsa.wire.protocol import (
    SIZE, ApiKey, RequestHeader, ResponseHeader, decode_request, decode_request_header, decode_response,
    encode_request, encode_response, message_class, request_class, request_header_version, response_class,
    response_header_version,
)

ApiVersionsRequest = message_class("ApiVersionsRequest")
ApiVersionsResponse = message_class("ApiVersionsResponse")
MetadataRequest = message_class("MetadataRequest")
MetadataResponse = message_class("MetadataResponse")
ProduceRequest = message_class("ProduceRequest")


def body(frame: bytes) -> bytes:
    (size,) = SIZE.unpack_from(frame)
    assert size == len(frame) - 4
    return bytes(frame[4:])


# --- request headers -------------------------------------------------------------------------------

def test_request_header_v0_has_no_client_id():
    assert RequestHeader(request_api_key=7, request_api_version=0, correlation_id=5).encode(0) == \
        struct.pack(">hhi", 7, 0, 5)
    assert request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0


def test_request_header_v1_has_a_plain_nullable_client_id():
    header = RequestHeader(request_api_key=3, request_api_version=4, correlation_id=9, client_id="rdkafka")
    assert header.encode(1) == struct.pack(">hhih", 3, 4, 9, 7) + b"rdkafka"
    null = RequestHeader(request_api_key=3, request_api_version=4, correlation_id=9, client_id=None)
    assert null.encode(1) == struct.pack(">hhih", 3, 4, 9, -1)
    assert RequestHeader.decode(null.encode(1), 1).client_id is None
    assert request_header_version(ApiKey.METADATA, 8) == 1


def test_request_header_v2_keeps_client_id_non_compact_and_adds_tagged_fields():
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="kcat")
    assert header.encode(2) == struct.pack(">hhih", 18, 3, 1, 4) + b"kcat" + b"\x00"
    assert request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert request_header_version(ApiKey.METADATA, 9) == 2


def test_request_frame_round_trip():
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    frame = encode_request(request, 12, correlation_id=42, client_id="me")
    header, decoded = decode_request(body(frame))
    assert (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id) == \
        (ApiKey.METADATA, 12, 42, "me")
    assert decoded == request


# --- response headers ------------------------------------------------------------------------------

def test_response_header_versions():
    assert ResponseHeader(correlation_id=3).encode(0) == struct.pack(">i", 3)
    assert ResponseHeader(correlation_id=3).encode(1) == struct.pack(">i", 3) + b"\x00"
    assert response_header_version(ApiKey.METADATA, 8) == 0
    assert response_header_version(ApiKey.METADATA, 9) == 1
    for version in range(5):
        assert response_header_version(ApiKey.API_VERSIONS, version) == 0  # KIP-511


def test_api_versions_v3_response_with_defaults_carries_no_tagged_fields():
    """Debian's kcat (librdkafka 2.0) cannot parse default-valued tagged fields in this reply."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11),
            ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    frame = encode_response(ApiVersionsResponse(api_keys=keys), 3, correlation_id=77)
    expected = (struct.pack(">i", 77)  # header v0: no tagged-field byte
                + struct.pack(">h", 0) + b"\x03"
                + struct.pack(">hhh", 0, 0, 11) + b"\x00"
                + struct.pack(">hhh", 18, 0, 4) + b"\x00"
                + struct.pack(">i", 0) + b"\x00")
    assert body(frame) == expected
    correlation_id, decoded = decode_response(body(frame), ApiKey.API_VERSIONS, 3)
    assert correlation_id == 77 and decoded.api_keys == keys


def test_flexible_response_frame_has_header_tagged_fields():
    frame = encode_response(MetadataResponse(), 12, correlation_id=5)
    assert body(frame)[:5] == struct.pack(">i", 5) + b"\x00"
    assert decode_response(body(frame), ApiKey.METADATA, 12) == (5, MetadataResponse())


def test_response_frame_size_counts_records_left_as_holes():
    class Slice:
        size = 1000

    partition = message_class("FetchResponse").PartitionData(records=Slice())
    topic = message_class("FetchResponse").FetchableTopicResponse(partitions=[partition])
    out = FrameBuffer(b"earlier")
    encode_response(message_class("FetchResponse")(responses=[topic]), 16, correlation_id=1, out=out)
    (size,) = SIZE.unpack_from(out, len(b"earlier"))
    assert size == len(out) - len(b"earlier") - 4 + 1000


# --- registry --------------------------------------------------------------------------------------

def test_every_api_key_has_request_and_response_classes():
    for key in APIS:
        assert request_class(key).API_KEY == key == response_class(key).API_KEY
        assert request_class(key).MESSAGE_TYPE == "request" and response_class(key).MESSAGE_TYPE == "response"


def test_unknown_api_key_and_version_are_unsupported():
    with pytest.raises(UnsupportedVersionError):
        request_class(9999)
    unknown_key = struct.pack(">hhih", 9999, 0, 7, -1)
    header, _ = decode_request_header(unknown_key)
    assert header.correlation_id == 7  # enough to answer with
    with pytest.raises(UnsupportedVersionError):
        decode_request(unknown_key)
    unknown_version = struct.pack(">hhih", ApiKey.METADATA, 99, 8, -1) + b"\x00" * 16
    assert decode_request_header(unknown_version)[0].correlation_id == 8
    with pytest.raises(UnsupportedVersionError):
        decode_request(unknown_version)
    with pytest.raises(UnsupportedVersionError):
        decode_response(struct.pack(">i", 1), 9999, 0)


def test_api_versions_request_of_a_future_version_still_yields_its_correlation_id():
    # A client newer than us sends ApiVersions v9 (flexible header): we answer v0 UNSUPPORTED_VERSION.
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 9, 31, 3) + b"cli" + b"\x00" + b"\x00"
    header, _ = decode_request_header(frame)
    assert (header.request_api_version, header.correlation_id, header.client_id) == (9, 31, "cli")


# --- bad bytes -------------------------------------------------------------------------------------

def rich_messages():
    """A message with every kind of field for several apis, encoded at their latest version."""
    topic = MetadataResponse.MetadataResponseTopic(
        name="t", partitions=[MetadataResponse.MetadataResponsePartition(replica_nodes=[1, 2], isr_nodes=[1])])
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=9092, rack="r")
    partition = ProduceRequest.PartitionProduceData(index=1, records=b"\x00" * 70)
    produce = ProduceRequest(transactional_id="tx", topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[partition])])
    api_versions = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=1)],
                                       finalized_features_epoch=3, _unknown_tagged=[(50, b"zz")])
    yield from ((MetadataResponse(brokers=[broker], topics=[topic], cluster_id="c"), v) for v in (2, 12))
    yield from ((produce, v) for v in (3, 11))
    yield from ((api_versions, v) for v in (3, 4))


@pytest.mark.parametrize("message,version", list(rich_messages()),
                         ids=lambda x: x if isinstance(x, int) else type(x).__name__)
def test_truncation_at_every_position_is_a_codec_error(message, version):
    data = bytes(message.encode(version))
    for cut in range(len(data)):
        with pytest.raises(CodecError):
            type(message).decode(data[:cut], version)


@pytest.mark.parametrize("cut", range(0, 40))
def test_truncated_request_frames_are_codec_errors(cut):
    frame = body(encode_request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")]),
                                12, correlation_id=1, client_id="client-1"))
    with pytest.raises(CodecError):
        decode_request(frame[:cut])


def test_oversized_and_negative_lengths():
    # A string claiming more bytes than the frame holds.
    with pytest.raises(CodecError, match="past the end"):
        RequestHeader.decode(struct.pack(">hhih", 3, 4, 1, 30000) + b"abc", 1)
    # Negative non-null lengths mean null, which a non-nullable field refuses.
    topic = struct.pack(">i", 1) + struct.pack(">h", -2)
    with pytest.raises(CodecError, match="non-nullable"):
        MetadataRequest.decode(topic, 3)
    # Bytes of a negative length other than -1 are refused where not nullable.
    with pytest.raises(CodecError):
        message_class("SaslAuthenticateRequest").decode(struct.pack(">i", -5), 0)


def test_array_counts_beyond_the_data_are_refused_before_allocating():
    for count in (2**31 - 1, 1000):
        data = struct.pack(">i", count) + b"\x00" * 16
        tracemalloc.start()
        try:
            with pytest.raises(CodecError, match="array length|past the end"):
                MetadataRequest.decode(data, 3)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024
    # Arrays of fixed-width elements: the same in the compact form.
    partition = MetadataResponse.MetadataResponsePartition(replica_nodes=[0x5A5A5A5A])
    data = bytes(MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(partitions=[partition])]).encode(12))
    replicas = b"\x02" + b"\x5a" * 4
    assert data.count(replicas) == 1
    for count in (2**31, 20, 200):  # the generic reader, a precompiled short struct, the generic reader again
        forged = data.replace(replicas, uvarint(count + 1) + b"\x5a" * 4)
        with pytest.raises(CodecError):
            MetadataResponse.decode(forged, 12)


def test_bad_varints():
    with pytest.raises(CodecError, match="longer than 5 bytes"):
        read_uvarint(b"\xff\xff\xff\xff\xff\xff\x01", 0)
    # A compact string length that never ends, inside a message.
    with pytest.raises(CodecError):
        MetadataRequest.decode(b"\x02" + b"\xff" * 12, 12)
    with pytest.raises(CodecError):
        MetadataRequest.decode(b"\x02" + b"\xff" * 3, 12)  # runs out mid-varint


def test_bad_utf8_is_a_codec_error():
    with pytest.raises(CodecError):
        RequestHeader.decode(struct.pack(">hhih", 3, 4, 1, 2) + b"\xff\xfe", 1)


def test_frames_shorter_than_the_api_key_and_version():
    for frame in (b"", b"\x00", b"\x00\x03\x00"):
        with pytest.raises(CodecError):
            decode_request(frame)
