from storage_helpers import make_batch, small_config

from samsa.storage.file_records import TimestampAndOffset
from samsa.storage.log_segment import LogSegment
from samsa.wire.records import iter_batch_headers, parse_batch_header, set_base_offset

BASE = 50


def new_segment(tmp_path, **overrides) -> LogSegment:
    return LogSegment.open(tmp_path, BASE, small_config(**overrides), 0, file_already_exists=False)


def append(segment: LogSegment, base_offset: int, timestamps) -> bytearray:
    batch = make_batch(timestamps)
    set_base_offset(batch, 0, base_offset)
    header = parse_batch_header(batch)
    segment.append(header.last_offset, batch, [(0, header)])
    return batch


def test_file_names_are_kafkas(tmp_path):
    new_segment(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000050.index", "00000000000000000050.log", "00000000000000000050.timeindex"]


def test_index_entries_follow_index_interval_bytes(tmp_path):
    segment = new_segment(tmp_path, index_interval_bytes=150)
    batches = [append(segment, BASE + 2 * i, [1000 + i, 1000 + i]) for i in range(6)]
    size = len(batches[0])  # 97 bytes each
    # An entry goes in once more than 150 bytes were appended since the last: batches 2 and 4.
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == [
        (BASE + 5, 2 * size), (BASE + 9, 4 * size)]
    assert segment.time_index.entry(0) == (1002, BASE + 5)


def test_read_from_inside_a_batch_returns_the_whole_batch(tmp_path):
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [1, 2, 3])
    second = append(segment, BASE + 3, [4, 5, 6])
    info = segment.read(BASE + 4, 10_000, segment.size, min_one_message=True)
    assert info.records.read_bytes() == bytes(second)
    assert info.records.position == len(first)
    info = segment.read(BASE + 1, 10_000, segment.size, min_one_message=True)
    assert info.records.read_bytes() == bytes(first + second)


def test_read_beyond_the_last_batch_gives_none(tmp_path):
    segment = new_segment(tmp_path)
    append(segment, BASE, [1])
    assert segment.read(BASE + 1, 100, segment.size, True) is None


def test_max_size_cuts_and_min_one_message_overrides(tmp_path):
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [1])
    append(segment, BASE + 1, [2])
    assert segment.read(BASE, 10, segment.size, min_one_message=True).records.size == len(first)
    # Without min_one_message Kafka returns what fits, even a partial batch.
    assert segment.read(BASE, 10, segment.size, min_one_message=False).records.size == 10
    assert segment.read(BASE, 0, segment.size, min_one_message=False).records.size == 0


def test_a_read_ends_at_the_last_whole_batch(tmp_path):
    # Kafka would send the first 5 bytes of the second batch too, which the client drops.
    segment = new_segment(tmp_path, index_interval_bytes=1)
    first = append(segment, BASE, [1])
    second = append(segment, BASE + 1, [2])
    third = append(segment, BASE + 2, [3])
    assert segment.read(BASE, len(first) + 5, segment.size, min_one_message=True).records.size == len(first)
    assert segment.read(BASE, len(first) + len(second) + len(third) - 1, segment.size,
                        min_one_message=False).records.size == len(first) + len(second)
    # The batch that did not fit is where the next fetch starts: it is found without a scan, the
    # same as by one.
    assert segment.translate_offset(BASE + 2) == (BASE + 2, len(first) + len(second), len(third))
    segment.log._next_batch = segment.log._last_batch = None
    assert segment.translate_offset(BASE + 2) == (BASE + 2, len(first) + len(second), len(third))


