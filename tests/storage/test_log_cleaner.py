"""Log compaction: a cleaning pass keeps the latest record of each key at its offset, tombstones
for delete.retention.ms after the cleaner reaches them, producers' last batches; the swap of a
cleaned segment survives a crash at any point; reads under way keep their file ranges."""

import os
import shutil
import socket

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from storage_helpers import NO_PRODUCER, batches, cleaner_for, small_config

from samsa.storage.checkpoints import OffsetCheckpointFile
from samsa.storage.cleaner import (
    OFFSET_MAP_ENTRY_BYTES, Cleaner, CleanerStats, LogCleaningAbortedException, OffsetMap, Throttler,
)
from samsa.storage.errors import InvalidRecordException, KafkaStorageException, OutOfOrderSequenceException
from samsa.storage.log import Log
from samsa.storage.log_cleaner import CLEANER_CHECKPOINT_FILE, CleanerConfig
from samsa.storage.log_manager import LogManager
from samsa.wire.records import CompressionType, decode_batch, iter_batch_headers

COMPACT = {"cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": 0.01}


def keyed_batch(records, *, timestamps=None, compression=0, producer=NO_PRODUCER) -> bytearray:
    """A v2 batch (built by kafka-python) of (key, value) records; a None value is a tombstone."""
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=0,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    for delta, (key, value) in enumerate(records):
        timestamp = timestamps[delta] if timestamps else 1_000_000 + delta
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=[])
    return bytearray(builder.build())


def compacted_log(directory, clock, name: str = "t-0", **overrides) -> Log:
    return Log.open(directory / name, small_config(**{**COMPACT, **overrides}), clock_ms=clock)


