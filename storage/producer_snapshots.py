"""Producer state snapshots: `<offset, 20 digits>.snapshot` in the partition directory, the state
of the partition's producers as of that log offset, in Kafka's format (ProducerStateManager
.writeSnapshot, version 1), so a partition directory moves between Samsa and Kafka as it is.

    version int16, crc uint32 (CRC32C of everything after it), entry count int32, then per producer:
    producer id int64, epoch int16, last sequence int32, last offset int64, offset delta int32,
    timestamp int64, coordinator epoch int32, current transaction first offset int64 (-1: none)

Only the last batch of each producer is kept, as Kafka keeps it: a duplicate of an older one
cannot be recognised after a reload. A snapshot is written when a segment rolls (at its base
offset) and when the log closes (at the log end offset); loading starts from the latest one.
"""

from __future__ import annotations

import os
import re
import struct
from collections import deque
from collections.abc import Iterable
from pathlib import Path

import crc32c

from .producer_state import BatchMetadata, ProducerStateEntry
from .errors import CorruptSnapshotException
from .log_segment import filename_prefix

SNAPSHOT_FILE_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_POS = 2
_CRC_START = 6  # the CRC covers the entry count and the entries
_ENTRY = struct.Struct(">qhiqiqiq")


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    entries = list(entries)
    buf = bytearray(_HEADER.size + _ENTRY.size * len(entries))
    _HEADER.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(entries))
    position = _HEADER.size
    for entry in entries:
        txn_first_offset = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
        _ENTRY.pack_into(buf, position, entry.producer_id, entry.producer_epoch, entry.last_seq,
                         entry.last_data_offset, entry.last_offset_delta, entry.last_timestamp,
                         entry.coordinator_epoch, txn_first_offset)
        position += _ENTRY.size
    struct.pack_into(">I", buf, _CRC_POS, crc32c.crc32c(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot; CorruptSnapshotException when it is short, of another version,
    or fails its CRC."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotException(f"Snapshot failed schema validation: {len(data)} bytes")
    version, crc, count = _HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotException(f"Snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(memoryview(data)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotException(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotException(f"Snapshot failed schema validation: {count} entries in {len(data)} bytes")
    entries = []
    for index in range(count):
        (producer_id, epoch, last_seq, last_offset, offset_delta, timestamp, coordinator_epoch,
         txn_first_offset) = _ENTRY.unpack_from(data, _HEADER.size + index * _ENTRY.size)
        batches = deque([BatchMetadata(last_seq, last_offset, offset_delta, timestamp)] if last_offset >= 0 else [])
        entries.append(ProducerStateEntry(producer_id, epoch, coordinator_epoch, timestamp,
                                          txn_first_offset if txn_first_offset >= 0 else None, batches))
    return entries


class ProducerSnapshotFiles:
    """The snapshot files of one partition directory, by offset. Not thread-safe: the log's lock
    guards it."""

    def __init__(self, directory: Path, names: Iterable[str] | None = None) -> None:
        """`names`: the directory's files, when just listed."""
        self.directory = directory
        listing = os.listdir(directory) if names is None else names
        self._offsets = sorted(int(name[:20]) for name in listing
                               if name.endswith(SNAPSHOT_FILE_SUFFIX) and _SNAPSHOT_FILE.match(name))

    @property
    def offsets(self) -> list[int]:
        return list(self._offsets)

    @property
    def latest_offset(self) -> int | None:
        return self._offsets[-1] if self._offsets else None

    def path(self, offset: int) -> Path:
        return self.directory / (filename_prefix(offset) + SNAPSHOT_FILE_SUFFIX)

    def write(self, offset: int, entries: Iterable[ProducerStateEntry], *, sync: bool) -> Path:
        """Write (or overwrite) the snapshot at `offset`; without `sync` the caller fsyncs it later."""
        path = self.path(offset)
        with open(path, "wb") as f:
            f.write(encode_snapshot(entries))
            if sync:
                f.flush()
                os.fsync(f.fileno())
        if offset not in self._offsets:
            self._offsets.append(offset)
            self._offsets.sort()
        return path

    def read(self, offset: int) -> list[ProducerStateEntry]:
        return decode_snapshot(self.path(offset).read_bytes())

    def delete(self, offset: int) -> None:
        if offset in self._offsets:
            self._offsets.remove(offset)
        self.path(offset).unlink(missing_ok=True)

    def delete_before(self, offset: int) -> None:
        for each in [o for o in self._offsets if o < offset]:
            self.delete(each)

    def delete_above(self, offset: int) -> None:
        for each in [o for o in self._offsets if o > offset]:
            self.delete(each)

    def delete_all(self) -> None:
        for each in list(self._offsets):
            self.delete(each)

    def remove_stray(self, segment_base_offsets: Iterable[int]) -> None:
        """Kafka's removeStraySnapshots: a snapshot at no segment's base offset goes, except the
        latest such one when it is above every segment's base (the snapshot of a clean shutdown)."""
        bases = set(segment_base_offsets)
        strays = [o for o in self._offsets if o not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] > max(bases)) else None
        for offset in strays:
            if offset != keep:
                self.delete(offset)
