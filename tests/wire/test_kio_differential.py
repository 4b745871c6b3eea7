"""Differential test against kio (a Kafka codec generated independently, with a native reader).

For every api, version and direction both codecs know with the same fields, a message drawn by
hypothesis is encoded by kio and decoded by Samsa, and encoded by Samsa and decoded by kio; the
bytes of the two encoders must match too. kio wraps some values in its own types (ErrorCode, timedelta
for *_ms durations, datetime for *_timestamp, None for the zero uuid) and drops the `_ms` suffix, so
values cross over through to_kio/from_kio; values kio cannot represent (unknown error codes, times
outside datetime's range) are first replaced by ones it can.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import sys
import typing
import uuid
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

kio_index = pytest.importorskip("kio.index")
from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.index import api_key_map, schema_name_map  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402

from samsa.wire.codec import ZERO_UUID, Struct  # noqa: E402
from samsa.wire.messages import APIS  # noqa: E402
from samsa.wire.protocol import RequestHeader, ResponseHeader, request_class, response_class  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from wire_strategies import message_strategy  # noqa: E402

UTC = datetime.timezone.utc
VALID_ERROR_CODES = sorted(e.value for e in ErrorCode)


# --- matching kio's entities with ours -------------------------------------------------------------

def entity_in(annotation) -> type | None:
    """The kio dataclass inside an annotation such as `tuple[X, ...] | None`."""
    if dataclasses.is_dataclass(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        if arg is not Ellipsis and (found := entity_in(arg)) is not None:
            return found
    return None


def samsa_name(kio_name: str, ours: dict) -> str | None:
    for candidate in (kio_name, kio_name + "_ms", kio_name.rstrip("_")):
        if candidate in ours:
            return candidate
    return None


@cache
def field_pairs(kio_cls: type, samsa_cls: type[Struct], version: int):
    """[(kio field, our FieldInfo, nested kio class)], or None when the two disagree on the fields."""
    ours = {f.name: f for f in samsa_cls._schema if f.in_version(version)}
    pairs = []
    for kf in dataclasses.fields(kio_cls):
        name = samsa_name(kf.name, ours)
        if name is None:
            return None
        info = ours.pop(name)
        nested = entity_in(kf.type) if info.struct is not None else None
        if info.struct is not None and (nested is None or field_pairs(nested, info.struct, version) is None):
            return None
        pairs.append((kf, info, nested))
    return None if ours else pairs


# --- values across -------------------------------------------------------------------------------

# kio's own conversions, through float seconds: lossy past 2**53 microseconds, hence `representable`.
def ms_to_datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, tz=UTC)


def datetime_to_ms(value: datetime.datetime) -> int:
    return round(value.timestamp() * 1000)


def scalar_to_kio(kf: dataclasses.Field, value):
    kio_type = kf.metadata.get("kafka_type")
    if kio_type == "error_code":
        return ErrorCode(value)
    if kio_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=value)
    if kio_type == "datetime_i64":
        if value == -1 and type(None) in typing.get_args(kf.type):
            return None
        if value < 0:
            raise ValueError("kio's datetimes are not before 1970")
        return ms_to_datetime(value)
    if kio_type == "uuid" and value == ZERO_UUID and type(None) in typing.get_args(kf.type):
        return None  # kio's default, which it leaves out of tagged fields as we do
    return value


def scalar_from_kio(kio_type: str, value):
    if kio_type == "error_code":
        return int(value)
    if kio_type in ("timedelta_i32", "timedelta_i64"):
        return round(value.total_seconds() * 1000)
    if kio_type == "datetime_i64":
        return -1 if value is None else datetime_to_ms(value)
    if kio_type == "uuid":
        return ZERO_UUID if value is None else value
    if kio_type in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


def representable(kf: dataclasses.Field, value) -> bool:
    """Whether kio's types carry `value` there and back unchanged."""
    try:
        return scalar_from_kio(kf.metadata.get("kafka_type"), scalar_to_kio(kf, value)) == value
    except (ValueError, OverflowError):
        return False


def representable_stand_in(kio_type: str, value):
    if kio_type == "error_code":
        return VALID_ERROR_CODES[value % len(VALID_ERROR_CODES)]
    return value % 10**12  # milliseconds within datetime's and a float's exact range


def normalize(message: Struct, kio_cls: type, version: int) -> None:
    """Replace, in place, the values of `message` that kio's types cannot carry."""
    for kf, info, nested in field_pairs(kio_cls, type(message), version):
        value = getattr(message, info.name)
        if value is None:
            continue
        if nested is not None:
            for item in value if info.is_array else [value]:
                normalize(item, nested, version)
            continue
        kio_type = kf.metadata.get("kafka_type")
        if info.is_array:
            setattr(message, info.name, [x if representable(kf, x) else representable_stand_in(kio_type, x)
                                         for x in value])
        elif not representable(kf, value):
            setattr(message, info.name, representable_stand_in(kio_type, value))


