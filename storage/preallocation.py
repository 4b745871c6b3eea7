"""Disk blocks for a segment's appends, allocated ahead of them past the end of the file.

A write that extends a file on ext4 reserves a delayed-allocation block for every new page, and that
bookkeeping is charged to the writer: about 0.1 ms of the broker's CPU per MB produced, a quarter of
what a 1 MB Produce request costs in all (bench/README.md, "Blocks allocated ahead"). Blocks
allocated beforehand with fallocate(FALLOC_FL_KEEP_SIZE) skip it. KEEP_SIZE leaves the file's length alone, so readers
(Kafka's own tools, recovery, a fetch) see only the bytes written; the blocks past the end are
freed when the segment is trimmed or truncated (ext4 drops them on any ftruncate that does not
grow the file).

Where fallocate does not exist or the file system refuses it (tmpfs before Linux 3.5, NFS, macOS),
appends simply go without: the call is never tried again.
"""

from __future__ import annotations

import ctypes
import errno

_FALLOC_FL_KEEP_SIZE = 0x01
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


def _load_fallocate():
    try:
        # The process's own symbols, libc's among them: ctypes.util.find_library would run
        # ldconfig in a subprocess at every start.
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


def allocate_past_end(fd: int, offset: int, length: int) -> bool:
    """Allocate disk blocks for [offset, offset + length) of `fd` without changing its length.
    False when they could not be had (the disk is full, or the file system cannot); the append
    that wanted them proceeds regardless and meets any real shortage itself."""
    global _fallocate
    if _fallocate is None:
        return False
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    if ctypes.get_errno() in _UNSUPPORTED:
        _fallocate = None
    return False


def is_supported() -> bool:
    return _fallocate is not None
