"""Idempotent producers in the log: duplicates answered with their first offsets, gaps and old
epochs refused, the state snapshotted at rolls and on close and rebuilt after a restart or crash."""

import shutil

import pytest
from storage_helpers import make_batch, small_config

from samsa.storage.errors import InvalidProducerEpochException, OutOfOrderSequenceException
from samsa.storage.log import Log
from samsa.storage.log_manager import LogManager
from samsa.storage.producer_snapshots import ProducerSnapshotFiles
from samsa.wire.records import iter_batch_headers

PID = 7


def open_log(directory, clock, *, clean: bool = True, recovery_point: int = 0, expiration_ms: int = 86_400_000,
             **overrides) -> Log:
    return Log.open(directory, small_config(**overrides), clock_ms=clock, had_clean_shutdown=clean,
                    recovery_point=recovery_point, producer_id_expiration_ms=expiration_ms)


def produce(log: Log, sequence: int, count: int = 1, *, epoch: int = 0, pid: int = PID, timestamp: int = 1000):
    info = log.append_as_leader(make_batch([timestamp] * count, producer=(pid, epoch, sequence)))
    log.high_watermark = log.log_end_offset
    return info


def batches_in(log: Log) -> list[tuple[int, int]]:
    data = b"".join(s.log.read_bytes() for s in log.segments)
    return [(h.base_offset, h.base_sequence) for _, h in iter_batch_headers(data)]