def append(log: Log, records, **kwargs):
    info = log.append_as_leader(keyed_batch(records, **kwargs))
    log.high_watermark = log.log_end_offset
    return info


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record, segment by segment."""
    out = []
    for header in batches(log):
        _, records = decode_batch(header[1])
        out += [(header[0].record_offset(r), r.key, r.value) for r in records]
    return out


def rounds_of_updates(log: Log, keys: int = 4, rounds: int = 3) -> None:
    """`rounds` segments, each with one batch per key, then an active segment with one record."""
    for round_ in range(rounds):
        for key in range(keys):
            append(log, [(b"k%d" % key, b"v%d.%d" % (key, round_))])
        log.roll()
    append(log, [(b"k0", b"active")])


def test_a_pass_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    rounds_of_updates(log)
    cleaner = cleaner_for(tmp_path, clock, log)

    assert cleaner.clean_filthiest_log()
    # Offsets never change; the active segment (offset 12) is not touched.
    assert contents(log) == [(8 + k, b"k%d" % k, b"v%d.2" % k) for k in range(4)] + [(12, b"k0", b"active")]
    assert [s.base_offset for s in log.segments] == [0, 12]
    assert (tmp_path / CLEANER_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 12\n"
    assert cleaner.checkpoints() == {("t", 0): 12}
    # Every offset still reads: a compacted-away one reads as the next one there is.
    for offset in range(13):
        first = batches_of(log.read(offset, 1).records.read_bytes())[0]
        assert first.last_offset >= offset and (offset < 8 or first.base_offset == offset)
    assert not cleaner.clean_filthiest_log()  # nothing dirty is left


def batches_of(data: bytes):
    return [header for _, header in iter_batch_headers(data)]


def test_the_active_segment_is_never_cleaned(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    for value in (b"1", b"2", b"3"):
        append(log, [(b"k", value)])
    cleaner = cleaner_for(tmp_path, clock, log)
    assert not cleaner.clean_filthiest_log()
    assert [value for _, _, value in contents(log)] == [b"1", b"2", b"3"]


def test_a_log_is_cleaned_once_its_dirty_ratio_passes_min_cleanable_dirty_ratio(tmp_path, clock):
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.5)
    for key in range(4):
        append(log, [(b"k%d" % key, b"v")])
    log.roll()
    append(log, [(b"k0", b"w")])
    cleaner = cleaner_for(tmp_path, clock, log)
    assert cleaner.clean_filthiest_log()  # all of it was dirty
    assert cleaner.checkpoints() == {("t", 0): 4}

    log.roll()
    append(log, [(b"k1", b"w")])
    assert not cleaner.clean_filthiest_log()  # one dirty batch of five: a ratio of 0.2
    for key in (2, 3, 1):
        log.roll()
        append(log, [(b"k%d" % key, b"w")])
    assert not cleaner.clean_filthiest_log()  # four of eight: the ratio must be above 0.5
    log.roll()
    append(log, [(b"k0", b"w")])
    assert cleaner.clean_filthiest_log()
    assert contents(log) == [(4, b"k0", b"w"), (6, b"k2", b"w"), (7, b"k3", b"w"), (8, b"k1", b"w"),
                             (9, b"k0", b"w")]


def test_the_dirtiest_log_goes_first(tmp_path, clock):
    calm, busy = (compacted_log(tmp_path, clock, name) for name in ("calm-0", "busy-0"))
    for key in range(4):
        append(calm, [(b"k%d" % key, b"v")])
    calm.roll()
    append(calm, [(b"k0", b"w")])
    assert cleaner_for(tmp_path, clock, calm).clean_filthiest_log()  # calm: 4 clean batches
    calm.roll()
    append(calm, [(b"k1", b"w")])  # and 1 dirty one: a ratio of 0.2
    rounds_of_updates(busy, rounds=2)  # busy: a ratio of 1
    cleaner = cleaner_for(tmp_path, clock, calm, busy)
    assert cleaner.clean_filthiest_log()
    assert cleaner.checkpoints() == {("calm", 0): 4, ("busy", 0): 8}
    assert cleaner.clean_filthiest_log()
    assert cleaner.checkpoints() == {("calm", 0): 5, ("busy", 0): 8}


def test_a_tombstone_outlives_its_key_by_delete_retention_ms(tmp_path, clock):
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0, delete_retention_ms=1000)
    append(log, [(b"gone", b"v1")])
    append(log, [(b"kept", b"v")])
    append(log, [(b"gone", None)], timestamps=[777])
    log.roll()
    append(log, [(b"filler", b"1")])
    cleaner = cleaner_for(tmp_path, clock, log)

    assert cleaner.clean_filthiest_log()
    assert contents(log)[:2] == [(1, b"kept", b"v"), (2, b"gone", None)]
    # The cleaner reached the tombstone now: its batch carries the delete horizon, its record
    # its own timestamp.
    header, data = batches(log)[1]
    assert header.has_delete_horizon and header.base_timestamp == clock.now + 1000
    decoded_header, records = decode_batch(data)
    assert decoded_header.record_timestamp(records[0]) == 777 and header.max_timestamp == 777

    def another_pass():
        log.roll()
        append(log, [(b"filler", b"%d" % log.log_end_offset)])
        assert cleaner.clean_filthiest_log()

    clock.now += 999
    another_pass()
    assert (2, b"gone", None) in contents(log)
    clock.now += 1
    another_pass()
    assert [key for _, key, _ in contents(log)] == [b"kept", b"filler", b"filler"]


def test_min_compaction_lag_ms_keeps_young_records_out_of_a_pass(tmp_path, clock):
    log = compacted_log(tmp_path, clock, min_compaction_lag_ms=10_000)
    append(log, [(b"k", b"old")], timestamps=[clock.now - 20_000])
    log.roll()
    append(log, [(b"k", b"new")], timestamps=[clock.now - 5_000])
    log.roll()
    append(log, [(b"k", b"newest")], timestamps=[clock.now])
    cleaner = cleaner_for(tmp_path, clock, log)

    assert cleaner.clean_filthiest_log()  # only the first segment is past the lag
    assert [value for _, _, value in contents(log)] == [b"old", b"new", b"newest"]
    assert cleaner.checkpoints() == {("t", 0): 1}
    clock.now += 5_001
    assert cleaner.clean_filthiest_log()
    assert [value for _, _, value in contents(log)] == [b"new", b"newest"]


def test_max_compaction_lag_ms_forces_a_pass_below_the_dirty_ratio(tmp_path, clock):
    log = compacted_log(tmp_path, clock, min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=60_000)
    append(log, [(b"k%d" % key, b"v") for key in range(20)], timestamps=[clock.now] * 20)
    log.roll()
    append(log, [(b"other", b"x")], timestamps=[clock.now])
    cleaner = cleaner_for(tmp_path, clock, log)
    assert cleaner.clean_filthiest_log()
    log.roll()
    append(log, [(b"k0", b"w")], timestamps=[clock.now])
    log.roll()
    append(log, [(b"other", b"y")], timestamps=[clock.now])

    clock.now += 60_000
    assert not cleaner.clean_filthiest_log()  # a small dirty share, not older than the lag yet
    clock.now += 1
    assert cleaner.clean_filthiest_log()
    assert [key for _, key, _ in contents(log)].count(b"k0") == 1


def test_compact_and_delete_both_apply(tmp_path, clock):
    log = compacted_log(tmp_path, clock, cleanup_policy=("compact", "delete"), retention_ms=100_000)
    append(log, [(b"a", b"ancient")], timestamps=[clock.now - 200_000])
    log.roll()
    for value in (b"1", b"2", b"3"):
        append(log, [(b"b", value)], timestamps=[clock.now])
    log.roll()
    append(log, [(b"c", b"active")], timestamps=[clock.now])
    cleaner = cleaner_for(tmp_path, clock, log)

    assert log.delete_old_segments(clock.now) == 1  # retention.ms
    assert cleaner.clean_filthiest_log()  # and compaction
    assert contents(log) == [(3, b"b", b"3"), (4, b"c", b"active")]
    assert log.delete_records(4) == 4  # DeleteRecords is allowed with delete in the policy


def test_a_small_offset_map_cleans_in_several_passes(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    rounds_of_updates(log, keys=20, rounds=3)  # offsets 0-59, then the active segment
    cleaner = cleaner_for(tmp_path, clock, log)
    # As a dynamic config change would: 15 keys a pass from the next pass on.
    cleaner.reconfigure(CleanerConfig(dedupe_buffer_size=15 * OFFSET_MAP_ENTRY_BYTES, dedupe_buffer_load_factor=1.0))
    checkpoints = []
    while cleaner.clean_filthiest_log():
        checkpoints.append(cleaner.checkpoints()[("t", 0)])
    assert checkpoints == [15, 30, 45, 60]
    assert contents(log) == [(40 + k, b"k%d" % k, b"v%d.2" % k) for k in range(20)] + [(60, b"k0", b"active")]


def test_a_producer_keeps_its_last_batch_so_its_sequence_survives(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    append(log, [(b"a", b"1")], producer=(7, 0, 0))
    append(log, [(b"b", b"1")], producer=(7, 0, 1))  # the producer's last batch
    append(log, [(b"a", b"2"), (b"b", b"2")])
    log.roll()
    append(log, [(b"c", b"x")])
    assert cleaner_for(tmp_path, clock, log).clean_filthiest_log()

    # The first batch is gone; the last one is kept empty with its offsets and producer fields.
    headers = [h for h, _ in batches(log)]
    assert [(h.base_offset, h.last_offset, h.records_count, h.producer_id, h.producer_epoch, h.base_sequence)
            for h in headers[:2]] == [(1, 1, 0, 7, 0, 1), (2, 3, 2, -1, -1, -1)]
    # Rebuilt from the cleaned log alone, the producer state still knows sequence 1 was last.
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log.open(tmp_path / "t-0", log.config, clock_ms=clock, had_clean_shutdown=False)
    reopened.high_watermark = reopened.log_end_offset
    with pytest.raises(OutOfOrderSequenceException):
        append(reopened, [(b"d", b"1")], producer=(7, 0, 5))
    assert append(reopened, [(b"d", b"1")], producer=(7, 0, 2)).first_offset == 5


def first_batch_after_cleaning(tmp_path, clock, log: Log):
    """Roll, write one more record, clean; the first batch's header, decoded header and records."""
    log.roll()
    append(log, [(b"last", b"x")])
    assert cleaner_for(tmp_path, clock, log).clean_filthiest_log()
    header, data = batches(log)[0]
    return (header, *decode_batch(data))


