from storage_helpers import make_batch, small_config

from samsa.storage.leader_epoch_cache import LeaderEpochFileCache
from samsa.storage.log import Log


def test_epochs_are_recorded_as_appends_carry_them(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", small_config(), clock_ms=clock)
    for epoch in (0, 0, 2, 2, 5):
        log.append_as_leader(make_batch([1, 2]), leader_epoch=epoch)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 4), (5, 8)]
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 4\n5 8\n"
    assert log.end_offset_for_epoch(5) == (5, 10)
    assert log.end_offset_for_epoch(2) == (2, 8)
    assert log.end_offset_for_epoch(3) == (2, 8)  # an epoch this log never saw ends where the next began
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert log.end_offset_for_epoch(9) == (-1, -1)


def test_truncation_and_start_offset_move_the_epochs(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", small_config(), clock_ms=clock)
    for epoch in (1, 3, 4):
        log.append_as_leader(make_batch([1, 2]), leader_epoch=epoch)
    log.high_watermark = log.log_end_offset
    log.truncate_to(4)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 2)]
    log.high_watermark = log.log_end_offset
    log.delete_records(3)
    assert log.leader_epoch_cache.entries == [(3, 3)]
    assert log.end_offset_for_epoch(1) == (1, 3)  # older than anything kept
    assert LeaderEpochFileCache(tmp_path / "t-0").entries == [(3, 3)]


def test_a_reopened_log_drops_epochs_past_its_end(tmp_path, clock):
    log = Log.open(tmp_path / "t-0", small_config(), clock_ms=clock)
    log.append_as_leader(make_batch([1, 2]), leader_epoch=1)
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n7 2\n")  # epoch 7 never made it
    assert Log.open(tmp_path / "t-0", small_config(), clock_ms=clock).leader_epoch_cache.entries == [(1, 0)]


def test_a_lower_start_for_the_same_epoch_replaces_later_entries(tmp_path):
    cache = LeaderEpochFileCache(tmp_path)
    cache.assign(1, 10)
    cache.assign(2, 20)
    cache.assign(2, 15)
    assert cache.entries == [(1, 10), (2, 15)]
    cache.assign(2, 30)  # not earlier: nothing to record
    cache.assign(-1, 40)
    assert cache.entries == [(1, 10), (2, 15)]
