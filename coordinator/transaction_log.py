"""The records of `__transaction_state`: Kafka's TransactionLogKey and TransactionLogValue layouts,
so Kafka's tools read them and a log directory moves between the two.

    TransactionLogKey    v0  transactional_id string
    TransactionLogValue  v0  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                             transaction_status int8, transaction_partitions [topic string,
                             partition_ids [int32]] (null when Empty), last_update_timestamp_ms int64,
                             start_timestamp_ms int64
                         v1  v0 in the flexible encoding, with tagged fields (previous and next
                             producer ids, the client's transaction version) that transactions of
                             version 2 use; read, their tags skipped

Values are written at v0, as Kafka writes them for transaction versions 0 and 1. A value of None is
a tombstone: the transactional id expired (and compaction eventually drops it).
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from ..wire.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from .record_codec import RecordFormatError, RecordReader, RecordWriter
from .transaction_metadata import TransactionState, TxnTransitMetadata

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnRecord", "encode_key", "encode_value", "read_record"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0  # Kafka's CoordinatorRecordType.TRANSACTION_LOG
VALUE_VERSION = 0


class TxnRecord(NamedTuple):
    transactional_id: str
    value: TxnTransitMetadata | None  # None: a tombstone


def encode_key(transactional_id: str) -> bytes:
    w = RecordWriter(KEY_VERSION, False)
    w.string(transactional_id)
    return bytes(w.out)


def encode_value(transit: TxnTransitMetadata) -> bytes:
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {transit}")
    w = RecordWriter(VALUE_VERSION, False)
    w.int64(transit.producer_id)
    w.int16(transit.producer_epoch)
    w.int32(transit.txn_timeout_ms)
    w.int8(transit.txn_state.id)
    if transit.txn_state is TransactionState.EMPTY:
        w.length(None, wide=True)
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(transit.topic_partitions):
            by_topic[topic].append(partition)
        w.array(len(by_topic))
        for topic, partitions in by_topic.items():
            w.string(topic)
            w.array(len(partitions))
            for partition in partitions:
                w.int32(partition)
            w.end_struct()
    w.int64(transit.txn_last_update_timestamp)
    w.int64(transit.txn_start_timestamp)
    w.end_struct()
    return bytes(w.out)


def read_record(key: bytes, value: bytes | None) -> TxnRecord:
    """The transactional id and its state (None for a tombstone); RecordFormatError for a key or
    value of an unknown version or layout."""
    k = RecordReader(key, "TransactionLogKey")
    if k.version != KEY_VERSION:
        raise RecordFormatError(f"Unknown version {k.version} from the transaction log message key")
    transactional_id = k.string()
    if value is None:
        return TxnRecord(transactional_id, None)
    v = RecordReader(value, "TransactionLogValue")
    if v.version not in (0, 1):
        raise RecordFormatError(f"Unknown version {v.version} from the transaction log message value")
    v.flexible = v.version >= 1
    producer_id, producer_epoch, timeout_ms = v.int64(), v.int16(), v.int32()
    try:
        state = TransactionState.from_id(v.int8())
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    partitions = set()
    for _ in range(v.array()):
        topic = v.string()
        partitions.update((topic, v.int32()) for _ in range(v.array()))
        v.skip_tagged_fields()
    last_update, start = v.int64(), v.int64()
    v.skip_tagged_fields()
    if state is TransactionState.EMPTY:
        partitions = set()
    return TxnRecord(transactional_id, TxnTransitMetadata(
        producer_id, NO_PRODUCER_ID, producer_epoch, NO_PRODUCER_EPOCH, timeout_ms, state, frozenset(partitions),
        start, last_update))
