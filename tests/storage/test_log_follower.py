"""A follower's log: the leader's batches appended as they are (offsets, epochs, bytes), the
leader epoch cache following their epochs, truncation where the epochs diverge."""

import pytest
from storage_helpers import batches, make_batch, small_config

from samsa.storage.errors import CorruptRecordException, InvalidRecordException
from samsa.storage.log import Log


def open_log(tmp_path, clock, name: str, **overrides) -> Log:
    return Log.open(tmp_path / name, small_config(**overrides), clock_ms=clock)


def segment_bytes(log: Log) -> bytes:
    return b"".join(segment.log.read_bytes() for segment in log.segments)


def test_the_leaders_batches_land_at_the_same_offsets_byte_for_byte(tmp_path, clock):
    leader = open_log(tmp_path, clock, "leader/t-0")
    follower = open_log(tmp_path, clock, "follower/t-0")
    leader.append_as_leader(make_batch([1, 2, 3]), leader_epoch=0)
    leader.append_as_leader(make_batch([4]), leader_epoch=2)
    leader.append_as_leader(make_batch([5, 6], producer=(7, 0, 0)), leader_epoch=2)
    fetched = leader.read(0, 1 << 20).records.read_bytes()
    info = follower.append_as_follower(memoryview(bytearray(fetched)))
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    assert follower.log_end_offset == leader.log_end_offset == 6
    assert segment_bytes(follower) == segment_bytes(leader)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    assert follower.last_producer_entry(7).last_seq == 1
    # The next fetch continues at the log end offset.
    leader.append_as_leader(make_batch([7]), leader_epoch=2)
    follower.append_as_follower(leader.read(6, 1 << 20).records.read_bytes())
    assert segment_bytes(follower) == segment_bytes(leader)


def leader_with_two_batches_and_follower(tmp_path, clock) -> tuple[Log, Log]:
    leader = open_log(tmp_path, clock, "leader/t-0")
    leader.append_as_leader(make_batch([1]))
    leader.append_as_leader(make_batch([2]))
    return leader, open_log(tmp_path, clock, "follower/t-0")


def test_a_partial_batch_at_the_end_of_a_fetch_is_left_out(tmp_path, clock):
    leader, follower = leader_with_two_batches_and_follower(tmp_path, clock)
    fetched = leader.read(0, 1 << 20).records.read_bytes()
    info = follower.append_as_follower(fetched[:-5])
    assert (info.first_offset, info.last_offset) == (0, 0)
    assert follower.log_end_offset == 1


def test_records_not_at_the_log_end_offset_or_corrupt_are_refused(tmp_path, clock):
    leader, follower = leader_with_two_batches_and_follower(tmp_path, clock)
    second = leader.read(1, 1 << 20).records.read_bytes()
    with pytest.raises(InvalidRecordException):
        follower.append_as_follower(second)
    corrupt = bytearray(leader.read(0, 1 << 20).records.read_bytes())
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordException):
        follower.append_as_follower(corrupt)
    assert follower.log_end_offset == 0


def test_truncation_to_where_the_epochs_diverge(tmp_path, clock):
    """KIP-101: the old leader's records of epoch 1 past where the new leader's epoch 2 starts go."""
    old = open_log(tmp_path, clock, "old/t-0")
    new = open_log(tmp_path, clock, "new/t-0")
    old.append_as_leader(make_batch([1, 2]), leader_epoch=1)
    new.append_as_follower(old.read(0, 1 << 20).records.read_bytes())
    old.append_as_leader(make_batch([3]), leader_epoch=1)  # never replicated
    new.leader_epoch_cache.assign(2, new.log_end_offset)
    new.append_as_leader(make_batch([9]), leader_epoch=2)
    assert new.end_offset_for_epoch(1) == (1, 2)
    epoch, end = old.end_offset_for_epoch(1)
    assert (epoch, end) == (1, 3)
    assert old.truncate_to(min(2, end))
    old.append_as_follower(new.read(2, 1 << 20).records.read_bytes())
    assert [h.partition_leader_epoch for h, _ in batches(old)] == [1, 2]
    assert segment_bytes(old) == segment_bytes(new)
    assert old.leader_epoch_cache.entries == [(1, 0), (2, 2)]


def test_a_leader_epoch_that_wrote_nothing_goes_when_the_log_needs_no_truncation(tmp_path, clock):
    """A leader that took epoch 2 and appended nothing before another leader came: truncating it to
    its log end cuts no record but drops the epoch (Kafka's UnifiedLog.truncateTo), else as a
    follower it would name epoch 2 as its last fetched one and be told it diverges, for ever."""
    log_ = open_log(tmp_path, clock, "t-0")
    log_.append_as_leader(make_batch([1, 2]), leader_epoch=1)
    log_.leader_epoch_cache.assign(2, log_.log_end_offset)
    assert not log_.truncate_to(log_.log_end_offset)
    assert log_.leader_epoch_cache.entries == [(1, 0)] and log_.log_end_offset == 2
