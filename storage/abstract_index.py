"""What the offset and time indexes share (Kafka's AbstractIndex): a file of fixed-size big-endian
entries, preallocated to segment.index.bytes while its segment is active and trimmed to its entries
when the segment rolls or closes.

Entries are kept in memory (arrays, searched with bisect) and written with pwrite; the file is read
lazily, on the first lookup, so opening a log touches no index. New entries reach the file a few
KiB at a time, and whenever the file is flushed, trimmed, truncated or closed: lookups use the
memory, and a crash leaves the unflushed part of the log to recovery, which rebuilds its indexes
(Kafka's are memory-mapped, written back by the kernel when it likes); a pwrite per entry would be
a system call on every append of a busy partition, a follower's among them. Only the active segment keeps its
index files open. A file left preallocated by a crash ends in zero entries; they are dropped on
load (a real first entry is never all zero: a segment's first batch gets no index entry).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import ClassVar

from .errors import CorruptIndexException, KafkaStorageException

_PENDING_MAX = 4096  # bytes of new entries held before they are written


def read_index_file(path: Path, kind: str = "index") -> bytes:
    """An index file's bytes, empty when it does not exist yet; KafkaStorageException when it
    cannot be read. `kind` names it in the error ("index", "transaction index")."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise KafkaStorageException(f"Error while reading {kind} {path}: {e}") from e


class AbstractIndex:
    ENTRY_SIZE: ClassVar[int]
    # Slots an append may not take (`is_full` counts them as taken).
    RESERVED_SLOTS: ClassVar[int] = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._fd: int | None = None
        self._loaded = False
        self._dirty = False
        # Entries appended but not yet written, from file position _pending_at on. The lock: a
        # worker thread flushes while the event loop appends.
        self._pending = bytearray()
        self._pending_at = 0
        self._pending_lock = threading.Lock()

    # -- subclass hooks: the in-memory entries
    def _decode(self, data: bytes) -> None:
        raise NotImplementedError

    def _clear_from(self, slot: int) -> None:
        raise NotImplementedError

    def _entry_count(self) -> int:
        raise NotImplementedError

    def sanity_check(self, log_size: int) -> None:
        raise NotImplementedError

    # -- sizes
    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.ENTRY_SIZE

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._entry_count()

    def is_full(self) -> bool:
        if not self._loaded:
            self._ensure_loaded()
        return self._entry_count() >= self.max_entries - self.RESERVED_SLOTS

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    # -- file handling
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        data = read_index_file(self.path)
        if len(data) % self.ENTRY_SIZE:
            raise CorruptIndexException(
                f"Index file {self.path} is corrupt, found {len(data)} bytes which is not a multiple of "
                f"{self.ENTRY_SIZE}")
        zero = bytes(self.ENTRY_SIZE)
        end = len(data)
        while end and data[end - self.ENTRY_SIZE:end] == zero:
            end -= self.ENTRY_SIZE
        self._decode(data[:end])
        self._loaded = True

    def create(self) -> None:
        """A new segment's index: an empty file. It is opened and preallocated with its first
        entry, so a partition that never gets one (most of 10,000 idle ones) holds no descriptor
        for it."""
        self._loaded = True
        self._clear_from(0)
        os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))

    def open_for_append(self) -> None:
        """Become the active segment's index: open the file and preallocate it, as Kafka does."""
        if self._fd is not None:
            return
        self._ensure_loaded()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._resize_file(self.max_entries * self.ENTRY_SIZE)

    def _resize_file(self, size: int) -> None:
        # Not worth an fsync: a length lost in a crash leaves zero entries, dropped on load.
        assert self._fd is not None
        os.ftruncate(self._fd, max(size, self._entry_count() * self.ENTRY_SIZE))

    def _write_entry(self, data: bytes) -> None:
        """Append an entry's bytes at the slot of the next entry (the caller then adds it in memory)."""
        if self._fd is None:
            self.open_for_append()
        with self._pending_lock:
            pending = self._pending
            if not pending:
                self._pending_at = self._entry_count() * self.ENTRY_SIZE
            pending += data
            if len(pending) >= _PENDING_MAX:
                self._write_pending()

    def _write_pending(self) -> None:
        """Write the entries held back (with `_pending_lock` held)."""
        if not self._pending:
            return
        if self._fd is None:
            self.open_for_append()
        assert self._fd is not None
        os.pwrite(self._fd, self._pending, self._pending_at)
        self._pending = bytearray()
        self._dirty = True

    def write_pending(self) -> None:
        """Write the entries held back, so that the file has every entry."""
        with self._pending_lock:
            self._write_pending()

    def truncate_to_entries(self, count: int) -> None:
        self._ensure_loaded()
        if count >= self._entry_count():
            return
        self.write_pending()
        self._clear_from(count)
        if self._fd is not None:
            # Zero the stale tail rather than leave old entries a crash could resurrect.
            os.ftruncate(self._fd, count * self.ENTRY_SIZE)
            self._resize_file(self.max_entries * self.ENTRY_SIZE)
            self._dirty = True
        else:
            with open(self.path, "r+b") as f:
                f.truncate(count * self.ENTRY_SIZE)

    def reset(self) -> None:
        """Drop every entry (before a rebuild from the log)."""
        self._loaded = True
        with self._pending_lock:
            self._pending = bytearray()
        self._clear_from(0)
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            self._resize_file(self.max_entries * self.ENTRY_SIZE)
            self._dirty = True
        else:
            self.path.write_bytes(b"")

    def trim_to_valid_size(self) -> None:
        """Cut the preallocated file down to its entries (on roll and close)."""
        self.write_pending()
        if self._fd is not None:
            os.ftruncate(self._fd, self._entry_count() * self.ENTRY_SIZE)

    def flush(self) -> None:
        self.write_pending()
        fd = self._fd
        if fd is not None and self._dirty:
            self._dirty = False
            os.fsync(fd)

    def close(self) -> None:
        """Trim, make unflushed entries durable and release the file; the entries stay readable."""
        self.write_pending()
        if self._fd is None:
            return
        self.trim_to_valid_size()
        self.flush()
        os.close(self._fd)
        self._fd = None

    def rename(self, new_path: Path) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path

    def release(self) -> None:
        """Close the file as it is (the segment is being deleted), entries held back dropped."""
        with self._pending_lock:
            self._pending = bytearray()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
