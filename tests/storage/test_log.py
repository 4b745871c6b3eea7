import os
import threading

import pytest
from storage_helpers import make_batch, small_config

from samsa.storage.errors import (
    CorruptRecordException, InvalidRecordException, InvalidTimestampException, KafkaStorageException,
    OffsetOutOfRangeException, PolicyViolationException, RecordBatchTooLargeException, RecordTooLargeException,
    UnsupportedForMessageFormatException,
)
from samsa.storage.log import (
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, AppendOrigin, Log, OffsetAndTimestamp,
    delete_dir_name, parse_topic_partition_name,
)
from samsa.wire.records import (
    CREATE_TIME, LOG_APPEND_TIME, CompressionType, Record, build_batch, build_control_batch, is_crc_valid, iter_batch_headers, parse_batch_header,
)


def open_log(tmp_path, clock, **overrides) -> Log:
    return Log.open(tmp_path / "topic-0", small_config(**overrides), clock_ms=clock)


def append(log: Log, timestamps=(1000,), **kwargs):
    info = log.append_as_leader(make_batch(timestamps, **kwargs))
    log.high_watermark = log.log_end_offset
    return info


def offsets_in(records) -> list[int]:
    return [h.base_offset for _, h in iter_batch_headers(records.read_bytes())]


# -- appends

def test_append_assigns_offsets_in_place(tmp_path, clock):
    log = open_log(tmp_path, clock)
    first = log.append_as_leader(make_batch([1000, 1001, 1002]))
    second = log.append_as_leader(make_batch([1003, 1004]))
    assert (first.first_offset, first.last_offset, first.record_count) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert (second.max_timestamp, second.offset_of_max_timestamp, second.log_append_time) == (1004, 4, -1)
    assert log.log_end_offset == 5
    stored = log.read(0, 10_000, min_one_message=True).records.read_bytes()
    headers = [h for _, h in iter_batch_headers(stored)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 4)]


def test_leader_epoch_is_stamped(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(), leader_epoch=7)
    assert parse_batch_header(log.read(0, 1000).records.read_bytes()).partition_leader_epoch == 7


