"""Generated message codecs: round trips of every message at every version, and the generator's
output checked against Kafka's schemas."""

from __future__ import annotations

import importlib.util
import os
import pickle
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from samsa.wire import codec
from samsa.wire.codec import FrameBuffer, Message
from samsa.wire.exceptions import CodecError, UnsupportedVersionError
from samsa.wire.messages import APIS, MODULES
from samsa.wire.protocol import message_class

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_strategies import message_strategy, unknown_tags_of  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
GENERATED = REPO / "wire" / "messages"
GENERATED_RECORDS = REPO / "wire" / "coordinator_records"
GENERATED_METADATA_RECORDS = REPO / "wire" / "metadata_records"

ALL_CLASSES = [message_class(name) for name in sorted(MODULES)]
CASES = [(cls, v) for cls in ALL_CLASSES for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]


def case_id(case) -> str:
    cls, version = case
    return f"{cls.__name__}-v{version}"


def roundtrip(message: Message, version: int) -> Message:
    data = message.encode(version)
    decoded, end = type(message).decode_from(bytes(data), version)
    assert end == len(data), "decode stopped before the end of what encode wrote"
    assert decoded == message
    assert decoded.encode(version) == data, "re-encoding the decoded message changed the bytes"
    return decoded


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_default_message_roundtrips(case):
    cls, version = case
    roundtrip(cls(), version)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_generated_message_roundtrips(case):
    cls, version = case

    @settings(max_examples=8, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(message_strategy(cls, version))
    def check(message):
        decoded = roundtrip(message, version)
        assert unknown_tags_of(decoded) == unknown_tags_of(message)

    check()


# --- values the round trips must keep apart ------------------------------------------------------

MetadataRequest = message_class("MetadataRequest")
MetadataResponse = message_class("MetadataResponse")
ApiVersionsResponse = message_class("ApiVersionsResponse")
ProduceRequest = message_class("ProduceRequest")
FetchResponse = message_class("FetchResponse")


def test_null_and_empty_arrays_stay_distinct():
    for version in (4, 9, 12):  # nullable topics: int32 count (4), compact (9, 12)
        null = MetadataRequest(topics=None)
        empty = MetadataRequest(topics=[])
        assert MetadataRequest.decode(null.encode(version), version).topics is None
        assert MetadataRequest.decode(empty.encode(version), version).topics == []
        assert null.encode(version) != empty.encode(version)


def test_null_and_empty_strings_stay_distinct():
    for version in (8, 12):
        null = MetadataResponse(cluster_id=None)
        empty = MetadataResponse(cluster_id="")
        assert MetadataResponse.decode(null.encode(version), version).cluster_id is None
        assert MetadataResponse.decode(empty.encode(version), version).cluster_id == ""


def test_null_in_a_non_nullable_field_is_refused_both_ways():
    with pytest.raises(CodecError):
        MetadataRequest(topics=None).encode(0)  # topics is nullable from v1 on
    broker = MetadataResponse.MetadataResponseBroker(host=None)
    with pytest.raises(CodecError):
        MetadataResponse(brokers=[broker]).encode(12)
    # A compact string of length "-1" (varint 0) where the field is not nullable.
    data = bytearray(MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(host="h")]).encode(12))
    host_at = data.index(b"\x02h")
    data[host_at:host_at + 2] = b"\x00"
    with pytest.raises(CodecError, match="non-nullable"):
        MetadataResponse.decode(bytes(data), 12)


def test_uuid_round_trips_and_zero_is_default():
    topic_id = uuid.uuid4()
    topic = MetadataResponse.MetadataResponseTopic(name="t", topic_id=topic_id)
    decoded = MetadataResponse.decode(MetadataResponse(topics=[topic]).encode(12), 12)
    assert decoded.topics[0].topic_id == topic_id
    assert MetadataResponse.MetadataResponseTopic().topic_id == uuid.UUID(int=0)


def test_decoded_uuids_are_ordinary_uuids():
    for value in (uuid.UUID(int=0), uuid.UUID(int=1), uuid.uuid4(), uuid.UUID(int=2**128 - 1)):
        decoded = codec.uuid_from(value.bytes)
        assert decoded == value and hash(decoded) == hash(value) and str(decoded) == str(value)
        assert decoded.version == value.version and decoded.is_safe == uuid.SafeUUID.unknown
        assert pickle.loads(pickle.dumps(decoded)) == value


def test_float64_round_trips():
    cls = message_class("DescribeClientQuotasResponse")
    entry_cls = next(f.struct for f in cls._schema if f.name == "entries")
    value_cls = next(f.struct for f in entry_cls._schema if f.name == "values")
    value = value_cls(key="producer_byte_rate", value=-1.5e300)
    decoded = cls.decode(cls(entries=[entry_cls(values=[value])]).encode(1), 1)
    assert decoded.entries[0].values[0].value == -1.5e300


