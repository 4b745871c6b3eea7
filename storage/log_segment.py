"""One segment of a partition's log (Kafka's LogSegment): `<base offset, 20 digits>.log` with its
`.index`, `.timeindex` and, once a transaction is aborted in it, `.txnindex`.

Appends take batches whose offsets are already assigned and add an index entry once more than
index.interval.bytes went in since the last one (the entry: the batch's last offset -> the batch's
position). Reads map an offset to the batch holding it (index, then a short header scan) and
return a file range. Recovery re-scans the file, checks each batch's CRC, cuts a torn or corrupt
tail and rebuilds both indexes.

Threads: the event loop appends and reads; one worker thread calls `flush()`. `flush()` and
`close()` hold the segment's lock, so an fsync never races the close of its file descriptor.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from ..wire.records import BatchHeader, is_crc_valid
from .errors import CorruptIndexException, CorruptRecordException, KafkaStorageException
from .file_records import FileRecords, LogOffsetPosition, TimestampAndOffset
from .log_config import LogConfig
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from .transaction_index import TXN_INDEX_FILE_SUFFIX, AbortedTxn, TransactionIndex, TxnIndexSearchResult

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"  # a segment the log cleaner is writing
SWAP_FILE_SUFFIX = ".swap"  # a cleaned segment being swapped into the log
_INT_MAX = 2**31 - 1


def filename_prefix(offset: int) -> str:
    """Kafka's segment file names: the base offset zero-padded to 20 digits."""
    return f"{offset:020d}"