def test_log_append_time_is_stamped_with_a_valid_crc(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(make_batch([5, 6]))
    assert (info.log_append_time, info.max_timestamp) == (clock.now, clock.now)
    stored = log.read(0, 1000).records.read_bytes()
    header = parse_batch_header(stored)
    assert header.timestamp_type == 1 and header.max_timestamp == clock.now
    assert is_crc_valid(stored, 0, header)


def test_a_create_time_topic_clears_a_batchs_log_append_time_bit_with_a_valid_crc(tmp_path, clock):
    log = open_log(tmp_path, clock)
    batch = bytearray(build_batch([Record(0, 0, b"k", b"v", [])], timestamp_type=LOG_APPEND_TIME,
                                  base_timestamp=clock.now, max_timestamp=clock.now))
    log.append_as_leader(batch)
    stored = log.read(0, 1000).records.read_bytes()
    header = parse_batch_header(stored)
    assert header.timestamp_type == CREATE_TIME and header.max_timestamp == clock.now
    assert is_crc_valid(stored, 0, header)


def test_compressed_batches_are_kept_as_they_are(tmp_path, clock):
    log = open_log(tmp_path, clock)
    batch = bytearray(build_batch([Record(i, i, b"k", b"v" * 100, []) for i in range(10)],
                                  compression=CompressionType.ZSTD, base_timestamp=clock.now))
    original = bytes(batch[16:])  # magic, CRC, attributes ... the compressed records
    info = log.append_as_leader(batch)
    assert (info.first_offset, info.last_offset) == (0, 9)
    stored = log.read(0, 100_000).records.read_bytes()
    assert stored[16:] == original
    assert parse_batch_header(stored).compression == CompressionType.ZSTD


def test_a_partial_trailing_batch_is_dropped(tmp_path, clock):
    log = open_log(tmp_path, clock)
    batch = make_batch([1, 2])
    info = log.append_as_leader(batch + make_batch([3])[:30])
    assert info.valid_bytes == len(batch)
    assert log.active_segment.size == len(batch)


@pytest.mark.parametrize("mutate, error", [
    (lambda b: b.__setitem__(slice(0, 8), (5).to_bytes(8, "big")), InvalidRecordException),  # baseOffset != 0
    (lambda b: b.__setitem__(-1, b[-1] ^ 1), CorruptRecordException),  # CRC
    (lambda b: b.__setitem__(16, 3), CorruptRecordException),  # magic
    (lambda b: b.__setitem__(slice(8, 12), (10).to_bytes(4, "big")), CorruptRecordException),  # length < 14
    (lambda b: b.__setitem__(16, 1), UnsupportedForMessageFormatException),
])
def test_invalid_batches_are_refused(tmp_path, clock, mutate, error):
    log = open_log(tmp_path, clock)
    batch = make_batch([1000, 1001])
    mutate(batch)
    with pytest.raises(error):
        log.append_as_leader(batch)
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_client_batch_checks(tmp_path, clock):
    log = open_log(tmp_path, clock)
    with pytest.raises(InvalidRecordException, match="more than one batch"):
        log.append_as_leader(make_batch() + make_batch())
    with pytest.raises(InvalidRecordException, match="Inconsistent batch offset range"):
        log.append_as_leader(bytearray(build_batch([Record(0, 0, b"k", b"v", [])], last_offset_delta=3)))
    with pytest.raises(InvalidRecordException, match="control records"):
        log.append_as_leader(bytearray(build_control_batch("COMMIT", 1, 0, 0, 0, clock.now)))
    with pytest.raises(InvalidRecordException, match="sequence"):
        log.append_as_leader(make_batch(producer=(1, 0, -1)))
    # The broker's own writes (transaction markers) skip the client checks.
    marker = bytearray(build_control_batch("COMMIT", 1, 0, 0, 0, clock.now))
    info = log.append_as_leader(marker, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0


def test_batch_size_limits(tmp_path, clock):
    log = open_log(tmp_path, clock, max_message_bytes=100)
    with pytest.raises(RecordTooLargeException):
        log.append_as_leader(make_batch(value_size=100))
    log = Log.open(tmp_path / "other-0", small_config(segment_bytes=100, max_message_bytes=10_000), clock_ms=clock)
    with pytest.raises(RecordBatchTooLargeException):
        log.append_as_leader(make_batch(value_size=100))


def test_records_over_an_hour_ahead_are_refused_by_default(tmp_path, clock):
    """Kafka 4.0's message.timestamp.after.max.ms default (KIP-937): one hour."""
    log = open_log(tmp_path, clock)
    append(log, [clock.now + 3_600_000])
    with pytest.raises(InvalidTimestampException):
        append(log, [clock.now + 3_600_001])


def test_timestamps_outside_the_allowed_window_are_refused(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=100)
    append(log, [clock.now - 1000, clock.now + 100])
    with pytest.raises(InvalidTimestampException):
        append(log, [clock.now - 1001])
    with pytest.raises(InvalidTimestampException):
        append(log, [clock.now, clock.now + 101])


def test_compacted_topics_need_keys(tmp_path, clock):
    log = open_log(tmp_path, clock, cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordException, match="without key"):
        log.append_as_leader(make_batch(key=None))
    assert log.append_as_leader(make_batch()).first_offset == 0


# -- rolling

def test_roll_by_size(tmp_path, clock):
    batch_size = len(make_batch())
    log = open_log(tmp_path, clock, segment_bytes=3 * batch_size)
    infos = [append(log) for _ in range(7)]
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [s.size for s in log.segments] == [3 * batch_size, 3 * batch_size, batch_size]
    assert [i.flush_needed for i in infos] == [False] * 3 + [True] * 4
    log.flush()
    # After the flush an old segment keeps only its log file open, as Kafka's do.
    open_paths = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}
    names = {os.path.basename(p) for p in open_paths if os.path.dirname(p) == os.path.realpath(log.dir)}
    assert "00000000000000000000.log" in names and "00000000000000000000.index" not in names
    assert "00000000000000000006.log" in names


def test_roll_by_time_follows_record_timestamps(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=1000, message_timestamp_type="LogAppendTime")
    append(log)
    clock.now += 1000
    append(log)  # exactly segment.ms later: not yet
    clock.now += 1
    append(log)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_roll_by_time_without_timestamps_counts_from_creation(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_ms=1000, message_timestamp_before_max_ms=2**62)
    append(log, [-1])
    clock.now += 1001
    append(log, [-1])
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_roll_when_the_index_is_full(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_index_bytes=36)  # 4 offset entries, 3 time entries
    for i in range(6):
        append(log, [1000 + i])
    # The first batch gets no entry; the time index, kept one slot short, is full after 2 more.
    assert [s.base_offset for s in log.segments] == [0, 3]


# -- reads

def test_read_respects_the_log_range(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log, [1, 2])
    assert log.read(2, 1000).records.size == 0
    with pytest.raises(OffsetOutOfRangeException):
        log.read(3, 1000)
    log.delete_records(1)
    with pytest.raises(OffsetOutOfRangeException):
        log.read(0, 1000)
    assert offsets_in(log.read(1, 1000).records) == [0]  # the whole batch holding offset 1


def test_read_stops_at_the_isolation_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    for _ in range(3):
        log.append_as_leader(make_batch([1, 2]))
    assert offsets_in(log.read(0, 10_000, isolation_max_offset=4).records) == [0, 2]
    assert offsets_in(log.read(1, 10_000, isolation_max_offset=2).records) == [0]
    assert log.read(4, 10_000, isolation_max_offset=4).records.size == 0
    assert offsets_in(log.read(0, 10_000).records) == [0, 2, 4]


def test_read_max_bytes_and_min_one_message(tmp_path, clock):
    log = open_log(tmp_path, clock)
    size = len(make_batch())
    for _ in range(3):
        append(log)
    assert log.read(0, 1).records.size == size
    assert log.read(0, 1, min_one_message=False).records.size == 1
    assert log.read(0, 2 * size).records.size == 2 * size


def test_read_continues_into_the_next_segment(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=len(make_batch()))
    for _ in range(3):
        append(log)
    assert len(log.segments) == 3
    log.truncate_to(3)
    assert offsets_in(log.read(1, 10_000).records) == [1]


def test_high_watermark_is_kept_within_the_log(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch([1, 2]))
    log.high_watermark = 10
    assert log.high_watermark == 2
    log.high_watermark = -5
    assert log.high_watermark == 0


# -- ListOffsets

def test_fetch_offset_by_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=200)  # two of these batches
    append(log, [100, 200])
    append(log, [300, 250])
    append(log, [400, 500])
    assert len(log.segments) == 2
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == OffsetAndTimestamp(0, -1)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == OffsetAndTimestamp(6, -1)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == OffsetAndTimestamp(5, 500)
    assert log.fetch_offset_by_timestamp(0) == OffsetAndTimestamp(0, 100)
    assert log.fetch_offset_by_timestamp(201) == OffsetAndTimestamp(2, 300)
    assert log.fetch_offset_by_timestamp(260) == OffsetAndTimestamp(2, 300)
    assert log.fetch_offset_by_timestamp(301) == OffsetAndTimestamp(4, 400)
    assert log.fetch_offset_by_timestamp(501) is None
    log.delete_records(3)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == OffsetAndTimestamp(3, -1)
    assert log.fetch_offset_by_timestamp(0) == OffsetAndTimestamp(3, 250)