def test_tagged_fields_are_written_only_when_they_differ_from_their_default():
    plain = ApiVersionsResponse().encode(3)
    assert plain[-1] == 0, "the top-level tagged-field count must be 0 for defaults"
    with_tag = ApiVersionsResponse(finalized_features_epoch=5).encode(3)
    assert len(with_tag) > len(plain)
    decoded = ApiVersionsResponse.decode(with_tag, 3)
    assert decoded.finalized_features_epoch == 5
    assert ApiVersionsResponse.decode(plain, 3).finalized_features_epoch == -1


def test_unknown_tagged_fields_are_kept_and_written_back_in_tag_order():
    message = ApiVersionsResponse(finalized_features_epoch=7, _unknown_tagged=[(9, b"x"), (40, b"yz")])
    data = message.encode(3)
    decoded = ApiVersionsResponse.decode(data, 3)
    assert decoded._unknown_tagged == [(9, b"x"), (40, b"yz")]
    assert decoded.finalized_features_epoch == 7
    assert decoded.encode(3) == data
    # Three tags sorted: 1 (known, int64), 9 and 40 (unknown), each as tag, size, data.
    assert data.endswith(b"\x03" + b"\x01\x08" + (7).to_bytes(8, "big") + b"\x09\x01x" + b"\x28\x02yz")


def test_records_decode_zero_copy_and_encode_from_bytes_or_slices():
    batch = bytes(range(200))
    partition = ProduceRequest.PartitionProduceData(index=0, records=batch)
    request = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(name="t", partition_data=[partition])])
    data = request.encode(11)
    decoded = ProduceRequest.decode(data, 11)
    records = decoded.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is not None and bytes(records) == batch
    assert ProduceRequest.decode(ProduceRequest().encode(3), 3).topic_data == []

    class Slice:
        size = len(batch)

        def read_bytes(self):
            return batch

    partition.records = Slice()
    frame = FrameBuffer()
    request.encode(11, frame)
    assert len(frame) == len(data) - len(batch)
    [(at, hole)] = frame.holes
    assert bytes(frame[:at]) + batch + bytes(frame[at:]) == data
    assert request.encode(11) == data  # a plain bytearray target materialises the slice


def test_null_records_are_distinct_from_empty():
    for version in (4, 12):
        for records in (None, b""):
            partition = FetchResponse.PartitionData(records=records)
            response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[partition])])
            back = FetchResponse.decode(response.encode(version), version)
            got = back.responses[0].partitions[0].records
            assert (got is None) == (records is None)


def test_fixed_arrays_short_and_long_round_trip():
    """Short arrays go through precompiled structs, long ones through the generic reader."""
    for count in (0, 1, 31, 32, 33, 500):
        partition = MetadataResponse.MetadataResponsePartition(replica_nodes=list(range(count)),
                                                               isr_nodes=[-1] * count)
        message = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="t", partitions=[partition])])
        for version in (0, 12):
            decoded = MetadataResponse.decode(message.encode(version), version)
            assert decoded.topics[0].partitions[0].replica_nodes == list(range(count))
            assert decoded.topics[0].partitions[0].isr_nodes == [-1] * count


def test_compact_lengths_around_the_one_byte_varint_limit():
    for size in (125, 126, 127, 128, 300, 20000):
        broker = MetadataResponse.MetadataResponseBroker(host="h" * size, rack="r" * size)
        topics = [MetadataResponse.MetadataResponseTopic(name=str(i)) for i in range(size % 200)]
        message = MetadataResponse(brokers=[broker], topics=topics, cluster_id="c" * size)
        assert roundtrip(message, 12) == message
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t" * size)])
        assert roundtrip(request, 12) == request


def test_a_field_a_version_cannot_carry_is_refused():
    with pytest.raises(UnsupportedVersionError):
        MetadataResponse(cluster_authorized_operations=5).encode(11)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest(include_topic_authorized_operations=True).encode(7)


def test_encode_appends_to_the_given_buffer():
    out = bytearray(b"head")
    assert MetadataRequest().encode(12, out) is out
    assert out.startswith(b"head") and len(out) > 4


def test_decode_from_reports_where_the_message_ends():
    data = b"pad" + bytes(MetadataRequest(topics=[]).encode(12)) + b"trailer"
    message, end = MetadataRequest.decode_from(data, 12, 3)
    assert message.topics == [] and data[end:] == b"trailer"