class FetchDataInfo(NamedTuple):
    records: FileRecords  # possibly empty
    first_offset: int  # the offset the read started at
    # read_committed reads: the aborted transactions overlapping the records (None otherwise).
    aborted_transactions: list[AbortedTxn] | None = None


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, log: FileRecords, index_interval_bytes: int,
                 max_index_size: int, roll_jitter_ms: int, created_ms: int, file_suffix: str = "") -> None:
        self.base_offset = base_offset
        self.log = log
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = created_ms
        prefix = filename_prefix(base_offset)
        self._offset_index = OffsetIndex(directory / (prefix + INDEX_FILE_SUFFIX + file_suffix), base_offset,
                                         max_index_size)
        self._time_index = TimeIndex(directory / (prefix + TIME_INDEX_FILE_SUFFIX + file_suffix), base_offset,
                                     max_index_size)
        self.txn_index = TransactionIndex(directory / (prefix + TXN_INDEX_FILE_SUFFIX + file_suffix), base_offset)
        self._indexes_checked = False
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset: TimestampOffset | None = None  # loaded on first use
        self._rolling_based_timestamp: int | None = None  # the first batch's max timestamp
        self._lock = threading.Lock()
        self._closed = False
        self._rolled = False  # no longer active: its indexes only change by truncation

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int, *,
             file_already_exists: bool = True, file_suffix: str = "") -> LogSegment:
        """The segment's files carry `file_suffix` after their usual names (the cleaner writes
        `<base>.log.cleaned`)."""
        path = directory / (filename_prefix(base_offset) + LOG_FILE_SUFFIX + file_suffix)
        preallocate_size = 0 if file_already_exists else config.init_file_size
        segment = cls(directory, base_offset, FileRecords.open(path, preallocate_size=preallocate_size),
                      config.index_interval_bytes, config.segment_index_bytes, config.random_segment_jitter(), now_ms,
                      file_suffix)
        if not file_already_exists:
            segment._indexes_checked = True
            segment._offset_index.create()
            segment._time_index.create()
        return segment

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    @property
    def size(self) -> int:
        return self.log.size

    # -- indexes: loaded and sanity-checked on first use, rebuilt when they fail the check
    def _check_indexes(self) -> None:
        if self._indexes_checked:
            return
        self._indexes_checked = True
        try:
            self._offset_index.sanity_check(self.size)
            self._time_index.sanity_check(self.size)
        except CorruptIndexException:
            self.recover()

    @property
    def offset_index(self) -> OffsetIndex:
        self._check_indexes()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        self._check_indexes()
        return self._time_index

    # -- timestamps
    @property
    def max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        """The largest timestamp in the segment and the last offset of the batch holding it."""
        if self._max_timestamp_and_offset is None:
            try:
                self._max_timestamp_and_offset = self._time_index.last_entry()
            except CorruptIndexException:
                self._max_timestamp_and_offset = self.time_index.last_entry()  # checked: rebuilt
        return self._max_timestamp_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self.max_timestamp_and_offset_so_far.timestamp

    def largest_timestamp(self) -> int:
        """What retention.ms compares against: the largest record timestamp, or the file's mtime."""
        timestamp = self.max_timestamp_so_far
        return timestamp if timestamp >= 0 else self.log.last_modified_ms()

    def _largest_timestamp_from_files(self) -> TimestampOffset:
        last = self.time_index.last_entry()
        position = self.offset_index.lookup(last.offset).position
        best = last
        for _, header in self.log.batch_headers_from(position):
            if header.max_timestamp > best.timestamp:
                best = TimestampOffset(header.max_timestamp, header.last_offset)
        return best

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (what segment.ms and max.compaction.lag.ms count from)."""
        if self._rolling_based_timestamp is None and self.size > 0:
            for _, header in self.log.batch_headers_from(0):
                self._rolling_based_timestamp = header.max_timestamp
                break
        return self._rolling_based_timestamp

    # -- appends
    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT_MAX

    def should_roll(self, *, max_segment_ms: int, max_segment_bytes: int, max_timestamp_in_messages: int,
                    max_offset_in_messages: int, messages_size: int, now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll; asked before every append, so each test is made only
        when the ones before it did not decide."""
        size = self.log.size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0 and (self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
                         > max_segment_ms - self.roll_jitter_ms):
            return True
        self._check_indexes()
        return (self._offset_index.is_full() or self._time_index.is_full()
                or not self.can_convert_to_relative_offset(max_offset_in_messages))

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """segment.ms counts from the first batch's timestamp when it has one, else from creation."""
        first = self.first_batch_timestamp()
        if first is not None and first >= 0:
            return message_timestamp - first
        return max(now_ms - self.created_ms, 0)

    def append(self, largest_offset: int, records, batches: Sequence[tuple[int, BatchHeader]]) -> None:
        """Append `records` (whole batches, offsets assigned); `batches` are their headers and
        positions within `records`."""
        if not batches:
            return
        if not self.can_convert_to_relative_offset(largest_offset):
            raise KafkaStorageException(
                f"Offset {largest_offset} cannot be stored in segment {self.base_offset} (relative offset overflow)")
        log = self.log
        position = log.size
        if position == 0:
            self._rolling_based_timestamp = batches[0][1].max_timestamp
        self._check_indexes()
        max_so_far = self.max_timestamp_and_offset_so_far
        try:
            log.append(records)
        except OSError as e:
            raise KafkaStorageException(f"Error while appending to {log.path}: {e}") from e
        for _, header in batches:
            size = header.size
            if header.max_timestamp > max_so_far.timestamp:
                max_so_far = TimestampOffset(header.max_timestamp, header.last_offset)
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                self._offset_index.append(header.last_offset, position)
                self._time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
                self._bytes_since_last_index_entry = 0
            position += size
            self._bytes_since_last_index_entry += size
        self._max_timestamp_and_offset = max_so_far
        log.remember_last_batch(header.base_offset, LogOffsetPosition(header.last_offset, position - size, size))

    def on_become_inactive(self) -> None:
        """The segment rolled: record its max timestamp in the time index and trim preallocation."""
        if self._max_timestamp_and_offset is not None:
            self.time_index.maybe_append(*self._max_timestamp_and_offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()
        self._rolled = True

    # -- reads
    def translate_offset(self, offset: int) -> LogOffsetPosition | None:
        """The batch holding `offset` (or the first after it), searched from the index's hint."""
        return self.log.search_for_offset_with_size(offset, self.offset_index.lookup(offset).position)

    def read(self, start_offset: int, max_size: int, max_position: int | None,
             min_one_message: bool) -> FetchDataInfo | None:
        """Up to max_size bytes from the batch holding start_offset, not past max_position (None:
        nothing may be read). min_one_message returns the first batch even when larger than
        max_size. None when no batch of this segment reaches start_offset."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log.path}")
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0 or max_position is None:
            return FetchDataInfo(FileRecords.empty(), start_offset)
        available = max_position - start.position
        fetch_size = min(available, adjusted_max_size)
        if 0 < fetch_size < available:
            fetch_size = self._whole_batches_size(start.position, fetch_size)
        return FetchDataInfo(self.log.slice(start.position, max(fetch_size, 0)), start_offset)

    def _whole_batches_size(self, start: int, size: int) -> int:
        """`size` bytes from `start` end inside a batch: end at the last whole batch instead. Kafka
        sends the cut batch, which every client drops and fetches again (a twentieth of a 1 MB
        fetch of 1 MB batches); only when no batch fits whole is the cut one sent, as Kafka does.
        The scan starts at the index entry nearest the cut, so it reads a few headers."""
        limit = start + size
        end = self.log.whole_batches_end(max(self.offset_index.floor_position(limit), start), limit)
        return end - start if end > start else size

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset past everything in the `fetch_size` bytes from `start_position`: that of the
        first index entry at or beyond their end (Kafka's fetchUpperBoundOffset); None when the
        index has none, and the segment's end must do."""
        return self.offset_index.fetch_upper_bound_offset(start_position + fetch_size)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def update_txn_index(self, producer_id: int, first_offset: int, last_offset: int, is_aborted: bool,
                         last_stable_offset: int) -> None:
        """A transaction ended with a marker at `last_offset` in this segment: an aborted one is indexed."""
        if is_aborted:
            self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    def read_next_offset(self) -> int:
        """The offset after the last batch: scans from the last index entry."""
        if self.size == 0:
            return self.base_offset
        index = self.offset_index
        start = index.entry(index.entries - 1).position if index.entries else 0
        next_offset = self.base_offset
        for _, header in self.log.batch_headers_from(start):
            next_offset = header.next_offset
        return next_offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        max_so_far = self.max_timestamp_and_offset_so_far
        position = self.offset_index.lookup(max_so_far.offset).position
        return self.log.offset_of_max_timestamp(position, max_so_far.timestamp)

    # -- recovery and truncation
    def recover(self) -> int:
        """Re-validate every batch (header, CRC, offsets), cut the file at the first bad one, and
        rebuild the indexes. Returns the number of bytes truncated."""
        offset_index, time_index = self._offset_index, self._time_index
        self._indexes_checked = True
        offset_index.reset()
        time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_so_far = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        try:
            for position, header, data in self.log.batches_from(0):
                if not is_crc_valid(data, 0, header) or not self.can_convert_to_relative_offset(header.last_offset):
                    break
                if header.max_timestamp > max_so_far.timestamp:
                    max_so_far = TimestampOffset(header.max_timestamp, header.last_offset)
                if valid_bytes - last_index_entry > self.index_interval_bytes and not offset_index.is_full() \
                        and not time_index.is_full():
                    offset_index.append(header.last_offset, position)
                    time_index.maybe_append(max_so_far.timestamp, max_so_far.offset)
                    last_index_entry = valid_bytes
                valid_bytes += header.size
        except CorruptRecordException:
            pass
        truncated = self.log.truncate_to(valid_bytes)
        self.log.trim()
        time_index.maybe_append(max_so_far.timestamp, max_so_far.offset, skip_full_check=True)
        offset_index.close()
        time_index.close()
        self._max_timestamp_and_offset = max_so_far
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        return truncated

    def truncate_to(self, offset: int, now_ms: int) -> int:
        """Remove the batches holding offsets >= `offset` (a batch holding it goes whole); the
        segment is the active one again."""
        mapping = self.translate_offset(offset)
        with self._lock:  # a flush may be releasing the index files of a rolled segment
            self._rolled = False
            self.offset_index.truncate_to(offset)
            self.time_index.truncate_to(offset)
            self.txn_index.truncate_to(offset)
            truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.size == 0:
            self.created_ms = now_ms
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_and_offset = self._largest_timestamp_from_files()
        return truncated

    # -- files
    def flush(self) -> None:
        """fsync the data and index files; a rolled segment's index files are then released (one
        open file per old segment, like Kafka's)."""
        with self._lock:
            if self._closed:
                return
            try:
                self.log.flush()
                self._offset_index.flush()
                self._time_index.flush()
                self.txn_index.flush()
            except OSError as e:
                raise KafkaStorageException(f"Error while flushing {self.log.path}: {e}") from e
            if self._rolled:
                self._offset_index.release()
                self._time_index.release()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._max_timestamp_and_offset is not None and self._time_index.is_loaded:
                self._time_index.maybe_append(*self._max_timestamp_and_offset, skip_full_check=True)
            self._offset_index.close()
            self._time_index.close()
            self.txn_index.close()
            self.log.trim()
            self.log.close()

    def close_handlers(self) -> None:
        """Release the files without writing to them (Kafka's closeHandlers): the log directory
        failed, the next start recovers what is on its disk. Only a torn tail past the last whole
        batch is cut, if the disk lets it (a truncation needs no space)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._offset_index.release()
            self._time_index.release()
            for release in (self.txn_index.close, self.log.trim):
                try:
                    release()
                except OSError:
                    pass  # the failed disk: the file is released all the same
            self.log.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the segment's files, e.g. to `.deleted` before they are removed."""
        def renamed(path: Path) -> Path:
            name = path.name[:-len(old_suffix)] if old_suffix else path.name
            return path.with_name(name + new_suffix)
        assert self.log.path is not None
        self.log.rename(renamed(self.log.path))
        self._offset_index.rename(renamed(self._offset_index.path))
        self._time_index.rename(renamed(self._time_index.path))
        self.txn_index.rename(renamed(self.txn_index.path))

    def update_parent_dir(self, directory: Path) -> None:
        """The log directory was renamed; the open files moved with it."""
        assert self.log.path is not None
        self.log.path = directory / self.log.path.name
        self._offset_index.path = directory / self._offset_index.path.name
        self._time_index.path = directory / self._time_index.path.name
        self.txn_index.path = directory / self.txn_index.path.name

    def delete(self) -> None:
        """Close and remove the files, whatever suffix they carry now."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._offset_index.release()
                self._time_index.release()
                self.log.close()
        self.txn_index.delete()
        for path in (self.log.path, self._offset_index.path, self._time_index.path):
            if path is not None:
                path.unlink(missing_ok=True)

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    def set_last_modified(self, ms: int) -> None:
        """A cleaned segment keeps the modification time of the segments it replaces: retention.ms
        falls back on it when the segment holds no timestamp."""
        assert self.log.path is not None
        os.utime(self.log.path, ns=(ms * 1_000_000, ms * 1_000_000))
