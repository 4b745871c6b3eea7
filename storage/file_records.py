"""A segment's `.log` file and the slices of it a fetch sends (Kafka's FileRecords).

The segment owns the whole-file view: appends with pwrite at the tracked size (so a failed write
leaves no hole: the next append overwrites it), fsync, truncation. `slice()` gives the fetch path
an (fd, position, size) range the server sends with `os.sendfile`; `read_bytes()` copies it.
Batch scans read headers in chunks and parse them with the wire layer's struct.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, TypeVar

from ..wire.exceptions import CorruptRecordError
from ..wire.records import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, decode_batch, parse_batch_header
from .errors import CorruptRecordException, KafkaStorageException
from .preallocation import allocate_past_end

_HEADER_CHUNK = 16 * 1024  # an index interval's worth of headers per read
_DATA_CHUNK = 1024 * 1024  # recovery reads whole batches
# Appends find their disk blocks allocated ahead of them (storage/preallocation.py): as many bytes
# as the file holds (4 KiB at least), at most this: a small segment holds at most twice its bytes.
_ALLOCATE_AHEAD_MAX = 1024 * 1024
# What finding a batch by offset needs of its header: baseOffset, batchLength, magic, lastOffsetDelta.
_BATCH_BOUNDS = struct.Struct(">qi4xb6xi")
_Found = TypeVar("_Found")  # what a header scan's parse function finds in each batch header


class LogOffsetPosition(NamedTuple):
    """Where the batch holding an offset starts, its last offset and its size."""
    offset: int
    position: int
    size: int


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int  # -1 when unknown


class FileRecords:
    # The whole-file view's memory of the first batch past the end of the last fetch it served
    # (base offset, its LogOffsetPosition): a consumer's next fetch starts there. Dropped when the
    # file is truncated; appends leave it true.
    _next_batch: tuple[int, LogOffsetPosition] | None = None
    # The last batch appended (base offset, its LogOffsetPosition): the fetches an append wakes (a
    # follower's, a caught-up consumer's) start in it, or past it while nothing was appended since.
    _last_batch: tuple[int, LogOffsetPosition] | None = None

    def __init__(self, path: Path | None, fd: int, position: int, size: int, owner: FileRecords | None = None) -> None:
        self.path = path
        self.fd = fd
        self.position = position
        self.size = size
        self._allocated_end = size  # blocks are allocated up to here (appends allocate ahead)
        # A slice keeps its file object alive; the fd stays open until the segment is deleted.
        self._owner = owner

    @classmethod
    def open(cls, path: Path, *, preallocate_size: int = 0) -> FileRecords:
        """Open (creating if missing) a segment file. A new preallocated file has its full length
        on disk but size 0; an existing one is taken at its length (recovery trims a crash's tail)."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(fd).st_size
            if size == 0 and preallocate_size:
                os.ftruncate(fd, preallocate_size)
        except OSError as e:
            raise KafkaStorageException(f"Error opening {path}: {e}") from e
        return cls(path, fd, 0, size)

    @classmethod
    def empty(cls) -> FileRecords:
        return cls(None, -1, 0, 0)

    def __repr__(self) -> str:
        return f"FileRecords({self.path}, position={self.position}, size={self.size})"

    # -- reading
    def pread(self, position: int, size: int) -> bytes:
        """Up to `size` bytes at `position` of the file (relative to this view)."""
        at = self.position + position
        chunk = os.pread(self.fd, size, at)
        if len(chunk) == size or not chunk:
            return chunk
        chunks = [chunk]
        at += len(chunk)
        remaining = size - len(chunk)
        while remaining > 0:
            chunk = os.pread(self.fd, remaining, at)
            if not chunk:
                break
            chunks.append(chunk)
            at += len(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def read_bytes(self) -> bytes:
        return self.pread(0, self.size) if self.size else b""

    def slice(self, position: int, size: int) -> FileRecords:
        """The range [position, position + size) clipped to the bytes written so far."""
        end = min(position + size, self.size)
        return FileRecords(self.path, self.fd, self.position + position, max(end - position, 0), self._owner or self)

    # -- writing (the whole-file view only)
    def append(self, data) -> None:
        view = memoryview(data)
        at = self.size
        end = at + len(view)
        if end > self._allocated_end:
            # Moved on even when the allocation is refused (a full disk): it is asked for again only
            # once appends pass this range, not on every append.
            self._allocated_end = end + min(max(end, 4096), _ALLOCATE_AHEAD_MAX)
            allocate_past_end(self.fd, at, self._allocated_end - at)
        while view:
            written = os.pwrite(self.fd, view, at)
            view = view[written:]
            at += written
        self.size = at

    def remember_last_batch(self, base_offset: int, found: LogOffsetPosition) -> None:
        """The batch just appended (it ends the file), for search_for_offset_with_size."""
        self._last_batch = (base_offset, found)

    def flush(self) -> None:
        os.fsync(self.fd)

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes; returns how many bytes went."""
        if size > self.size:
            raise KafkaStorageException(f"Attempt to truncate {self.path} to {size} bytes, it has {self.size}")
        truncated = self.size - size
        os.ftruncate(self.fd, size)  # also frees the blocks allocated ahead
        self.size = self._allocated_end = size
        self._next_batch = self._last_batch = None
        return truncated

    def trim(self) -> None:
        """Drop preallocated space past the data (on roll and close): a longer file
        (log.preallocate), or blocks allocated ahead of appends."""
        if self._allocated_end > self.size or os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)
            self._allocated_end = self.size

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def rename(self, new_path: Path) -> None:
        assert self.path is not None
        os.rename(self.path, new_path)
        self.path = new_path

    def last_modified_ms(self) -> int:
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # -- scanning
    def _header_at(self, buf: bytes | memoryview, offset: int, position: int) -> BatchHeader:
        try:
            return parse_batch_header(buf, offset)
        except CorruptRecordError as e:
            raise CorruptRecordException(f"Invalid record batch at position {position} of {self.path}: {e}") from None

    def batch_headers_from(self, start: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each complete batch from `start`; a partial tail ends the scan, a
        header that is not a v2 batch raises CorruptRecordException."""
        return self._scan_headers(start, self._sized_header)

    def _sized_header(self, buf: bytes, offset: int, position: int) -> tuple[BatchHeader, int]:
        header = self._header_at(buf, offset, position)
        return header, header.size

    def _batch_bounds(self, buf: bytes, offset: int, position: int) -> tuple[tuple[int, int, int], int]:
        """(base offset, size, last offset) of the batch: the fields an offset search needs."""
        base_offset, length, magic, last_offset_delta = _BATCH_BOUNDS.unpack_from(buf, offset)
        if magic != 2 or length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            self._header_at(buf, offset, position)  # raises the full parse's CorruptRecordException
        size = LOG_OVERHEAD + length
        return (base_offset, size, base_offset + last_offset_delta), size

    def _scan_headers(self, start: int, parse: Callable[[bytes, int, int], tuple[_Found, int]]
                      ) -> Iterator[tuple[int, _Found]]:
        """(position, parse(chunk, at, position)[0]) of each complete batch from `start`, reading
        headers a chunk at a time; `parse` returns what it found and the batch's size."""
        end = self.size
        position = start
        chunk, chunk_start = b"", start
        while end - position >= BATCH_HEADER_SIZE:
            at = position - chunk_start
            if at + BATCH_HEADER_SIZE > len(chunk):
                chunk, chunk_start, at = self.pread(position, min(_HEADER_CHUNK, end - position)), position, 0
            found, size = parse(chunk, at, position)
            if position + size > end:
                return
            yield position, found
            position += size

    def batches_from(self, start: int = 0,
                     chunk_size: int = _DATA_CHUNK) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, whole batch bytes) of each complete batch from `start` to the end,
        read `chunk_size` bytes at a time (more for a batch larger than that)."""
        position = start
        chunk, chunk_start = memoryview(b""), start
        while self.size - position >= BATCH_HEADER_SIZE:
            at = position - chunk_start
            if at + BATCH_HEADER_SIZE > len(chunk):
                chunk, chunk_start, at = memoryview(self.pread(position, chunk_size)), position, 0
            header = self._header_at(chunk, at, position)
            if position + header.size > self.size:
                return
            if at + header.size > len(chunk):
                chunk, chunk_start, at = memoryview(self.pread(position, max(header.size, chunk_size))), position, 0
            yield position, header, chunk[at:at + header.size]
            position += header.size

    def search_for_offset_with_size(self, target_offset: int, start_position: int) -> LogOffsetPosition | None:
        """The first batch from `start_position` whose last offset is >= target."""
        remembered = self._next_batch
        if remembered is not None and remembered[0] <= target_offset <= remembered[1].offset:
            return remembered[1]
        last = self._last_batch
        if last is not None:  # no read of the file's headers for a fetch at its tail
            base_offset, found = last
            if base_offset <= target_offset <= found.offset:
                return found
            if target_offset > found.offset and found.position + found.size == self.size:
                return None
        for position, (_, size, last_offset) in self._scan_headers(start_position, self._batch_bounds):
            if last_offset >= target_offset:
                return LogOffsetPosition(last_offset, position, size)
        return None

    def whole_batches_end(self, scan_from: int, limit: int) -> int:
        """Where the last batch ending by `limit` ends, scanning from the batch start `scan_from`
        (returned when no batch does). The batch that crosses `limit` is remembered for
        search_for_offset_with_size: the consumer's next fetch starts there."""
        end = scan_from
        for position, (base_offset, size, last_offset) in self._scan_headers(scan_from, self._batch_bounds):
            if position + size > limit:
                self._next_batch = (base_offset, LogOffsetPosition(last_offset, position, size))
                break
            end = position + size
        return end

    def search_for_timestamp(self, target_timestamp: int, start_position: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record from `start_position` with timestamp >= target and offset >= starting_offset."""
        for position, header in self.batch_headers_from(start_position):
            if header.max_timestamp >= target_timestamp:
                for offset, timestamp in self._record_timestamps(position, header):
                    if timestamp >= target_timestamp and offset >= starting_offset:
                        return TimestampAndOffset(timestamp, offset, header.partition_leader_epoch)
        return None

    def offset_of_max_timestamp(self, start_position: int, max_timestamp: int) -> TimestampAndOffset | None:
        """The first record holding `max_timestamp` in the first batch from `start_position` whose
        max timestamp it is (ListOffsets MAX_TIMESTAMP)."""
        for position, header in self.batch_headers_from(start_position):
            if header.max_timestamp == max_timestamp:
                for offset, timestamp in self._record_timestamps(position, header):
                    if timestamp == max_timestamp:
                        return TimestampAndOffset(timestamp, offset, header.partition_leader_epoch)
                return None
        return None

    def _record_timestamps(self, position: int, header: BatchHeader) -> Iterator[tuple[int, int]]:
        """(offset, timestamp) of each record of the batch; only ListOffsets by time decodes records."""
        if header.timestamp_type:  # LogAppendTime: every record carries the batch's max timestamp
            yield from ((offset, header.max_timestamp) for offset in range(header.base_offset, header.next_offset))
            return
        try:
            header, records = decode_batch(self.pread(position, header.size))
        except CorruptRecordError as e:
            raise CorruptRecordException(f"Invalid record batch at position {position} of {self.path}: {e}") from None
        for record in records:
            yield header.record_offset(record), header.record_timestamp(record)