@pytest.mark.parametrize("compression", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                         CompressionType.ZSTD])
def test_a_partly_kept_batch_is_rebuilt_with_its_codec_offsets_and_timestamps(tmp_path, clock, compression):
    log = compacted_log(tmp_path, clock)
    value = b"compressible " * 20  # kafka-python sends a batch uncompressed when that is smaller
    append(log, [(b"a", value), (b"b", value), (b"c", value)], timestamps=[5000, 5001, 5002],
           compression=compression, producer=(3, 2, 10))
    assert batches(log)[0][0].compression == compression
    append(log, [(b"c", b"2")])
    header, decoded_header, records = first_batch_after_cleaning(tmp_path, clock, log)
    assert (header.compression, header.base_offset, header.last_offset, header.records_count) == (compression, 0, 2, 2)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (3, 2, 10)
    assert [(decoded_header.record_offset(r), r.key, r.value, decoded_header.record_timestamp(r))
            for r in records] == [(0, b"a", value, 5000), (1, b"b", value, 5001)]
    assert (header.base_timestamp, header.max_timestamp) == (5000, 5001)


def test_log_append_time_batches_keep_their_append_time(tmp_path, clock):
    log = compacted_log(tmp_path, clock, message_timestamp_type="LogAppendTime")
    append(log, [(b"a", b"1"), (b"b", b"1")])
    append(log, [(b"b", b"2")])
    header, decoded_header, records = first_batch_after_cleaning(tmp_path, clock, log)
    assert header.timestamp_type == 1 and header.max_timestamp == clock.now
    assert [decoded_header.record_timestamp(r) for r in records] == [clock.now]


