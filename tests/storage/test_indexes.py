import struct

import pytest

from samsa.storage.errors import CorruptIndexException
from samsa.storage.offset_index import OffsetIndex, OffsetPosition
from samsa.storage.time_index import TimeIndex, TimestampOffset

BASE = 100


def offset_index(tmp_path, max_size=80) -> OffsetIndex:
    return OffsetIndex(tmp_path / "00000000000000000100.index", BASE, max_size)


def time_index(tmp_path, max_size=120) -> TimeIndex:
    return TimeIndex(tmp_path / "00000000000000000100.timeindex", BASE, max_size)


def test_offset_index_file_format_is_kafkas(tmp_path):
    index = offset_index(tmp_path)
    index.open_for_append()
    index.append(105, 200)
    index.append(110, 400)
    assert index.path.stat().st_size == 80  # preallocated to segment.index.bytes
    index.close()
    assert index.path.read_bytes() == struct.pack(">iiii", 5, 200, 10, 400)  # trimmed on close


def test_offset_index_lookup_finds_the_largest_entry_at_or_below(tmp_path):
    index = offset_index(tmp_path)
    for offset, position in [(105, 200), (110, 400), (120, 800)]:
        index.append(offset, position)
    assert index.lookup(99) == OffsetPosition(BASE, 0)
    assert index.lookup(104) == OffsetPosition(BASE, 0)
    assert index.lookup(105) == OffsetPosition(105, 200)
    assert index.lookup(119) == OffsetPosition(110, 400)
    assert index.lookup(10**6) == OffsetPosition(120, 800)
    assert index.last_offset == 120


def test_offset_index_rejects_offsets_out_of_order_and_appends_when_full(tmp_path):
    index = offset_index(tmp_path, max_size=16)
    index.append(105, 200)
    with pytest.raises(CorruptIndexException):
        index.append(105, 300)
    index.append(106, 300)
    assert index.is_full()
    with pytest.raises(CorruptIndexException):
        index.append(107, 400)


def test_offset_index_truncation_keeps_offsets_below_the_target(tmp_path):
    index = offset_index(tmp_path)
    for offset, position in [(105, 200), (110, 400), (120, 800)]:
        index.append(offset, position)
    index.truncate_to(110)
    assert index.entries == 1 and index.last_offset == 105
    index.append(111, 500)
    index.close()
    reloaded = offset_index(tmp_path)
    assert [reloaded.entry(i) for i in range(reloaded.entries)] == [(105, 200), (111, 500)]


def test_a_preallocated_index_left_by_a_crash_loads_without_its_zero_tail(tmp_path):
    index = offset_index(tmp_path)
    index.append(105, 200)
    index.flush()  # no close: the file keeps its preallocated length
    reloaded = offset_index(tmp_path)
    assert reloaded.path.stat().st_size == 80
    assert reloaded.entries == 1 and reloaded.lookup(200) == (105, 200)


def test_offset_index_sanity_check(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">iiii", 10, 400, 5, 200))
    with pytest.raises(CorruptIndexException, match="not in order"):
        offset_index(tmp_path).sanity_check(log_size=1000)
    path.write_bytes(struct.pack(">ii", 10, 4000))
    with pytest.raises(CorruptIndexException, match="beyond"):
        offset_index(tmp_path).sanity_check(log_size=1000)
    path.write_bytes(struct.pack(">ii", 10, 400) + b"\x01")
    with pytest.raises(CorruptIndexException, match="multiple"):
        offset_index(tmp_path).sanity_check(log_size=1000)


def test_time_index_appends_only_growing_timestamps(tmp_path):
    index = time_index(tmp_path)
    assert index.last_entry() == TimestampOffset(-1, BASE)
    index.maybe_append(1000, 101)
    index.maybe_append(1000, 102)  # same timestamp: ignored
    index.maybe_append(2000, 105)
    assert index.entries == 2
    with pytest.raises(CorruptIndexException):
        index.maybe_append(3000, 104)  # offset went back
    with pytest.raises(CorruptIndexException):
        index.maybe_append(1500, 110)  # timestamp went back
    index.close()
    assert index.path.read_bytes() == struct.pack(">qiqi", 1000, 1, 2000, 5)