def test_a_fetch_at_the_tail_reads_no_headers(tmp_path, monkeypatch):
    # The fetches an append wakes (followers, caught-up consumers) start in the batch it appended,
    # or past the end: the segment knows where without reading the file.
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [1])
    second = append(segment, BASE + 1, [2, 3])
    monkeypatch.setattr(segment.log, "pread", lambda *_: (_ for _ in ()).throw(AssertionError("read")))
    assert segment.translate_offset(BASE + 2) == (BASE + 2, len(first), len(second))
    assert segment.read(BASE + 1, 10_000, segment.size, True).records.read_bytes() == bytes(second)
    assert segment.translate_offset(BASE + 3) is None
    monkeypatch.undo()
    segment.truncate_to(BASE + 1, 0)  # forgets the batch: the scan answers
    assert segment.translate_offset(BASE + 1) is None
    assert segment.translate_offset(BASE) == (BASE, 0, len(first))


def test_truncation_forgets_where_the_next_fetch_starts(tmp_path):
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [1])
    append(segment, BASE + 1, [2, 3])
    assert segment.read(BASE, len(first) + 5, segment.size, min_one_message=True).records.size == len(first)
    segment.truncate_to(BASE + 1, 0)
    third = append(segment, BASE + 1, [4])  # the same offset and position, a different size
    assert segment.translate_offset(BASE + 1) == (BASE + 1, len(first), len(third))


def test_max_position_bounds_the_read(tmp_path):
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [1])
    append(segment, BASE + 1, [2])
    assert segment.read(BASE, 10_000, len(first), True).records.read_bytes() == bytes(first)
    assert segment.read(BASE, 10_000, None, True).records.size == 0


def test_read_next_offset_and_largest_timestamp(tmp_path):
    segment = new_segment(tmp_path)
    append(segment, BASE, [5000, 7000])
    append(segment, BASE + 2, [6000])
    assert segment.read_next_offset() == BASE + 3
    assert segment.max_timestamp_and_offset_so_far == (7000, BASE + 1)
    assert segment.largest_timestamp() == 7000


def test_find_offset_by_timestamp_is_exact_to_the_record(tmp_path):
    segment = new_segment(tmp_path)
    append(segment, BASE, [100, 300, 200])
    append(segment, BASE + 3, [400, 500])
    assert segment.find_offset_by_timestamp(250, BASE) == TimestampAndOffset(300, BASE + 1, 0)
    assert segment.find_offset_by_timestamp(450, BASE) == TimestampAndOffset(500, BASE + 4, 0)
    assert segment.find_offset_by_timestamp(100, BASE + 2) == TimestampAndOffset(200, BASE + 2, 0)
    assert segment.find_offset_by_timestamp(501, BASE) is None
    assert segment.offset_of_max_timestamp() == TimestampAndOffset(500, BASE + 4, 0)


def test_roll_trims_files_and_close_records_the_max_timestamp(tmp_path):
    segment = new_segment(tmp_path)
    append(segment, BASE, [100])
    append(segment, BASE + 1, [200])
    segment.on_become_inactive()
    assert segment._offset_index.path.stat().st_size == 8
    assert segment.time_index.last_entry() == (200, BASE + 1)
    segment.close()
    reopened = LogSegment.open(tmp_path, BASE, small_config(), 0)
    assert reopened.max_timestamp_so_far == 200
    assert reopened.read_next_offset() == BASE + 2


def test_truncate_to_removes_whole_batches(tmp_path):
    segment = new_segment(tmp_path)
    first = append(segment, BASE, [100, 150])
    second = append(segment, BASE + 2, [300, 400])
    assert segment.truncate_to(BASE + 3, now_ms=0) == len(second)
    assert segment.size == len(first)
    assert segment.read_next_offset() == BASE + 2
    assert segment.max_timestamp_and_offset_so_far == (150, BASE + 1)
    assert [h.base_offset for _, h in iter_batch_headers(segment.log.read_bytes())] == [BASE]


def test_recover_rebuilds_the_indexes(tmp_path):
    segment = new_segment(tmp_path)
    for i in range(5):
        append(segment, BASE + i, [1000 + i])
    expected = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    segment.offset_index.reset()
    segment.time_index.reset()
    assert segment.recover() == 0
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == expected
    assert segment.time_index.last_entry() == (1004, BASE + 4)
