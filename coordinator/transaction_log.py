"""The records of `__transaction_state`: Kafka's TransactionLogKey and TransactionLogValue (the
generated codecs of wire/coordinator_records/), so Kafka's tools read them and a log directory moves
between the two. This module maps them to and from TxnTransitMetadata.

Values are written at v1 (flexible), as Kafka writes them from transaction.version 1, with the
fields transactions of version 2 need: the previous and next producer ids (tagged) and the client's
transaction version. v0 is read too. A value of None is a tombstone: the transactional id expired
(and compaction eventually drops it).
"""

from __future__ import annotations

from typing import NamedTuple

from ..wire import coordinator_record
from ..wire.coordinator_record import TRANSACTION_COORDINATOR, RecordFormatError
from ..wire.coordinator_records.transaction_log_key import TransactionLogKey
from ..wire.coordinator_records.transaction_log_value import PartitionsSchema, TransactionLogValue
from ..wire.records import NO_PRODUCER_EPOCH
from .transaction_metadata import TransactionState, TxnTransitMetadata

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnRecord", "encode_key", "encode_value", "read_record"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
# Kafka writes v1 (flexible) from transaction.version 1 (TransactionVersion.transactionLogValueVersion).
VALUE_VERSION = 1


class TxnRecord(NamedTuple):
    transactional_id: str
    value: TxnTransitMetadata | None  # None: a tombstone


def encode_key(transactional_id: str) -> bytes:
    return coordinator_record.encode_key(TransactionLogKey(transactional_id=transactional_id))


def encode_value(transit: TxnTransitMetadata) -> bytes:
    if transit.txn_state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"Transaction is not expected to have any partitions since its state is Empty: {transit}")
    partitions = None
    if transit.txn_state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [PartitionsSchema(topic=topic, partition_ids=ids)
                      for topic, ids in by_topic.items()]
    return coordinator_record.encode_value(TransactionLogValue(
        producer_id=transit.producer_id, producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms, transaction_status=transit.txn_state.id,
        transaction_partitions=partitions, transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp, previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id, client_transaction_version=transit.client_transaction_version),
        VALUE_VERSION)


def read_record(key: bytes, value: bytes | None) -> TxnRecord:
    """The transactional id and its state (None for a tombstone); RecordFormatError for a key or
    value of an unknown type, version or layout."""
    record = coordinator_record.decode_record(TRANSACTION_COORDINATOR, key, value)
    transactional_id = record.key.transactional_id
    v = record.value
    if v is None:
        return TxnRecord(transactional_id, None)
    try:
        state = TransactionState.from_id(v.transaction_status)
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state is not TransactionState.EMPTY:
        partitions = frozenset((p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids)
    # As Kafka's TransactionLog.read: the last producer epoch is not kept.
    return TxnRecord(transactional_id, TxnTransitMetadata(
        v.producer_id, v.previous_producer_id, v.producer_epoch, NO_PRODUCER_EPOCH, v.transaction_timeout_ms, state,
        partitions, v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms, v.next_producer_id,
        v.client_transaction_version))