def test_records_without_key_are_refused(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    with pytest.raises(InvalidRecordException) as refused:
        append(log, [(b"a", b"1"), (None, b"2"), (None, b"3")])
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert refused.value.record_errors == ((1, message), (2, message))
    assert str(refused.value).startswith("One or more records have been rejected due to 2 record errors")
    assert log.log_end_offset == 0


def test_indexes_of_a_cleaned_segment_match_a_rebuild(tmp_path, clock):
    log = compacted_log(tmp_path, clock)
    for key in range(30):
        append(log, [(b"k%d" % (key % 7), b"v%d" % key)], timestamps=[10_000 + key])
    log.roll()
    append(log, [(b"z", b"z")], timestamps=[20_000])
    assert cleaner_for(tmp_path, clock, log).clean_filthiest_log()
    cleaned = log.segments[0]

    def entries(segment):
        return ([segment.offset_index.entry(i) for i in range(segment.offset_index.entries)],
                [segment.time_index.entry(i) for i in range(segment.time_index.entries)])
    written = entries(cleaned)
    assert len(written[0]) == 6  # seven batches kept: every one after the first is indexed
    cleaned.offset_index.sanity_check(cleaned.size)
    cleaned.time_index.sanity_check(cleaned.size)
    log.close()
    reopened = Log.open(tmp_path / "t-0", log.config, clock_ms=clock)
    assert entries(reopened.segments[0]) == written  # as loaded from the files
    reopened.segments[0].recover()
    assert entries(reopened.segments[0]) == written  # as a rebuild from the log makes them
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.fetch_offset_by_timestamp(10_000).offset == 23  # the first record kept
    assert reopened.fetch_offset_by_timestamp(10_025).offset == 25
    assert reopened.fetch_offset_by_timestamp(10_029).offset == 29


def test_a_fetch_holding_an_old_segment_still_sends_it_after_the_swap(tmp_path, clock):
    log = compacted_log(tmp_path, clock, file_delete_delay_ms=60_000)
    rounds_of_updates(log)
    under_way = [log.read(offset, 1 << 20).records for offset in (0, 4, 8)]  # one range per old segment
    expected = [records.read_bytes() for records in under_way]
    assert cleaner_for(tmp_path, clock, log).clean_filthiest_log()
    assert log.read(0, 1 << 20).records.read_bytes() != expected[0]  # new reads see the cleaned segment

    sender, receiver = socket.socketpair()
    with sender, receiver:
        for records, data in zip(under_way, expected):
            sent = 0
            while sent < records.size:
                sent += os.sendfile(sender.fileno(), records.fd, records.position + sent, records.size - sent)
            received = b""
            while len(received) < len(data):
                received += receiver.recv(1 << 16)
            assert received == data
    assert log.delete_pending_segments(clock.now + 59_999) == 0
    assert log.delete_pending_segments(clock.now + 60_000) == 3
    assert not list((tmp_path / "t-0").glob("*.deleted"))


def test_a_crash_at_any_point_of_a_swap_recovers_one_whole_side(tmp_path, clock, monkeypatch):
    directory = tmp_path / "data"
    log = compacted_log(directory, clock)
    rounds_of_updates(log)
    log.flush()
    before = contents(log)
    crash_states = []
    real_rename = os.rename

    def rename_after_copying_the_directory(source, target):
        crash_states.append(shutil.copytree(directory / "t-0", tmp_path / f"crash{len(crash_states)}" / "t-0"))
        real_rename(source, target)
    monkeypatch.setattr(os, "rename", rename_after_copying_the_directory)
    assert cleaner_for(directory, clock, log).clean_filthiest_log()
    monkeypatch.setattr(os, "rename", real_rename)
    after = contents(log)
    assert after != before

    # Renames: the cleaned files to .swap (3), the three old segments to .deleted (9), the swap
    # files to their names (3). The swap counts once all three .swap files exist.
    assert len(crash_states) == 15
    recovered = []
    for state in crash_states:
        reopened = Log.open(state, log.config, clock_ms=clock, had_clean_shutdown=False)
        assert not [p.name for p in state.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
        recovered.append(contents(reopened))
        reopened.high_watermark = reopened.log_end_offset
        assert append(reopened, [(b"next", b"1")]).first_offset == 13
        reopened.close()
    assert recovered == [before] * 3 + [after] * 12


def test_retention_during_a_pass_aborts_the_swap(tmp_path, clock):
    log = compacted_log(tmp_path, clock, cleanup_policy=("compact", "delete"))
    rounds_of_updates(log)
    cleaner = Cleaner(offset_map_capacity=100, io_buffer_size=4096, throttler=Throttler(1e308))
    offset_map = OffsetMap(100)
    cleaner.build_offset_map(log, 0, 12, offset_map, stats := CleanerStats(), lambda: None)
    group = list(log.segments[:3])
    log.delete_records(4)
    assert log.delete_old_segments(clock.now) == 1  # the first segment goes while the pass runs
    with pytest.raises(LogCleaningAbortedException):
        cleaner.clean_segments(log, group, offset_map, clock.now, 12, stats, lambda: None)
    assert not [p.name for p in (tmp_path / "t-0").iterdir() if p.suffix in (".cleaned", ".swap")]
    assert [s.base_offset for s in log.segments] == [4, 8, 12]


def test_the_log_manager_runs_the_cleaner_with_retention_and_deletion(tmp_path, clock):
    manager = LogManager([tmp_path], small_config(**COMPACT), clock, cleaner_config=CleanerConfig())
    manager.startup()
    log = manager.create_log("t", 0)
    rounds_of_updates(log)
    assert manager.cleaner.clean_filthiest_log()
    manager.shutdown()
    assert OffsetCheckpointFile(tmp_path / CLEANER_CHECKPOINT_FILE).read() == {("t", 0): 12}

    manager = LogManager([tmp_path], small_config(**COMPACT), clock, cleaner_config=CleanerConfig())
    manager.startup({"t": small_config(**COMPACT)})
    assert manager.cleaner.checkpoints() == {("t", 0): 12}
    assert not manager.cleaner.clean_filthiest_log()
    manager.delete_log("t", 0)
    assert manager.cleaner.checkpoints() == {}
    manager.checkpoint()
    assert OffsetCheckpointFile(tmp_path / CLEANER_CHECKPOINT_FILE).read() == {}
    manager.shutdown()


@pytest.mark.parametrize("wrapped", [False, True], ids=["OSError", "KafkaStorageException"])
def test_an_io_error_of_a_pass_takes_the_log_dir_offline(tmp_path, clock, monkeypatch, wrapped):
    """Kafka's LogCleaner.cleanLog: an IOException reports the log's dir to the LogDirFailureChannel
    (here also one a segment's append raised as KafkaStorageException)."""
    manager = LogManager([tmp_path], small_config(**COMPACT), clock, cleaner_config=CleanerConfig())
    manager.startup()
    log = manager.create_log("t", 0)
    rounds_of_updates(log)

    def no_space(*args, **kwargs):
        error = OSError(28, "No space left on device")
        if wrapped:
            raise KafkaStorageException(f"Error while appending to the cleaned segment: {error}") from error
        raise error
    monkeypatch.setattr(manager.cleaner._setup[1], "clean", no_space)
    assert manager.cleaner.clean_filthiest_log()
    assert manager.failure_channel.offline_log_dirs == {tmp_path}
    assert log.is_offline and manager.is_log_offline("t", 0)
    assert not manager.cleaner.clean_filthiest_log()  # an offline log is not cleaned again
    assert not (tmp_path / CLEANER_CHECKPOINT_FILE).exists()  # nor its dir's checkpoint written


def test_cleaning_stops_when_the_log_is_deleted(tmp_path, clock):
    manager = LogManager([tmp_path], small_config(**COMPACT), clock, cleaner_config=CleanerConfig())
    manager.startup()
    log = manager.create_log("t", 0)
    rounds_of_updates(log)
    original = manager.cleaner._check_done
    deleted = []

    def delete_midway(tp):
        if not deleted:
            deleted.append(manager.delete_log("t", 0))
        original(tp)
    manager.cleaner._check_done = delete_midway
    assert manager.cleaner.clean_filthiest_log()
    assert manager.cleaner.checkpoints() == {}
    assert not list(deleted[0].dir.glob("*.cleaned"))
    manager.shutdown()


def test_retention_skips_a_log_being_cleaned(tmp_path, clock):
    config = small_config(**{**COMPACT, "cleanup_policy": ("compact", "delete"), "retention_ms": 1})
    manager = LogManager([tmp_path], config, clock, cleaner_config=CleanerConfig())
    manager.startup()
    log = manager.create_log("t", 0)
    rounds_of_updates(log)
    clock.now += 10**9
    original = manager.cleaner._check_done
    removed = []

    def retention_midway(tp):
        removed.append(manager.cleanup(clock.now))
        original(tp)
    manager.cleaner._check_done = retention_midway
    assert manager.cleaner.clean_filthiest_log()
    assert set(removed) == {0}
    manager.cleaner._check_done = original
    assert manager.cleanup(clock.now) > 0  # once the pass is over
    manager.shutdown()


@pytest.mark.parametrize("old_segment", ["kept", "renamed .deleted", "half renamed"])
def test_kafkas_split_of_a_segment_into_swap_files_completes_on_load(tmp_path, clock, old_segment):
    """Kafka's splitOverflowedSegment replaces one segment with several, each written as
    `<base>.log.swap` (and its indexes); a crash leaves them with the old segment still there, or
    renamed `.deleted`, or partly renamed. Loading completes the swap: each `.swap` log replaces
    the segments from its base offset to its last, the result reads the same records."""
    directory = tmp_path / "data"
    log = compacted_log(directory, clock)
    rounds_of_updates(log)
    log.flush()
    before = contents(log)
    log.close()
    partition = directory / "t-0"
    first = partition / "00000000000000000000.log"
    data = first.read_bytes()
    ends = [position + header.size for position, header in iter_batch_headers(data)]
    assert len(ends) == 4
    (partition / "00000000000000000000.log.swap").write_bytes(data[:ends[1]])
    (partition / "00000000000000000002.log.swap").write_bytes(data[ends[1]:])
    for suffix in (".index.swap", ".timeindex.swap"):
        (partition / f"00000000000000000000{suffix}").touch()
        (partition / f"00000000000000000002{suffix}").touch()
    if old_segment != "kept":
        renamed = (".log", ".index", ".timeindex") if old_segment == "renamed .deleted" else (".log",)
        for suffix in renamed:
            os.rename(partition / f"00000000000000000000{suffix}", partition / f"00000000000000000000{suffix}.deleted")
    reopened = Log.open(partition, log.config, clock_ms=clock, had_clean_shutdown=False)
    assert not [p.name for p in partition.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")]
    assert [s.base_offset for s in reopened.segments] == [0, 2, 4, 8, 12]
    assert contents(reopened) == before
    reopened.high_watermark = reopened.log_end_offset
    assert append(reopened, [(b"next", b"1")]).first_offset == 13


def test_kafkas_cleaned_files_left_by_a_crash_before_the_swap_are_dropped(tmp_path, clock):
    """A crash while the cleaner writes: `<base>.log.cleaned` with its three indexes (the
    transaction index too, as Kafka's cleaner writes one); the old segments stay as they were."""
    directory = tmp_path / "data"
    log = compacted_log(directory, clock)
    rounds_of_updates(log)
    log.flush()
    before = contents(log)
    log.close()
    partition = directory / "t-0"
    for suffix in (".log", ".index", ".timeindex", ".txnindex"):
        (partition / f"00000000000000000000{suffix}.cleaned").write_bytes(b"\x00" * 37)
    reopened = Log.open(partition, log.config, clock_ms=clock, had_clean_shutdown=False)
    assert not [p.name for p in partition.iterdir() if p.suffix == ".cleaned"]
    assert contents(reopened) == before
