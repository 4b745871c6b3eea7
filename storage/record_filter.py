"""One record batch rewritten without the records the log cleaner drops (Kafka's
MemoryRecords.filterTo and buildRetainedRecordsInto).

A batch whose records all stay is kept byte for byte, unless it holds a tombstone and no delete
horizon yet: the cleaner stamps the horizon (now + delete.retention.ms) the first time it reaches
the tombstone, and removes the tombstone in a later pass once the horizon has passed. Any other
change rebuilds the batch with its base offset, last offset delta, producer id, epoch and base
sequence, partition leader epoch, attributes and codec; as Kafka's MemoryRecordsBuilder writes it,
the base timestamp becomes the delete horizon or else the first retained record's timestamp, and
every record keeps its own timestamp. A batch left without records is dropped, or kept as an empty
header where the producer state needs it (RETAIN_EMPTY).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from ..wire.records import LOG_APPEND_TIME, BatchHeader, Record, build_batch, decode_batch

__all__ = ["BatchRetention", "RetainRecord", "filter_batch"]

# (batch header, record offset, record) -> whether the record stays.
RetainRecord = Callable[[BatchHeader, int, Record], bool]


class BatchRetention(Enum):
    DELETE = "delete"  # the whole batch goes, whatever its records
    DELETE_EMPTY = "delete empty"  # the batch goes if none of its records stays
    RETAIN_EMPTY = "retain empty"  # at least the batch's header stays


def filter_batch(data, header: BatchHeader, retention: BatchRetention, should_retain: RetainRecord, *,
                 now_ms: int, delete_retention_ms: int,
                 stamp_delete_horizon: bool = False) -> tuple[bytes | memoryview | None, int]:
    """The batch to write in place of `data` (None: nothing) and how many records it keeps.
    `stamp_delete_horizon`: a transaction marker that may go gets a delete horizon (Kafka's
    containsMarkerForEmptyTxn) if it has none yet."""
    if retention is BatchRetention.DELETE:
        return None, 0
    _, records = decode_batch(data)
    retained = [r for r in records if should_retain(header, header.base_offset + r.offset_delta, r)]
    if not retained:
        if retention is BatchRetention.RETAIN_EMPTY:
            return _empty_batch(header), 0
        return None, 0
    needs_delete_horizon = not header.has_delete_horizon and (
        stamp_delete_horizon or any(r.value is None for r in retained))
    if len(retained) == len(records) and not needs_delete_horizon:
        return data, len(retained)
    delete_horizon: int | None
    if needs_delete_horizon:
        delete_horizon = now_ms + delete_retention_ms
    else:
        delete_horizon = header.base_timestamp if header.has_delete_horizon else None
    return _rebuilt(header, retained, delete_horizon), len(retained)


def _rebuilt(header: BatchHeader, retained: list[Record], delete_horizon: int | None) -> bytes:
    if header.timestamp_type == LOG_APPEND_TIME:
        timestamps = [header.max_timestamp] * len(retained)
        max_timestamp = header.max_timestamp
    else:
        timestamps = [header.base_timestamp + r.timestamp_delta for r in retained]
        max_timestamp = max(timestamps)
    base_timestamp = timestamps[0] if delete_horizon is None else delete_horizon
    records = [r._replace(timestamp_delta=t - base_timestamp) for r, t in zip(retained, timestamps)]
    return build_batch(
        records, base_offset=header.base_offset, compression=header.compression, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        is_transactional=header.is_transactional, is_control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch, timestamp_type=header.timestamp_type,
        base_timestamp=base_timestamp, max_timestamp=max_timestamp, has_delete_horizon=delete_horizon is not None,
        # The last offset stays, so the producer's last sequence does too.
        last_offset_delta=header.last_offset_delta)


def _empty_batch(header: BatchHeader) -> bytes:
    """Kafka's writeEmptyHeader: no records, uncompressed, both timestamps the batch's max."""
    return build_batch(
        [], base_offset=header.base_offset, producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, is_transactional=header.is_transactional,
        is_control=header.is_control, partition_leader_epoch=header.partition_leader_epoch,
        timestamp_type=header.timestamp_type, base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp, last_offset_delta=header.last_offset_delta)