def test_a_retried_batch_is_written_once_and_answered_with_its_offsets(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    first = produce(log, 0, 3)
    produce(log, 3, 2)
    retry = produce(log, 0, 3)
    assert (retry.first_offset, retry.last_offset, retry.record_count) == (first.first_offset, first.last_offset, 0)
    assert retry.log_append_time == 1000  # Kafka's answer: the batch's max timestamp
    assert log.log_end_offset == 5 and batches_in(log) == [(0, 0), (3, 3)]
    assert produce(log, 5).first_offset == 5


def test_a_sequence_gap_is_refused_and_nothing_is_written(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    produce(log, 0, 2)
    with pytest.raises(OutOfOrderSequenceException):
        produce(log, 3)
    assert log.log_end_offset == 2
    assert produce(log, 2).first_offset == 2


def test_an_older_epoch_is_refused(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    produce(log, 0, epoch=1)
    with pytest.raises(InvalidProducerEpochException):
        produce(log, 1, epoch=0)
    assert produce(log, 0, epoch=2).first_offset == 1  # a new epoch restarts the sequence


def test_plain_batches_pass_untouched(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    for _ in range(2):
        assert log.append_as_leader(make_batch()).record_count == 1
    assert log.log_end_offset == 2 and log.last_producer_entry(-1) is None


def test_a_roll_snapshots_the_state_before_the_batch(tmp_path, clock):
    batch_size = len(make_batch(producer=(PID, 0, 0)))
    log = open_log(tmp_path / "t-0", clock, segment_bytes=2 * batch_size)
    for sequence in range(5):
        produce(log, sequence)
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.producer_snapshot_offsets == [2, 4]
    files = ProducerSnapshotFiles(log.dir)
    assert [e.last_data_offset for e in files.read(2)] == [1]
    assert [(e.producer_id, e.last_seq, e.last_data_offset) for e in files.read(4)] == [(PID, 3, 3)]
    assert (tmp_path / "t-0" / "00000000000000000004.snapshot").exists()


def test_a_clean_restart_loads_the_snapshot_taken_on_close(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    produce(log, 0, 2)
    last = produce(log, 2, 2)
    log.close()
    assert ProducerSnapshotFiles(directory).offsets == [4]
    log = open_log(directory, clock)
    # Only the last batch survives a reload, as in Kafka's snapshots.
    assert produce(log, 2, 2).first_offset == last.first_offset
    with pytest.raises(OutOfOrderSequenceException):
        produce(log, 0, 2)
    assert produce(log, 4).first_offset == 4


def test_after_a_crash_the_state_is_rebuilt_from_batch_headers(tmp_path, clock):
    directory = tmp_path / "t-0"
    batch_size = len(make_batch(producer=(PID, 0, 0)))
    log = open_log(directory, clock, segment_bytes=2 * batch_size)
    for sequence in range(5):
        produce(log, sequence)
    produce(log, 0, pid=PID + 1)
    crashed = tmp_path / "crashed" / "t-0"
    shutil.copytree(directory, crashed)  # what a kill -9 leaves: no snapshot at the log end
    log.close()
    recovered = open_log(crashed, clock, clean=False, recovery_point=2, segment_bytes=2 * batch_size)
    # The snapshots past the recovery point were not trusted; the state came from offset 2 on.
    assert recovered.producer_snapshot_offsets == [2, 4, 6]
    assert produce(recovered, 4).first_offset == 4  # a retry of the last batch
    assert produce(recovered, 0, pid=PID + 1).first_offset == 5
    with pytest.raises(OutOfOrderSequenceException):
        produce(recovered, 6)
    assert produce(recovered, 5).first_offset == 6


def test_producers_idle_past_the_expiration_are_not_loaded(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    produce(log, 0, timestamp=clock.now - 10_000)
    produce(log, 0, pid=PID + 1, timestamp=clock.now - 9_999)
    log.close()
    log = open_log(directory, clock, expiration_ms=10_000)
    assert log.last_producer_entry(PID) is None and log.last_producer_entry(PID + 1) is not None


def test_a_corrupt_snapshot_falls_back_to_an_older_one(tmp_path, clock):
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    produce(log, 0)
    log.roll()
    produce(log, 1)
    log.close()
    assert ProducerSnapshotFiles(directory).offsets == [1, 2]
    (directory / "00000000000000000002.snapshot").write_bytes(b"\x00\x01garbage")
    log = open_log(directory, clock)
    assert produce(log, 1).first_offset == 1  # rebuilt from the snapshot at 1 and the batch after it
    assert produce(log, 2).first_offset == 2


def test_a_log_without_snapshots_after_a_clean_shutdown_is_not_scanned(tmp_path, clock):
    # A log written before producer state was kept: Kafka writes empty snapshots instead of reading it all.
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    produce(log, 0)
    log.close()
    ProducerSnapshotFiles(directory).delete_all()
    log = open_log(directory, clock)
    assert log.last_producer_entry(PID) is None
    assert log.producer_snapshot_offsets == [1]  # none at 0: the state there is the empty one
    assert produce(log, 5).first_offset == 1  # an unknown producer may go on from any sequence


def test_truncation_rebuilds_the_state(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    produce(log, 0)
    log.roll()
    produce(log, 1)
    produce(log, 2)
    log.truncate_to(2)
    assert log.last_producer_entry(PID).last_seq == 1
    assert produce(log, 2).first_offset == 2
    log.truncate_fully_and_start_at(10)
    assert log.last_producer_entry(PID) is None and log.producer_snapshot_offsets == []


def test_retention_deletes_a_segment_with_its_snapshot(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    for sequence in range(3):
        produce(log, sequence)
        log.roll()
    assert log.producer_snapshot_offsets == [1, 2, 3]
    log.delete_records(2)
    log.delete_old_segments(clock.now)
    assert [s.base_offset for s in log.segments] == [2, 3]
    assert log.producer_snapshot_offsets == [2, 3]
    assert log.last_producer_entry(PID).last_seq == 2  # the producers themselves are kept


def test_snapshots_below_the_recovery_point_and_the_last_two_segments_go_after_a_checkpoint(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock)
    for sequence in range(4):
        produce(log, sequence)
        log.roll()
    assert log.producer_snapshot_offsets == [1, 2, 3, 4]
    log.flush(2)
    assert log.delete_snapshots_after_recovery_point_checkpoint() == 1  # the segment below the recovery point
    assert log.producer_snapshot_offsets == [1, 2, 3, 4]
    log.flush()
    assert log.delete_snapshots_after_recovery_point_checkpoint() == 3  # the last two segments
    assert log.producer_snapshot_offsets == [3, 4]


def test_idle_producers_expire(tmp_path, clock):
    log = open_log(tmp_path / "t-0", clock, expiration_ms=10_000)
    produce(log, 0, timestamp=clock.now)
    assert log.remove_expired_producers(clock.now + 9_999) == 0
    assert log.remove_expired_producers(clock.now + 10_000) == 1
    assert log.last_producer_entry(PID) is None


def test_a_changed_expiration_applies_to_every_log_and_the_next_ones(tmp_path, clock):
    manager = LogManager([tmp_path], small_config(), clock, producer_id_expiration_ms=10_000)
    manager.startup()
    produce(manager.create_log("t", 0), 0, timestamp=clock.now)
    assert manager.remove_expired_producers(clock.now + 5_000) == 0
    assert manager.remove_expired_producers(clock.now + 5_000, expiration_ms=5_000) == 1  # producer.id.expiration.ms
    later = manager.create_log("t", 1)
    produce(later, 0, timestamp=clock.now)
    assert later.remove_expired_producers(clock.now + 5_000) == 1
    manager.shutdown()


def test_log_manager_snapshots_on_shutdown_and_prunes_on_checkpoint(tmp_path, clock):
    manager = LogManager([tmp_path], small_config(), clock, producer_id_expiration_ms=10_000)
    manager.startup()
    log = manager.create_log("t", 0)
    for sequence in range(3):
        produce(log, sequence, timestamp=clock.now)
        log.roll()
    log.flush()
    manager.checkpoint()
    assert log.producer_snapshot_offsets == [2, 3]
    produce(log, 3, timestamp=clock.now)
    manager.shutdown()
    assert ProducerSnapshotFiles(tmp_path / "t-0").offsets == [2, 3, 4]
    manager = LogManager([tmp_path], small_config(), clock, producer_id_expiration_ms=10_000)
    manager.startup()
    assert manager.get_log("t", 0).last_producer_entry(PID).last_seq == 3
    clock.now += 10_000
    assert manager.remove_expired_producers(clock.now) == 1
    manager.shutdown()
