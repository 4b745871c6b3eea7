"""The time index (Kafka's TimeIndex, `<base offset>.timeindex`): 12-byte entries of timestamp
(int64) and relative offset (int32). An entry (T, O) says: the largest timestamp up to offset O
is T. Timestamps only grow from entry to entry."""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from .abstract_index import AbstractIndex
from .errors import CorruptIndexException

NO_TIMESTAMP = -1
_ENTRY = struct.Struct(">qi")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    RESERVED_SLOTS = 1  # for the entry written when the segment rolls or closes

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps = array("q")
        self._relative_offsets = array("i")

    def _decode(self, data: bytes) -> None:
        entries = list(_ENTRY.iter_unpack(data))
        self._timestamps = array("q", [e[0] for e in entries])
        self._relative_offsets = array("i", [e[1] for e in entries])

    def _clear_from(self, slot: int) -> None:
        del self._timestamps[slot:]
        del self._relative_offsets[slot:]

    def _entry_count(self) -> int:
        return len(self._timestamps)

    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base offset); read from the file's tail when not loaded, so
        retention can ask every segment for its largest timestamp without loading its index."""
        if not self._loaded:
            try:
                with open(self.path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    tail = os.pread(f.fileno(), self.ENTRY_SIZE, max(size - self.ENTRY_SIZE, 0))
            except FileNotFoundError:
                size, tail = 0, b""
            if not tail:
                return TimestampOffset(NO_TIMESTAMP, self.base_offset)
            if size % self.ENTRY_SIZE == 0 and tail != bytes(self.ENTRY_SIZE):
                timestamp, relative = _ENTRY.unpack(tail)
                return TimestampOffset(timestamp, self.base_offset + relative)
        self._ensure_loaded()
        if not self._timestamps:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[-1], self.base_offset + self._relative_offsets[-1])

    def entry(self, slot: int) -> TimestampOffset:
        self._ensure_loaded()
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._relative_offsets[slot])

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (-1, base offset)."""
        self._ensure_loaded()
        slot = bisect_right(self._timestamps, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._timestamps[slot], self.base_offset + self._relative_offsets[slot])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is larger than the last entry's."""
        self._ensure_loaded()
        if not skip_full_check and self.is_full():
            raise CorruptIndexException(f"Attempt to append to a full time index (size = {self.entries})")
        last = self.last_entry()
        if self._timestamps and offset < last.offset:
            raise CorruptIndexException(
                f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the last offset "
                f"appended ({last.offset}) to {self.path}")
        if self._timestamps and timestamp < last.timestamp:
            raise CorruptIndexException(
                f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than the last "
                f"timestamp appended ({last.timestamp}) to {self.path}")
        if timestamp > last.timestamp:
            relative = offset - self.base_offset
            self._write_entry(_ENTRY.pack(timestamp, relative))
            self._timestamps.append(timestamp)
            self._relative_offsets.append(relative)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= `offset`."""
        self._ensure_loaded()
        self.truncate_to_entries(bisect_left(self._relative_offsets, offset - self.base_offset))

    def sanity_check(self, log_size: int) -> None:
        self._ensure_loaded()
        stamps, offsets = self._timestamps, self._relative_offsets
        if offsets and offsets[0] < 0:
            raise CorruptIndexException(
                f"Corrupt time index found, time index file ({self.path}) has an offset below its base")
        if any(a >= b for a, b in zip(stamps, stamps[1:])) or any(a > b for a, b in zip(offsets, offsets[1:])):
            raise CorruptIndexException(f"Corrupt time index found, time index file ({self.path}) is not in order")