def to_kio(message: Struct, kio_cls: type, version: int):
    values = {}
    for kf, info, nested in field_pairs(kio_cls, type(message), version):
        value = getattr(message, info.name)
        convert = (lambda v, nested=nested: to_kio(v, nested, version)) if nested else (lambda v, kf=kf: scalar_to_kio(kf, v))
        if value is None:
            values[kf.name] = None
        elif info.is_array:
            values[kf.name] = tuple(convert(x) for x in value)
        else:
            values[kf.name] = convert(value)
    return kio_cls(**values)


def from_kio(entity, samsa_cls: type[Struct], version: int) -> Struct:
    message = samsa_cls()
    for kf, info, nested in field_pairs(type(entity), samsa_cls, version):
        value = getattr(entity, kf.name)
        kio_type = kf.metadata.get("kafka_type")
        convert = ((lambda v, info=info: from_kio(v, info.struct, version)) if nested
                   else (lambda v, kio_type=kio_type: scalar_from_kio(kio_type, v)))
        if value is None and (nested is not None or info.is_array):
            setattr(message, info.name, None)
        elif info.is_array:
            setattr(message, info.name, [convert(x) for x in value])
        else:
            setattr(message, info.name, convert(value))
    return message


# --- the cases -----------------------------------------------------------------------------------

def kio_class(kio_name: str, version: int, entity_type: EntityType) -> type | None:
    try:
        return kio_index.load_entity_schema(kio_name, version, entity_type)
    except kio_index.KioIndexError:
        return None


def cases():
    """(our class, version, kio class, why not comparable or None) for every version both know."""
    found = []
    for api_key, kio_name in sorted(api_key_map.items()):
        if api_key not in APIS:
            continue
        for ours, entity_type in ((request_class(api_key), EntityType.request),
                                  (response_class(api_key), EntityType.response)):
            for version in range(ours.VALID_VERSIONS[0], ours.VALID_VERSIONS[1] + 1):
                if (kio_cls := kio_class(kio_name, version, entity_type)) is not None:
                    found.append((ours, version, kio_cls))
    for ours, kio_name in ((RequestHeader, "request_header"), (ResponseHeader, "response_header")):
        for version in schema_name_map[kio_name]:
            found.append((ours, version, kio_class(kio_name, version, EntityType.header)))
    return found


CASES = cases()
COMPARABLE = [c for c in CASES if field_pairs(c[2], c[0], c[1]) is not None]


def case_id(case) -> str:
    return f"{case[0].__name__}-v{case[1]}"


def kio_encode(entity) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def test_most_versions_are_comparable():
    """kio follows a newer Kafka, whose schemas changed some versions: those are left out, few."""
    assert len(CASES) > 500
    assert len(COMPARABLE) > 0.95 * len(CASES)


@pytest.mark.parametrize("case", COMPARABLE, ids=case_id)
def test_kio_and_samsa_agree(case):
    cls, version, kio_cls = case
    reader = entity_reader(kio_cls)

    @settings(max_examples=4, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(message_strategy(cls, version, unknown_tags=False))
    def check(message):
        normalize(message, kio_cls, version)
        ours = bytes(message.encode(version))
        theirs = kio_encode(to_kio(message, kio_cls, version))
        assert cls.decode(theirs, version) == message, "Samsa misreads kio's bytes"
        entity, size = reader(ours, 0)
        assert size == len(ours)
        assert from_kio(entity, cls, version) == message, "kio misreads Samsa's bytes"
        assert ours == theirs

    check()


def test_a_known_message_reads_the_same_in_both():
    cls = response_class(3)
    kio_cls = kio_index.load_response_schema(3, 12)
    topic = cls.MetadataResponseTopic(error_code=3, name="orders", topic_id=uuid.uuid4(), partitions=[
        cls.MetadataResponsePartition(partition_index=2, leader_id=1, replica_nodes=[1, 2], isr_nodes=[1])])
    message = cls(throttle_time_ms=250, brokers=[cls.MetadataResponseBroker(node_id=1, host="h", port=9092)],
                  cluster_id="c", controller_id=1, topics=[topic])
    entity, _ = entity_reader(kio_cls)(bytes(message.encode(12)), 0)
    assert entity.throttle_time == datetime.timedelta(milliseconds=250)
    assert entity.topics[0].error_code is ErrorCode.unknown_topic_or_partition
    assert entity.topics[0].partitions[0].replica_nodes == (1, 2)
    assert from_kio(entity, cls, 12) == message
