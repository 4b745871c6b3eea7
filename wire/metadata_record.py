"""The framing of KRaft metadata records, the values of `__cluster_metadata`'s records, as Kafka's
MetadataRecordSerde writes them: a frame version (1), the record's api key and its version, each an
unsigned varint, then the record at that version. The records are generated from Kafka's schemas
(wire/metadata_records/, by tools/gen_messages.py --metadata-records).
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from .codec import Message, read_uvarint, uvarint
from .exceptions import CodecError
from .metadata_records import METADATA_RECORDS

__all__ = ["FRAME_VERSION", "MetadataRecordError", "metadata_record_class", "encode_metadata_record",
           "decode_metadata_record"]

FRAME_VERSION = 1  # Kafka's AbstractApiMessageSerde.DEFAULT_FRAME_VERSION


class MetadataRecordError(CodecError):
    """A record value that is not a metadata record this Samsa knows: another frame version, an
    unknown record type or version, or bytes that do not follow the record's layout."""


@cache
def metadata_record_class(api_key: int) -> type[Message]:
    entry = METADATA_RECORDS.get(api_key)
    if entry is None:
        raise MetadataRecordError(f"unknown metadata record type {api_key}")
    module, name = entry
    return getattr(importlib.import_module(f"{__package__}.metadata_records.{module}"), name)


def encode_metadata_record(record: Message, version: int) -> bytes:
    if record.API_KEY is None:  # a struct or header, not one of the records
        raise MetadataRecordError(f"{type(record).__name__} is not a metadata record")
    out = bytearray(uvarint(FRAME_VERSION) + uvarint(record.API_KEY) + uvarint(version))
    record.encode(version, out)
    return bytes(out)


def decode_metadata_record(value: bytes | memoryview) -> tuple[Any, int]:
    """The record (of the class its api key names: callers dispatch on isinstance) and its version."""
    try:
        frame, pos = read_uvarint(value, 0)
        api_key, pos = read_uvarint(value, pos)
        version, pos = read_uvarint(value, pos)
    except (IndexError, CodecError) as e:
        raise MetadataRecordError(f"malformed metadata record frame: {e}") from None
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"metadata record of frame version {frame}, not {FRAME_VERSION}")
    cls = metadata_record_class(api_key)
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise MetadataRecordError(f"unknown {cls.__name__} version {version} (this Samsa reads {lo}-{hi})")
    try:
        return cls.decode(memoryview(value), version, pos), version
    except CodecError as e:
        raise MetadataRecordError(f"{cls.__name__} v{version}: {e}") from None
