"""The aborted transactions of one segment (Kafka's TransactionIndex, `<base offset>.txnindex`).

An entry is appended when an ABORT marker is written to the segment: the producer id, the offsets
of the transaction's first record and of its marker, and the partition's last stable offset at that
moment. A read_committed fetch collects the entries overlapping the range it returns, so clients
can drop the aborted records; a transaction's entry lives with its marker's segment, so the search
goes on into later segments until an entry's last stable offset passes the fetched range.

Each entry is 34 bytes, big-endian, as in Kafka (AbortedTxn, version 0):

    version int16, producer id int64, first offset int64, last offset int64, last stable offset int64

The file is created with the first entry (most segments never have one). Entries are kept in memory
as an immutable tuple replaced on each change, so a fetch reads them without a lock while the event
loop appends; a worker thread fsyncs the file.
"""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path
from typing import NamedTuple

from .abstract_index import read_index_file
from .errors import CorruptIndexException

TXN_INDEX_FILE_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ABORTED_TXN_VERSION, *self)


class TxnIndexSearchResult(NamedTuple):
    aborted: list[AbortedTxn]
    is_complete: bool  # no later segment can hold a transaction overlapping the range


def decode_entries(data: bytes, path: Path | None = None) -> tuple[AbortedTxn, ...]:
    """The entries of a transaction index file; a torn last entry (a crash mid-append) is dropped."""
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, position)
        if version > ABORTED_TXN_VERSION:
            raise CorruptIndexException(
                f"Unexpected aborted transaction version {version} in transaction index {path}, current version "
                f"is {ABORTED_TXN_VERSION}")
        entries.append(AbortedTxn(*fields))
    return tuple(entries)


class TransactionIndex:
    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: tuple[AbortedTxn, ...] | None = None  # read on first use
        self._fd: int | None = None
        self._dirty = False
        self._lock = threading.Lock()  # the fd: fsync in a worker thread against close and truncation

    # -- reading
    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        entries = self._entries
        if entries is None:
            entries = self._entries = decode_entries(read_index_file(self.path, "transaction index"), self.path)
        return entries

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset); complete once
        an entry's last stable offset reaches the upper bound (later segments cannot matter)."""
        aborted = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                aborted.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(aborted, True)
        return TxnIndexSearchResult(aborted, False)

    def sanity_check(self) -> None:
        for txn in self.entries:
            if txn.last_offset < self.start_offset:
                raise CorruptIndexException(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less than start offset "
                    f"{self.start_offset}")

    # -- writing
    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {txn.last_offset} is not "
                f"greater than current last offset {entries[-1].last_offset} of index {self.path}")
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
                # A torn entry a crash left at the end would shift every later one.
                os.ftruncate(self._fd, len(entries) * ENTRY_SIZE)
            os.write(self._fd, txn.encode())
            self._dirty = True
        self._entries = entries + (txn,)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries of transactions whose marker is at `offset` or later."""
        entries = self.entries
        keep = next((i for i, txn in enumerate(entries) if txn.last_offset >= offset), len(entries))
        if keep < len(entries):
            self._truncate_file(keep)

    def reset(self) -> None:
        """Drop every entry (the segment's transactions are being rebuilt from the log)."""
        self._truncate_file(0)

    def _truncate_file(self, count: int) -> None:
        with self._lock:
            if self._fd is not None:
                os.ftruncate(self._fd, count * ENTRY_SIZE)
                self._dirty = True
            elif self.path.exists():
                os.truncate(self.path, count * ENTRY_SIZE)
        self._entries = self.entries[:count]

    def flush(self) -> None:
        with self._lock:
            if self._fd is not None and self._dirty:
                self._dirty = False
                os.fsync(self._fd)

    def close(self) -> None:
        """Make the entries durable and release the file; they stay readable."""
        self.flush()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def rename(self, new_path: Path) -> None:
        if self.path.exists():  # most segments never had an aborted transaction
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
        self.path.unlink(missing_ok=True)
