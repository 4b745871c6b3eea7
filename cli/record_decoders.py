"""How `samsa dump-log` shows a record's key and value, as Kafka's DumpLogSegments parsers do:
UTF-8 text by default; the internal topics' records decoded (wire/coordinator_record.py,
wire/metadata_record.py) and printed as JSON in the shape of Kafka's JSON converters. A parser
gives (key, payload), either None when there is nothing to print.
"""

from __future__ import annotations

import struct
from typing import Any, Protocol

from ..coordinator.transaction_metadata import TransactionState
from ..wire.codec import Message
from ..wire.coordinator_record import (
    GROUP_COORDINATOR, TRANSACTION_COORDINATOR, RecordFormatError, decode_record, record_classes, record_type,
)
from ..wire.exceptions import CodecError
from ..wire.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from ..wire.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from ..wire.messages.leader_change_message import LeaderChangeMessage
from ..wire.messages.snapshot_footer_record import SnapshotFooterRecord
from ..wire.messages.snapshot_header_record import SnapshotHeaderRecord
from ..wire.messages.voters_record import VotersRecord
from ..wire.metadata_record import decode_metadata_record
from ..wire.records import ControlRecordType, Record, parse_control_record
from ..wire.coordinator_records.group_metadata_value import GroupMetadataValue
from .message_json import message_json, to_json

CONSUMER_PROTOCOL_TYPE = "consumer"
_INT16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")  # version, type (also a KRaftVersionRecord: version, kRaftVersion)

# Kafka's ControlRecordType, by the type id in a control record's key.
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER", 4: "SNAPSHOT_FOOTER",
                      5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
# The control records Kafka prints as JSON: the name it prints and the record's class.
_CONTROL_JSON: dict[int, tuple[str, type[Message]]] = {
    2: ("LeaderChange:", LeaderChangeMessage), 3: ("SnapshotHeader", SnapshotHeaderRecord),
    4: ("SnapshotFooter", SnapshotFooterRecord), 6: ("KRaftVoters", VotersRecord)}
KRAFT_VERSION = 5  # its record (version, kRaftVersion: two int16s) has no generated class here


def describe_control_record(record: Record) -> str:
    """What DumpLogSegments appends to a control record's line."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        return " controlType: UNKNOWN(-1)"
    type_id = _CONTROL_KEY.unpack_from(record.key)[1]
    if type_id in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        marker = parse_control_record(record)
        return f" endTxnMarker: {marker.type.name} coordinatorEpoch: {marker.coordinator_epoch}"
    if type_id in _CONTROL_JSON and record.value is not None:
        # The value is the record at version 0 (Kafka's ControlRecordUtils), shown at the version
        # its own `version` field names.
        name, cls = _CONTROL_JSON[type_id]
        message = cls.decode(memoryview(bytes(record.value)), 0)
        return f" {name} {to_json(message_json(message, message.version))}"
    if type_id == KRAFT_VERSION and record.value is not None and len(record.value) >= _CONTROL_KEY.size:
        version, kraft_version = _CONTROL_KEY.unpack_from(record.value)
        return f" KRaftVersion {to_json({'version': version, 'kRaftVersion': kraft_version})}"
    return f" controlType: {CONTROL_TYPE_NAMES.get(type_id, 'UNKNOWN')}({type_id})"


class KeyValue(Protocol):
    """What a parser reads of a record: a v2 batch's Record or a legacy (v0, v1) message."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


class RecordDecoder:
    """Kafka's StringDecoder for both: the bytes as UTF-8 (malformed bytes become U+FFFD)."""

    def parse(self, offset: int, record: KeyValue) -> tuple[str | None, str | None]:
        key = None if record.key is None else bytes(record.key).decode("utf-8", "replace")
        value = None if record.value is None else bytes(record.value).decode("utf-8", "replace")
        return key, value


