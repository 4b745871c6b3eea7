"""The offset index (Kafka's OffsetIndex, `<base offset>.index`): 8-byte entries of relative
offset (int32) and file position (int32), a sparse map from offsets to batch positions. Each entry
names the last offset of a batch and the position where that batch starts."""

from __future__ import annotations

import struct
import sys
from array import array
from pathlib import Path
from bisect import bisect_left, bisect_right
from typing import NamedTuple

from .abstract_index import AbstractIndex
from .errors import CorruptIndexException

_ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._relative_offsets = array("i")
        self._positions = array("i")

    def _decode(self, data: bytes) -> None:
        values = array("i", data)
        if sys.byteorder == "little":
            values.byteswap()  # the file is big-endian
        self._relative_offsets = values[0::2]
        self._positions = values[1::2]

    def _clear_from(self, slot: int) -> None:
        del self._relative_offsets[slot:]
        del self._positions[slot:]

    def _entry_count(self) -> int:
        return len(self._relative_offsets)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        self._ensure_loaded()
        return self.base_offset + self._relative_offsets[-1] if self._relative_offsets else self.base_offset

    def entry(self, slot: int) -> OffsetPosition:
        self._ensure_loaded()
        return OffsetPosition(self.base_offset + self._relative_offsets[slot], self._positions[slot])

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        self._ensure_loaded()
        slot = bisect_right(self._relative_offsets, target_offset - self.base_offset) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._relative_offsets[slot], self._positions[slot])

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= `position` (0 when none is): a batch boundary."""
        self._ensure_loaded()
        slot = bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after file position `position`, None if none is."""
        self._ensure_loaded()
        slot = bisect_left(self._positions, position)
        return None if slot == len(self._positions) else self.base_offset + self._relative_offsets[slot]

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        if self._relative_offsets and offset <= self.last_offset:
            raise CorruptIndexException(
                f"Attempt to append an offset ({offset}) to position {self.entries} no larger than the last "
                f"offset appended ({self.last_offset}) to {self.path}")
        if self.is_full():
            raise CorruptIndexException(f"Attempt to append to a full index (size = {self.entries})")
        relative = offset - self.base_offset
        self._write_entry(_ENTRY.pack(relative, position))
        self._relative_offsets.append(relative)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries for offsets >= `offset`."""
        self._ensure_loaded()
        self.truncate_to_entries(bisect_left(self._relative_offsets, offset - self.base_offset))

    def sanity_check(self, log_size: int) -> None:
        self._ensure_loaded()
        offsets, positions = self._relative_offsets, self._positions
        if offsets and offsets[0] < 0:
            raise CorruptIndexException(f"Corrupt index found, index file ({self.path}) has an offset below its base")
        if any(a >= b for a, b in zip(offsets, offsets[1:])) or any(a > b for a, b in zip(positions, positions[1:])):
            raise CorruptIndexException(f"Corrupt index found, index file ({self.path}) is not in order")
        if positions and not 0 <= positions[-1] < log_size:
            raise CorruptIndexException(
                f"Corrupt index found, index file ({self.path}) points to position {positions[-1]} "
                f"beyond the log's {log_size} bytes")
