"""A segment's appends find disk blocks allocated ahead of them (storage/preallocation.py), past the
end of the file: its length stays the bytes written (what Kafka's tools and recovery read), and the
blocks ahead are freed when the segment rolls, closes or is truncated."""

from __future__ import annotations

import ctypes
import errno
import os

import pytest
from small_disk import mounted_tmpfs
from storage_helpers import make_batch, small_config

from samsa.storage import preallocation
from samsa.storage.file_records import FileRecords
from samsa.storage.log_segment import LogSegment
from samsa.wire.records import parse_batch_header, set_base_offset

KiB = 1 << 10
MiB = 1 << 20


def allocated_bytes(path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def fallocate_works(tmp_path):
    with open(tmp_path / "probe", "wb") as f:
        if not preallocation.allocate_past_end(f.fileno(), 0, 4096):
            pytest.skip("this file system allocates no blocks past a file's end")


@pytest.fixture
def records(tmp_path, fallocate_works):
    records = FileRecords.open(tmp_path / "a.log")
    yield records
    records.close()


def test_appends_allocate_ahead_without_lengthening_the_file(records):
    records.append(b"x" * 100_000)
    assert allocated_bytes(records.path) >= 200_000  # as much again as the file holds
    records.append(b"y" * 150_000)
    assert os.path.getsize(records.path) == records.size == 250_000
    assert allocated_bytes(records.path) >= 500_000
    assert records.pread(0, 300_000) == b"x" * 100_000 + b"y" * 150_000


def test_what_is_allocated_ahead_is_at_most_a_mebibyte(records):
    for _ in range(5):
        records.append(b"z" * MiB)
    assert os.path.getsize(records.path) == 5 * MiB
    assert 5 * MiB < allocated_bytes(records.path) <= 6 * MiB + 4096


def test_trim_and_truncation_free_the_blocks_ahead(records):
    records.append(b"x" * 300_000)
    records.trim()
    assert allocated_bytes(records.path) < 300_000 + 4096
    records.append(b"y" * 300_000)
    assert allocated_bytes(records.path) > 600_000 + 4096
    records.truncate_to(100_000)
    assert os.path.getsize(records.path) == 100_000
    assert allocated_bytes(records.path) < 100_000 + 4096


def test_a_rolled_segment_keeps_only_its_bytes(tmp_path, fallocate_works):
    segment = LogSegment.open(tmp_path, 0, small_config(), 0, file_already_exists=False)
    batch = make_batch([100] * 200)
    set_base_offset(batch, 0, 0)
    header = parse_batch_header(batch)
    segment.append(header.last_offset, batch, [(0, header)])
    assert allocated_bytes(segment.log.path) > len(batch) + 4096
    segment.on_become_inactive()
    assert os.path.getsize(segment.log.path) == len(batch)
    assert allocated_bytes(segment.log.path) < len(batch) + 4096
    segment.close()


def _failing(error: int, calls: list):
    def fallocate(fd, mode, offset, length):
        calls.append((offset, length))
        ctypes.set_errno(error)
        return -1
    return fallocate


def test_a_file_system_without_fallocate_is_not_asked_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(preallocation, "_fallocate", _failing(errno.EOPNOTSUPP, calls))
    records = FileRecords.open(tmp_path / "a.log")
    records.append(b"x" * 10_000)
    records.append(b"y" * 100_000)
    assert len(calls) == 1 and not preallocation.is_supported()
    assert records.pread(0, 110_000) == b"x" * 10_000 + b"y" * 100_000
    records.close()


def test_a_full_disk_leaves_the_append_to_meet_it_and_is_asked_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(preallocation, "_fallocate", _failing(errno.ENOSPC, calls))
    records = FileRecords.open(tmp_path / "a.log")
    records.append(b"x" * 10_000)
    records.append(b"y" * 100_000)  # past what the first call asked for
    assert calls == [(0, 20_000), (10_000, 210_000)] and preallocation.is_supported()
    assert records.size == 110_000
    records.close()


@pytest.fixture
def small_disk(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "1m") as path:
        yield path


def test_on_a_nearly_full_disk_appends_that_fit_are_written_without_blocks_ahead(small_disk):
    records = FileRecords.open(small_disk / "a.log")
    records.append(b"a" * 64 * KiB)  # blocks for 128 KiB
    disk = os.statvfs(small_disk)
    with open(small_disk / "filler", "wb") as filler:  # all but 96 KiB
        os.posix_fallocate(filler.fileno(), 0, disk.f_bavail * disk.f_frsize - 96 * KiB)
    records.append(b"b" * 64 * KiB)  # into the blocks allocated ahead
    records.append(b"c" * 64 * KiB)  # 256 KiB ahead do not fit in 96 KiB; the 64 written do
    assert records.size == os.path.getsize(records.path) == 192 * KiB
    assert allocated_bytes(records.path) == 192 * KiB  # nothing ahead: the refused call left none
    assert preallocation.is_supported()
    assert records.pread(0, 192 * KiB) == b"a" * 64 * KiB + b"b" * 64 * KiB + b"c" * 64 * KiB
    with pytest.raises(OSError) as full:  # the disk itself, met by the write
        records.append(b"d" * 64 * KiB)
    assert full.value.errno == errno.ENOSPC
    records.close()