class CoordinatorRecordDecoder(RecordDecoder):
    """A coordinator's records: the key as {"type": record type, "data": key}, the value as
    {"version": its version, "data": value}, or <DELETE> for a tombstone."""

    coordinator = GROUP_COORDINATOR
    topic = "__consumer_offsets"

    def parse(self, offset: int, record: KeyValue) -> tuple[str | None, str | None]:
        if record.key is None:
            raise CodecError(f"Failed to decode message at offset {offset} using {self.topic} "
                             "topic decoder (message had a missing key)")
        key = bytes(record.key)
        try:
            kind = record_type(key)
            record_classes(self.coordinator, kind)
        except RecordFormatError:
            return f"Unknown record type {_INT16.unpack_from(key)[0] if len(key) >= 2 else -1} " \
                   f"at offset {offset}, skipping.", None
        try:
            decoded = decode_record(self.coordinator, key, None if record.value is None else bytes(record.value))
            key_json = to_json({"type": str(kind), "data": message_json(decoded.key, 0)})
            if decoded.value is None:
                return key_json, "<DELETE>"
            value_json = self.value_json(decoded.value, decoded.version)
            return key_json, to_json({"version": str(decoded.version), "data": value_json})
        except (CodecError, ValueError) as e:
            return f"Error at offset {offset}, skipping. {e}", None

    def value_json(self, value: Any, version: int) -> dict[str, Any]:
        return message_json(value, version)


class OffsetsDecoder(CoordinatorRecordDecoder):
    """__consumer_offsets: a classic group's members' subscriptions and assignments are shown
    decoded when the group uses the consumer protocol, as Kafka shows them."""

    def value_json(self, value: Any, version: int) -> dict[str, Any]:
        node = message_json(value, version)
        if isinstance(value, GroupMetadataValue) and value.protocol_type == CONSUMER_PROTOCOL_TYPE:
            for member, member_node in zip(value.members, node.get("members", [])):
                embedded(member_node, "subscription", member.subscription, ConsumerProtocolSubscription)
                embedded(member_node, "assignment", member.assignment, ConsumerProtocolAssignment)
        return node


def embedded(node: dict[str, Any], field: str, data: bytes | None, cls: type[Message]) -> None:
    """Replace the bytes of a consumer protocol message by the message (a version, then the message
    at it); left as bytes when they are not one."""
    if data is None or field not in node:
        return
    try:
        version = _INT16.unpack_from(data)[0]
        node[field] = message_json(cls.decode(memoryview(bytes(data)), version, 2), version)
    except (CodecError, struct.error, ValueError, IndexError):
        pass


class TransactionLogDecoder(CoordinatorRecordDecoder):
    """__transaction_state: the transaction's status by its name (Empty, Ongoing, ...), as Kafka shows it."""

    coordinator = TRANSACTION_COORDINATOR
    topic = "__transaction_state"

    def value_json(self, value: Any, version: int) -> dict[str, Any]:
        node = message_json(value, version)
        if "transactionStatus" in node:
            try:
                node["transactionStatus"] = TransactionState.from_id(node["transactionStatus"]).state_name
            except ValueError:
                pass
        return node


class ClusterMetadataDecoder(RecordDecoder):
    """__cluster_metadata: no key; the value as {"type": RECORD_TYPE, "version": n, "data": record}."""

    def parse(self, offset: int, record: KeyValue) -> tuple[str | None, str | None]:
        try:
            if record.value is None:
                raise CodecError("the record has no value")
            message, version = decode_metadata_record(bytes(record.value))
            text = to_json({"type": metadata_record_type_name(type(message).__name__), "version": version,
                            "data": message_json(message, version)})
        except (CodecError, ValueError) as e:
            text = f"Error at {offset}, skipping. {e}"
        return None, text


def metadata_record_type_name(class_name: str) -> str:
    """Kafka's MetadataRecordType constant of a record class: TopicRecord is TOPIC_RECORD."""
    out = []
    for i, ch in enumerate(class_name):
        if ch.isupper() and i and (not class_name[i - 1].isupper() or
                                   (i + 1 < len(class_name) and class_name[i + 1].islower())):
            out.append("_")
        out.append(ch.upper())
    return "".join(out)


def decoder_for(*, offsets: bool = False, transactions: bool = False,
                cluster_metadata: bool = False) -> RecordDecoder | None:
    if offsets:
        return OffsetsDecoder()
    if transactions:
        return TransactionLogDecoder()
    if cluster_metadata:
        return ClusterMetadataDecoder()
    return None
