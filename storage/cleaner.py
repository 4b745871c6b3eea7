"""One cleaning pass over one compacted log (Kafka's Cleaner, SkimpyOffsetMap and Throttler).

A pass maps the dirty section [first dirty offset, first uncleanable offset) to the latest offset
of each key, as far as the offset map holds; then rewrites every segment from the log's start up
to where the map ends, a group of segments at a time (Kafka's groupSegmentsBySize), into one
`<base>.log.cleaned` segment per group, which `Log.replace_segments` swaps in. A record stays when
no later record has its key, or it lies past the mapped section; a tombstone stays until the
delete horizon its batch was stamped with (delete.retention.ms after the cleaner first reached
it). Offsets never change: a batch keeps its base and last offset, producer fields, timestamps,
attributes and codec, and one left without records goes, unless it is the last batch of a
producer the log still tracks or the last batch before the uncleanable section (kept empty).

Transactions, as Kafka's cleaner treats them (CleanedTransactionMetadata, from the transaction
indexes): the records of aborted transactions go, and never enter the offset map; committed
transactional records are compacted like any others; a marker goes, after a delete horizon as a
tombstone does, once its transaction has no batch left (the cleaned segment's transaction index
keeps the aborted transactions whose markers stay). Nothing past the last stable offset is cleaned.

Runs in a worker thread. Segments are read without the log's lock (only the active segment
changes, and it is never cleaned); `check_done` is called between batches so a pass stops soon
after its log is deleted or the broker shuts down.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..wire.records import NO_PRODUCER_ID, BatchHeader, Record, decode_batch, parse_batch_header, parse_control_record
from .cleaned_transactions import CleanedTransactionMetadata
from .log_segment import CLEANED_FILE_SUFFIX, LOG_FILE_SUFFIX, LogSegment, filename_prefix
from .offset_index import OffsetIndex
from .record_filter import BatchRetention, filter_batch
from .time_index import TimeIndex

if TYPE_CHECKING:
    from .log import Log

__all__ = [
    "Cleaner", "OffsetMap", "Throttler", "CleanerStats", "LogCleaningAbortedException", "segments_between",
    "group_segments_by_size", "OFFSET_MAP_ENTRY_BYTES",
]


# What one key of the offset map costs in this process (a 16-byte MD5 digest, an offset and the
# dict's slot: measured with tracemalloc), so log.cleaner.dedupe.buffer.size bounds real memory.
# Kafka's SkimpyOffsetMap packs an entry in 24 bytes.
OFFSET_MAP_ENTRY_BYTES = 136
_INT_MAX = 2**31 - 1


class LogCleaningAbortedException(Exception):
    """The pass was cut short: its log was deleted, truncated or closed, or the broker is stopping."""


class OffsetMap:
    """Key -> the largest offset seen for it in the dirty section, keyed by the key's MD5 digest as
    Kafka's SkimpyOffsetMap; `latest_offset` is where the mapped section ends."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self.latest_offset = -1
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    @staticmethod
    def _digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[self._digest(key)] = offset

    def get(self, key: bytes) -> int:
        """The mapped offset, or -1 for a key not in the dirty section."""
        return self._offsets.get(self._digest(key), -1)