def test_max_timestamp_prefers_the_first_record_holding_it(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log, [100, 900, 900])
    append(log, [900])
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == OffsetAndTimestamp(1, 900)


def test_offsets_for_times_with_log_append_time(tmp_path, clock):
    log = open_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    append(log, [1, 2])
    clock.now += 10
    append(log, [3])
    assert log.fetch_offset_by_timestamp(clock.now - 5) == OffsetAndTimestamp(2, clock.now)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == OffsetAndTimestamp(2, clock.now)


# -- DeleteRecords and retention

def test_delete_records_moves_the_log_start_offset(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log, [1, 2, 3])
    assert log.delete_records(2) == 2
    assert log.log_start_offset == 2
    assert log.delete_records(1) == 2  # never backwards
    with pytest.raises(OffsetOutOfRangeException):
        log.delete_records(4)  # beyond the high watermark
    compacted = Log.open(tmp_path / "c-0", small_config(cleanup_policy=("compact",)), clock_ms=clock)
    with pytest.raises(PolicyViolationException):
        compacted.delete_records(0)


def test_segments_below_the_log_start_offset_go_on_retention(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=len(make_batch()), retention_ms=-1)
    for _ in range(4):
        append(log)
    log.delete_records(2)
    assert log.delete_old_segments(clock.now) == 2
    assert [s.base_offset for s in log.segments] == [2, 3]