def test_time_index_lookup(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(1000, 101)
    index.maybe_append(2000, 105)
    assert index.lookup(999) == TimestampOffset(-1, BASE)
    assert index.lookup(1000) == TimestampOffset(1000, 101)
    assert index.lookup(1999) == TimestampOffset(1000, 101)
    assert index.lookup(5000) == TimestampOffset(2000, 105)


def test_time_index_keeps_a_slot_for_the_roll_entry(tmp_path):
    index = time_index(tmp_path, max_size=36)  # 3 entries
    index.maybe_append(1, 101)
    assert not index.is_full()
    index.maybe_append(2, 102)
    assert index.is_full()
    with pytest.raises(CorruptIndexException):
        index.maybe_append(3, 103)
    index.maybe_append(3, 103, skip_full_check=True)
    assert index.entries == 3


def test_time_index_last_entry_reads_the_file_tail_without_loading(tmp_path):
    index = time_index(tmp_path)
    index.maybe_append(1000, 101)
    index.maybe_append(2000, 105)
    index.close()
    reloaded = time_index(tmp_path)
    assert reloaded.last_entry() == TimestampOffset(2000, 105)
    assert not reloaded.is_loaded


def test_time_index_truncation(tmp_path):
    index = time_index(tmp_path)
    for timestamp, offset in [(1000, 101), (2000, 105), (3000, 109)]:
        index.maybe_append(timestamp, offset)
    index.truncate_to(105)
    assert index.last_entry() == TimestampOffset(1000, 101)


def test_time_index_sanity_check(tmp_path):
    (tmp_path / "00000000000000000100.timeindex").write_bytes(struct.pack(">qiqi", 2000, 1, 1000, 5))
    with pytest.raises(CorruptIndexException):
        time_index(tmp_path).sanity_check(log_size=0)


def test_a_new_index_holds_no_descriptor_until_its_first_entry(tmp_path):
    index = offset_index(tmp_path)
    index.create()
    assert index.path.stat().st_size == 0 and index._fd is None
    index.append(105, 200)
    assert index.path.stat().st_size == 80  # preallocated with its first entry
    index.close()
    assert index.path.read_bytes() == struct.pack(">ii", 5, 200)


def test_new_entries_reach_the_file_a_few_kib_at_a_time_and_at_every_flush(tmp_path):
    """Lookups see an entry at once; the file gets it with the next few KiB of entries, a flush,
    a truncation or the close (a crash before is recovery's: it rebuilds the index)."""
    index = offset_index(tmp_path, max_size=1 << 20)
    index.create()
    index.append(105, 200)
    assert index.lookup(105) == OffsetPosition(105, 200)
    assert index.path.read_bytes().rstrip(b"\0") == b""  # preallocated, not yet written
    index.flush()
    assert index.path.read_bytes().rstrip(b"\0") == struct.pack(">ii", 5, 200)
    for i in range(1, 600):  # 600 entries of 8 bytes: the first 4 KiB go out on their own
        index.append(105 + 10 * i, 200 + 100 * i)
    written = index.path.read_bytes().rstrip(b"\0")
    assert len(written) == 4096 + 8 and written[-8:] == struct.pack(">ii", 5 + 10 * 512, 200 + 100 * 512)
    index.truncate_to(105 + 10 * 550)  # entries 550 and on go, written or not
    index.append(105 + 10 * 550 + 3, 1)
    index.close()
    expected = b"".join(struct.pack(">ii", 5 + 10 * i, 200 + 100 * i) for i in range(550)) + struct.pack(">ii", 10 * 550 + 8, 1)
    assert index.path.read_bytes() == expected