def test_unknown_version_is_refused():
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest.decode(b"", 99)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest().encode(-1)


# --- the generated code against the schemas --------------------------------------------------------

def load_generator():
    spec = importlib.util.spec_from_file_location("gen_messages", REPO / "tools" / "gen_messages.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while building
    spec.loader.exec_module(module)
    return module


def clients_jar(profile: str) -> Path | None:
    """The kafka-clients jar of a profile of the jar cache (scripts/fetch-jars.sh), None when missing."""
    try:
        return load_generator().clients_jar(profile)
    except FileNotFoundError:
        return None


NEWEST_JAR, OLDER_JAR = clients_jar("kafka4"), clients_jar("kafka39")
needs_schemas = pytest.mark.needs_input(
    NEWEST_JAR is not None and OLDER_JAR is not None,
    "Kafka's message schemas in the kafka-clients jars of the kafka4 and kafka39 jar caches: "
    "run bash scripts/fetch-jars.sh kafka4 kafka39")


@needs_schemas
def test_generated_code_is_up_to_date(tmp_path):
    load_generator().generate(NEWEST_JAR, tmp_path, OLDER_JAR)
    assert_same_modules(tmp_path, GENERATED, "run python tools/gen_messages.py")


def assert_same_modules(fresh_dir: Path, committed_dir: Path, hint: str) -> None:
    fresh = {p.name: p.read_text() for p in fresh_dir.glob("*.py")}
    committed = {p.name: p.read_text() for p in committed_dir.glob("*.py")}
    assert sorted(fresh) == sorted(committed), f"modules added or removed: {hint}"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale generated modules ({hint}): {stale[:5]}"


def test_generated_records_are_up_to_date(tmp_path):
    generator = load_generator()
    try:
        sources = generator.default_record_sources()
    except FileNotFoundError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must check the generated coordinator records against Kafka's jars: {e}")
        pytest.skip(str(e))
    generator.generate_records(sources, tmp_path)
    assert_same_modules(tmp_path, GENERATED_RECORDS, "run python tools/gen_messages.py --records")


def metadata_jar() -> Path | None:
    try:
        return load_generator().default_metadata_source()
    except FileNotFoundError:
        return None


METADATA_JAR = metadata_jar()


@pytest.mark.needs_input(METADATA_JAR is not None,
                         "Kafka's metadata record schemas in the kafka-metadata jar of the kafka4 jar cache: "
                         "run bash scripts/fetch-jars.sh kafka4")
def test_generated_metadata_records_are_up_to_date(tmp_path):
    load_generator().generate_metadata_records(METADATA_JAR, tmp_path)
    assert_same_modules(tmp_path, GENERATED_METADATA_RECORDS, "run python tools/gen_messages.py --metadata-records")


def version_range(text: str) -> tuple[int, int]:
    if text.endswith("+"):
        return int(text[:-1]), 32767
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def assert_matches_schema(cls: type[Message], schema: dict) -> None:
    """The newest schema's versions are the class's, above the versions kept from Kafka 3.9."""
    assert cls.__name__ == schema["name"] and cls.API_KEY == schema["apiKey"]
    lo, hi = cls.VALID_VERSIONS
    current = (lo if cls.REMOVED_VERSIONS is None else cls.REMOVED_VERSIONS[1] + 1, hi)
    assert current == version_range(schema["validVersions"])
    flexible = schema.get("flexibleVersions", "none")
    assert cls.FLEXIBLE_VERSIONS == (None if flexible == "none" else version_range(flexible))


@needs_schemas
def test_every_broker_api_and_version_is_generated():
    """Every request a broker listens to, and its response, with the newest schema's versions."""
    schemas = {name: data for name, (data, _) in load_generator().read_schemas(NEWEST_JAR).items()}
    checked = 0
    for name, request in sorted(schemas.items()):
        if not name.endswith("Request") or "broker" not in request.get("listeners", []):
            continue
        response = schemas[name.removesuffix("Request") + "Response"]
        _, request_name, _, response_name = APIS[request["apiKey"]]
        assert_matches_schema(message_class(request_name), request)
        assert_matches_schema(message_class(response_name), response)
        checked += 1
    assert checked >= 60, "the broker listens to some 70 apis: the schema directory looks incomplete"


def test_generated_modules_expose_their_field_schema():
    for cls in ALL_CLASSES:
        assert tuple(f.name for f in cls._schema) == cls._fields
        for f in cls._schema:
            assert (f.struct is not None) == (f.type.lstrip("[]")[:1].isupper())


def test_codec_defaults_are_fresh_per_instance():
    a, b = MetadataResponse(), MetadataResponse()
    a.topics.append(1)
    assert b.topics == []