def test_retention_by_time_uses_the_largest_timestamp(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=len(make_batch()), retention_ms=1000)
    for age in (3000, 2000, 500):
        append(log, [clock.now - age])
    assert log.delete_old_segments(clock.now) == 2
    assert [s.base_offset for s in log.segments] == [2]
    assert log.log_start_offset == 2
    assert all(p.name.endswith(".deleted") for p in log.dir.iterdir() if p.name.startswith("0000000000000000000[01]"))


def test_retention_rolls_rather_than_deleting_the_active_segment(tmp_path, clock):
    log = open_log(tmp_path, clock, retention_ms=1000)
    append(log, [clock.now - 5000, clock.now - 5000])
    assert log.delete_old_segments(clock.now) == 1
    assert [(s.base_offset, s.size) for s in log.segments] == [(2, 0)]
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert log.delete_old_segments(clock.now) == 0  # an empty active segment stays


def test_retention_never_passes_the_high_watermark(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=len(make_batch()), retention_ms=1000)
    for _ in range(3):
        log.append_as_leader(make_batch([clock.now - 5000]))
    log.high_watermark = 1
    assert log.delete_old_segments(clock.now) == 1
    assert log.log_start_offset == 1


def test_retention_by_size(tmp_path, clock):
    size = len(make_batch())
    log = open_log(tmp_path, clock, segment_bytes=size, retention_bytes=2 * size + 1, retention_ms=-1)
    for _ in range(5):
        append(log)
    assert log.delete_old_segments(clock.now) == 2
    assert [s.base_offset for s in log.segments] == [2, 3, 4]


def test_compact_only_topics_skip_time_and_size_retention(tmp_path, clock):
    size = len(make_batch())
    log = open_log(tmp_path, clock, segment_bytes=size, retention_bytes=1, retention_ms=1, cleanup_policy=("compact",))
    for _ in range(3):
        append(log, [1])
    assert log.delete_old_segments(clock.now) == 0


def test_deleted_segment_files_wait_for_the_delay(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=len(make_batch()), retention_ms=1000, file_delete_delay_ms=60_000)
    append(log, [clock.now - 5000])
    append(log, [clock.now])
    held = log.read(0, 1000).records  # a fetch still holding the old segment's file range
    before = held.read_bytes()
    assert log.delete_old_segments(clock.now) == 1
    assert held.read_bytes() == before and len(before) == held.size  # still readable through its descriptor
    assert log.delete_pending_segments(clock.now + 59_999) == 0
    assert log.delete_pending_segments(clock.now + 60_000) == 1
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]


# -- truncation

def test_truncate_to(tmp_path, clock):
    log = open_log(tmp_path, clock, segment_bytes=2 * len(make_batch()))
    for i in range(5):
        append(log, [100 * i])
    log.flush()
    assert log.truncate_to(3)
    assert (log.log_end_offset, log.high_watermark, log.recovery_point) == (3, 3, 3)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert append(log).first_offset == 3
    assert not log.truncate_to(10)


def test_truncate_below_the_first_segment_starts_over(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log)
    log.delete_records(1)
    log.delete_old_segments(clock.now)
    log.truncate_fully_and_start_at(7)
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert append(log).first_offset == 7