class Throttler:
    """Keeps the cleaner's read and write rate under log.cleaner.io.max.bytes.per.second, measured
    over windows of 300 ms (Kafka's Throttler). Shared by the cleaner threads."""

    CHECK_INTERVAL_S = 0.3

    def __init__(self, bytes_per_second: float, *, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.bytes_per_second = bytes_per_second
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0.0

    def maybe_throttle(self, observed: int) -> None:
        if self.bytes_per_second >= 1e300:  # Kafka's default, Double.MAX_VALUE: unthrottled
            return
        with self._lock:
            self._observed += observed
            elapsed = self._monotonic() - self._period_start
            if elapsed < self.CHECK_INTERVAL_S:
                return
            wait = self._observed / self.bytes_per_second - elapsed
            self._observed = 0.0
            if wait > 0:
                self._sleep(wait)
            self._period_start = self._monotonic()


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0


def segments_between(segments: Sequence[LogSegment], from_offset: int, to_offset: int) -> list[LogSegment]:
    """Kafka's logSegments(from, to): from the segment holding `from_offset` (or the first) to the
    last one starting below `to_offset`."""
    if from_offset >= to_offset:
        return []
    first = 0
    for index, segment in enumerate(segments):
        if segment.base_offset <= from_offset:
            first = index
    return [s for s in segments[first:] if s.base_offset < to_offset]


def _index_bytes(index: OffsetIndex | TimeIndex) -> int:
    # One entry more than the segment has: a cleaned segment may index the first batch of each
    # segment after its first, which their own indexes never do.
    return (index.entries + 1) * index.ENTRY_SIZE


def group_segments_by_size(segments: Sequence[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Consecutive segments whose data fits in segment.bytes and whose index entries fit in
    segment.index.bytes, spanning fewer than 2^31 offsets: each group becomes one cleaned segment."""
    groups = []
    remaining = list(segments)
    while remaining:
        group = [remaining.pop(0)]
        log_size = group[0].size
        index_size = _index_bytes(group[0].offset_index)
        time_index_size = _index_bytes(group[0].time_index)
        while remaining:
            candidate = remaining[0]
            last_offset = (remaining[1].base_offset if len(remaining) > 1 else first_uncleanable_offset) - 1
            if (log_size + candidate.size > max_size
                    or index_size + _index_bytes(candidate.offset_index) > max_index_size
                    or time_index_size + _index_bytes(candidate.time_index) > max_index_size
                    or candidate.size > 0 and last_offset - group[0].base_offset > _INT_MAX):
                break
            group.append(remaining.pop(0))
            log_size += candidate.size
            index_size += _index_bytes(candidate.offset_index)
            time_index_size += _index_bytes(candidate.time_index)
        groups.append(group)
    return groups


class Cleaner:
    def __init__(self, *, offset_map_capacity: int, io_buffer_size: int, throttler: Throttler) -> None:
        self.offset_map_capacity = offset_map_capacity
        self.io_buffer_size = max(io_buffer_size, 1)
        self.throttler = throttler

    def clean(self, log: Log, first_dirty_offset: int, first_uncleanable_offset: int, now_ms: int,
              check_done: Callable[[], None]) -> tuple[int, CleanerStats]:
        """Clean `log`; returns the first offset not cleaned (where the next pass's dirty section
        starts) and the pass's statistics."""
        stats = CleanerStats()
        offset_map = OffsetMap(self.offset_map_capacity)
        self.build_offset_map(log, first_dirty_offset, first_uncleanable_offset, offset_map, stats, check_done)
        end_offset = offset_map.latest_offset + 1
        segments = log.segments
        to_clean = [s for s in segments_between(segments, 0, end_offset) if s is not segments[-1]]
        config = log.config
        for group in group_segments_by_size(to_clean, config.segment_bytes, config.segment_index_bytes,
                                            first_uncleanable_offset):
            self.clean_segments(log, group, offset_map, now_ms, first_uncleanable_offset, stats, check_done)
        return end_offset, stats

    # -- the offset map
    def build_offset_map(self, log: Log, start: int, end: int, offset_map: OffsetMap, stats: CleanerStats,
                         check_done: Callable[[], None]) -> None:
        """Map the keys of [start, end) to their latest offsets until the map is full; the
        map's latest offset then says how far it got."""
        transactions = CleanedTransactionMetadata()
        transactions.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        dirty = segments_between(log.segments, start, end)
        next_bases = [s.base_offset for s in dirty[1:]] + [end]
        for segment, next_base in zip(dirty, next_bases):
            check_done()
            if self._map_segment(segment, offset_map, start, next_base, transactions, stats, check_done):
                return

    def _map_segment(self, segment: LogSegment, offset_map: OffsetMap, start: int, next_base: int,
                     transactions: CleanedTransactionMetadata, stats: CleanerStats,
                     check_done: Callable[[], None]) -> bool:
        """True when the map filled up before the end of the segment."""
        position = segment.offset_index.lookup(start).position
        for _, header, data in segment.log.batches_from(position, self.io_buffer_size):
            check_done()
            self.throttler.maybe_throttle(header.size)
            if header.is_control:
                transactions.on_control_batch_read(header, _marker(data))
            elif transactions.on_batch_read(header):
                pass  # an aborted transaction's records: their keys must not hide older values
            elif header.records_count > 0:
                # Whole batches only, so the mapped section ends at a batch boundary; a first batch
                # larger than the map is taken anyway, so every pass makes progress.
                if len(offset_map) and len(offset_map) + header.records_count > offset_map.capacity:
                    return True
                _, records = decode_batch(data)
                for record in records:
                    offset = header.base_offset + record.offset_delta
                    if record.key is not None and offset >= start:
                        offset_map.put(record.key, offset)
            if header.last_offset >= start:
                offset_map.latest_offset = header.last_offset
            time.sleep(0)  # let the event loop's thread take the GIL between batches
        # Offsets missing at the segment's end (already compacted away) count as mapped.
        offset_map.latest_offset = next_base - 1
        return False

    # -- rewriting
    def clean_segments(self, log: Log, group: Sequence[LogSegment], offset_map: OffsetMap, now_ms: int,
                       upper_bound_offset: int, stats: CleanerStats, check_done: Callable[[], None]) -> None:
        """Rewrite `group` into one cleaned segment and swap it into the log."""
        base_offset = group[0].base_offset
        # A file left by a pass that failed would be appended to.
        (log.dir / (filename_prefix(base_offset) + LOG_FILE_SUFFIX + CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment.open(log.dir, base_offset, log.config, now_ms, file_already_exists=False,
                                  file_suffix=CLEANED_FILE_SUFFIX)
        try:
            last_records = log.last_records_of_active_producers()
            transactions = CleanedTransactionMetadata(cleaned.txn_index)
            bounds = [s.base_offset for s in group[1:]] + [group[-1].read_next_offset()]
            for segment, segment_end in zip(group, bounds):
                # The whole segment's aborted transactions: its cleaned index is rebuilt from them.
                transactions.add_aborted_transactions(log.collect_aborted_transactions(segment.base_offset,
                                                                                       segment_end))
                self._clean_into(segment, cleaned, offset_map, now_ms, log.config.delete_retention_ms, last_records,
                                 transactions, upper_bound_offset, stats, check_done)
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.set_last_modified(group[-1].last_modified_ms())
        except BaseException:
            cleaned.delete()
            raise
        if not log.replace_segments(cleaned, group):
            cleaned.delete()
            raise LogCleaningAbortedException(f"{log.name} changed while it was cleaned")

    def _clean_into(self, source: LogSegment, dest: LogSegment, offset_map: OffsetMap, now_ms: int,
                    delete_retention_ms: int, last_records: dict[int, tuple[int | None, int]],
                    transactions: CleanedTransactionMetadata, upper_bound_offset: int, stats: CleanerStats,
                    check_done: Callable[[], None]) -> None:
        def should_retain(header: BatchHeader, offset: int, record: Record) -> bool:
            if offset > offset_map.latest_offset:
                return True
            if record.key is None:
                stats.invalid_messages += 1  # a record a compacted topic refuses: Kafka drops it too
                return False
            if offset < offset_map.get(record.key):
                return False
            return record.value is not None or not header.has_delete_horizon or now_ms < header.base_timestamp

        out = bytearray()
        out_batches: list[tuple[int, BatchHeader]] = []

        def write_out() -> None:
            if out_batches:
                dest.append(out_batches[-1][1].last_offset, out, out_batches)
                stats.bytes_written += len(out)
                out.clear()
                out_batches.clear()

        for _, header, data in source.log.batches_from(0, self.io_buffer_size):
            check_done()
            self.throttler.maybe_throttle(header.size)
            stats.bytes_read += header.size
            stats.messages_read += header.records_count
            # Kafka's checkBatchRetention: the records of an aborted transaction go; a marker whose
            # transaction is gone goes once its delete horizon has passed (stamped first).
            if header.is_control:
                can_discard = transactions.on_control_batch_read(header, _marker(data))
                discard_records = can_discard and header.has_delete_horizon and header.base_timestamp <= now_ms
            else:
                can_discard = discard_records = transactions.on_batch_read(header)
            retention = _batch_retention(header, last_records, upper_bound_offset, discard_records)
            if discard_records:
                keep = _retain_none
            elif header.is_control:
                keep = _retain_all
            else:
                keep = should_retain
            kept, count = filter_batch(data, header, retention, keep, now_ms=now_ms,
                                       delete_retention_ms=delete_retention_ms,
                                       stamp_delete_horizon=can_discard and header.is_control)
            if kept is None:
                continue
            stats.messages_written += count
            out_batches.append((len(out), header if kept is data else parse_batch_header(kept)))
            out += kept
            if len(out) >= self.io_buffer_size:
                write_out()
            time.sleep(0)  # let the event loop's thread take the GIL between batches
        write_out()


def _marker(batch):
    """A control batch's record, None for one emptied by an earlier pass."""
    _, records = decode_batch(batch)
    return parse_control_record(records[0]) if records else None


def _retain_none(header: BatchHeader, offset: int, record: Record) -> bool:
    return False


def _retain_all(header: BatchHeader, offset: int, record: Record) -> bool:
    return True


def _batch_retention(header: BatchHeader, last_records: dict[int, tuple[int | None, int]],
                     upper_bound_offset: int, discard_records: bool) -> BatchRetention:
    """Kafka's checkBatchRetention: a producer's last batch and the batch ending the cleaned range
    stay, emptied if need be; a batch whose records may all go goes whole."""
    last = last_records.get(header.producer_id) if header.producer_id != NO_PRODUCER_ID else None
    if last is not None:
        last_data_offset, epoch = last
        if (header.last_offset == last_data_offset if last_data_offset is not None
                else header.is_control and header.producer_epoch == epoch):
            return BatchRetention.RETAIN_EMPTY  # the producer's last sequence and epoch survive
    if header.next_offset == upper_bound_offset:
        return BatchRetention.RETAIN_EMPTY  # where the cleaned section ends stays known
    return BatchRetention.DELETE if discard_records else BatchRetention.DELETE_EMPTY
