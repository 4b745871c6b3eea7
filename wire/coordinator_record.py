"""The framing of coordinator records: the keys and values of `__consumer_offsets`,
`__transaction_state` and `__share_group_state`, as Kafka's CoordinatorRecordSerde writes them.

A key is its record type (an int16: the key schema's apiKey, CoordinatorRecordType in Kafka) and
then the key message at version 0. Before Kafka 4 the int16 was called the key's version; the
values are the same (0 and 1 an offset commit, 2 a classic group's metadata, 0 a transaction).
A value is its version (an int16) and then the value message at that version; None is a
tombstone. The messages are generated from Kafka's schemas (wire/coordinator_records/, by
tools/gen_messages.py --records); the coordinators choose the versions they write.
"""

from __future__ import annotations

import importlib
import struct
from functools import cache
from typing import Any, NamedTuple, TypeVar

from .codec import Message
from .coordinator_records import RECORD_TYPES
from .exceptions import CodecError

__all__ = [
    "GROUP_COORDINATOR", "TRANSACTION_COORDINATOR", "SHARE_COORDINATOR", "CoordinatorRecord", "RecordFormatError",
    "record_type", "record_classes", "encode_key", "encode_value", "encode_record", "decode_key", "decode_value",
    "decode_record",
]

# The coordinators, as RECORD_TYPES names them (the topic each writes to).
GROUP_COORDINATOR = "group"  # __consumer_offsets
TRANSACTION_COORDINATOR = "transaction"  # __transaction_state
SHARE_COORDINATOR = "share"  # __share_group_state

KEY_VERSION = 0
_TYPE = struct.Struct(">h")


class RecordFormatError(CodecError):
    """A key or value that is not a record its coordinator knows, or does not follow its layout."""


M = TypeVar("M", bound=Message)


class CoordinatorRecord(NamedTuple):
    # Any to the code that reads them, as a request's message is to its handler: a decoded record's
    # classes are chosen by the record type in its key's bytes (callers dispatch on isinstance).
    key: Any  # a Message
    value: Any  # a Message, or None: a tombstone
    version: int = 0  # the value's


def record_type(key: bytes) -> int:
    """The record type a key starts with."""
    if len(key) < 2:
        raise RecordFormatError(f"record key of {len(key)} bytes")
    return _TYPE.unpack_from(key, 0)[0]


@cache
def record_classes(coordinator: str, record_type: int) -> tuple[type[Message], type[Message]]:
    """The key and value classes of a record type; RecordFormatError for a type the coordinator
    does not have."""
    entry = RECORD_TYPES[coordinator].get(record_type)
    if entry is None:
        raise RecordFormatError(f"unknown {coordinator} coordinator record type {record_type}")
    key_module, key_class, value_module, value_class = entry
    package = __package__ + ".coordinator_records."
    return (getattr(importlib.import_module(package + key_module), key_class),
            getattr(importlib.import_module(package + value_module), value_class))


def encode_key(key: Message) -> bytes:
    out = bytearray(_TYPE.pack(key.API_KEY))
    key.encode(KEY_VERSION, out)
    return bytes(out)


def encode_value(value: Message, version: int) -> bytes:
    out = bytearray(_TYPE.pack(version))
    value.encode(version, out)
    return bytes(out)


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    key, value, version = record
    return encode_key(key), None if value is None else encode_value(value, version)


def decode_key(coordinator: str, key: bytes) -> Any:
    """The key message, of the class its record type names (Any: see CoordinatorRecord)."""
    key_class, _ = record_classes(coordinator, record_type(key))
    return _decode(key_class, KEY_VERSION, key)


def decode_value(value_class: type[M], value: bytes) -> tuple[M, int]:
    """The value and its version. Tagged fields this schema does not know are kept aside, unread."""
    if len(value) < 2:
        raise RecordFormatError(f"{value_class.__name__} of {len(value)} bytes")
    version = _TYPE.unpack_from(value, 0)[0]
    return _decode(value_class, version, value), version


def decode_record(coordinator: str, key: bytes, value: bytes | None) -> CoordinatorRecord:
    key_class, value_class = record_classes(coordinator, record_type(key))
    decoded_key = _decode(key_class, KEY_VERSION, key)
    if value is None:
        return CoordinatorRecord(decoded_key, None)
    return CoordinatorRecord(decoded_key, *decode_value(value_class, value))


def _decode(cls: type[M], version: int, data: bytes) -> M:
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise RecordFormatError(f"unknown {cls.__name__} version {version}")
    try:
        return cls.decode(memoryview(data), version, 2)
    except CodecError as e:
        raise RecordFormatError(f"{cls.__name__} v{version}: {e}") from None