# -- flushing, closing, deleting

def test_flush_advances_the_recovery_point(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_messages=3)
    assert not append(log).flush_needed
    assert append(log, [1, 2]).flush_needed
    assert log.flush_due(clock.now)
    log.flush(up_to_offset=1)
    assert log.recovery_point == 1
    log.flush()
    assert (log.recovery_point, log.unflushed_messages) == (3, 0)
    assert not log.flush_due(clock.now)


def test_flush_ms(tmp_path, clock):
    log = open_log(tmp_path, clock, flush_ms=100)
    append(log)
    assert not log.flush_due(clock.now + 99)
    assert log.flush_due(clock.now + 100)


def test_delete_removes_the_directory(tmp_path, clock):
    log = open_log(tmp_path, clock)
    append(log)
    log.rename_dir(delete_dir_name("topic", 0))
    assert log.dir.name.startswith("topic-0.") and log.dir.name.endswith("-delete")
    log.delete()
    assert list(tmp_path.iterdir()) == []


def test_directory_names():
    assert parse_topic_partition_name("my-topic-12") == ("my-topic", 12)
    assert parse_topic_partition_name("t-3.0123abcd-delete") == ("t", 3)
    for bad in ("topic", "-1", "topic-", "topic-x", "t-3-delete"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)
    long_name = delete_dir_name("x" * 300, 1)
    assert len(long_name) == 255 and parse_topic_partition_name(long_name)[1] == 1


def test_append_after_close_fails(tmp_path, clock):
    log = open_log(tmp_path, clock)
    log.close()
    with pytest.raises(KafkaStorageException, match="closed"):
        log.append_as_leader(make_batch())
    assert os.path.exists(log.dir)


def test_flush_and_retention_threads_interleave_with_appends(tmp_path, clock):
    size = len(make_batch())
    # Deleted segments stay open for file.delete.delay.ms: the reads below may hold their ranges.
    log = open_log(tmp_path, clock, segment_bytes=4 * size, retention_bytes=20 * size, retention_ms=-1,
                   file_delete_delay_ms=1000)
    stop = threading.Event()
    errors = []

    def background():
        try:
            while not stop.is_set():
                log.flush()
                log.delete_old_segments(clock.now)
                log.delete_pending_segments(clock.now)
                assert log.recovery_point <= log.log_end_offset
        except Exception as e:  # surfaced below: an assert in a thread would be lost
            errors.append(e)

    worker = threading.Thread(target=background)
    worker.start()
    try:
        for _ in range(400):
            append(log)
            start = log.log_start_offset
            assert offsets_in(log.read(start, 10 * size).records)[0] <= start
    finally:
        stop.set()
        worker.join()
    assert errors == []
    log.flush()
    log.delete_old_segments(clock.now)
    assert (log.recovery_point, log.log_end_offset) == (400, 400)
    assert log.size <= 20 * size
    assert log.segments[0].base_offset == log.log_start_offset
    assert offsets_in(log.read(399, size).records) == [399]
    assert log.delete_pending_segments(clock.now + 1000) > 0
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]


def test_an_io_error_takes_the_log_offline_and_a_restart_recovers_it(tmp_path, clock, monkeypatch):
    log = open_log(tmp_path, clock)
    append(log, [1, 2])
    written = log.active_segment.size
    real_pwrite = os.pwrite

    def disk_full(fd, data, offset):
        real_pwrite(fd, bytes(data)[:20], offset)  # a torn write, then the failure
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "pwrite", disk_full)
    with pytest.raises(KafkaStorageException, match="No space left"):
        log.append_as_leader(make_batch())
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert log.is_offline
    with pytest.raises(KafkaStorageException, match="offline"):
        log.append_as_leader(make_batch())
    with pytest.raises(KafkaStorageException, match="offline"):
        log.read(0, 1000)
    log.close()
    assert (log.dir / "00000000000000000000.log").stat().st_size == written
    reopened = open_log(tmp_path, clock)
    assert reopened.log_end_offset == 2
    assert append(reopened).first_offset == 2
