"""A partition's future log in another log directory (AlterReplicaLogDirs): catching up with the
current log while it is appended to, the swap, a restart in the middle."""

import pytest
from storage_helpers import batches, make_batch, small_config

from samsa.storage.errors import KafkaStorageException, LogDirNotFoundException
from samsa.storage.future_log import catch_up, caught_up
from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager


def started(dirs, clock, config=None) -> LogManager:
    manager = LogManager(dirs, config or small_config(), clock)
    manager.startup()
    return manager


def append(log, count=1, epoch=0):
    for _ in range(count):
        log.append_as_leader(make_batch([1000, 1001]), leader_epoch=epoch)
    log.high_watermark = log.log_end_offset


def contents(log):
    return [(header.base_offset, bytes(data)) for header, data in batches(log)]


@pytest.fixture
def two_dirs(tmp_path):
    return [tmp_path / "a", tmp_path / "b"]


def test_the_future_log_catches_up_while_appends_go_on_then_takes_the_current_ones_place(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock, small_config(segment_bytes=400))
    current = manager.create_log("t", 0)
    assert current.dir.parent == a
    append(current, 5)
    future = manager.create_future_log("t", 0, b)
    assert future.dir.parent == b and future.dir.name.startswith("t-0.") and future.dir.name.endswith("-future")
    # One batch per step, an append between steps: the copy never overtakes, never misses one.
    rounds = 0
    while not caught_up(current, future):
        copied = catch_up(current, future, 1)
        assert copied > 0
        if rounds < 4:
            append(current)
        rounds += 1
    assert future.log_end_offset == current.log_end_offset == 18
    assert contents(future) == contents(current)
    assert len(future.segments) > 1  # rolled as the current log did, at its own segment size
    assert future.high_watermark == current.high_watermark
    old_end = current.log_end_offset
    new = manager.replace_current_with_future_log("t", 0)
    assert new is future and manager.get_log("t", 0) is future and manager.get_future_log("t", 0) is None
    assert new.dir == b / "t-0" and not (a / "t-0").exists()
    deleted = [p for p in a.iterdir() if p.name.endswith("-delete")]
    assert len(deleted) == 1 and deleted[0].name.startswith("t-0.")
    # The old log still serves a read that holds its files, until it is removed.
    assert current.read(0, 1 << 20).records.read_bytes()
    append(new)  # produce goes on, to the new log
    assert new.log_end_offset == old_end + 2
    manager.delete_due_files(clock.now + 60_000)
    assert not deleted[0].exists()
    manager.shutdown()
    restarted = started(two_dirs, clock)
    reopened = restarted.get_log("t", 0)
    assert reopened.dir == b / "t-0" and reopened.log_end_offset == old_end + 2
    restarted.shutdown()


def test_a_future_log_ahead_of_a_truncated_current_log_is_cut_back(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    current = manager.create_log("t", 0)
    append(current, 3, epoch=0)
    future = manager.create_future_log("t", 0, b)
    while catch_up(current, future, 1 << 20):
        pass
    assert future.log_end_offset == 6
    # The current replica (a follower) truncates and takes other records at a later epoch.
    current.truncate_to(2)
    append(current, 2, epoch=1)
    assert not caught_up(current, future)
    while catch_up(current, future, 1 << 20):
        pass
    assert caught_up(current, future)
    assert contents(future) == contents(current)
    assert [e.epoch for e in future.leader_epoch_cache.entries] == [0, 1]


def test_the_future_log_starts_over_at_a_log_start_offset_past_its_end(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    current = manager.create_log("t", 0)
    append(current, 3)
    future = manager.create_future_log("t", 0, b)
    current.delete_records(4)
    while catch_up(current, future, 1 << 20):
        pass
    assert (future.log_start_offset, future.log_end_offset) == (4, 6)
    assert caught_up(current, future)


def test_a_restart_loads_the_future_log_so_the_move_resumes(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    current = manager.create_log("t", 0)
    append(current, 4)
    future = manager.create_future_log("t", 0, b)
    catch_up(current, future, 1)
    future_dir = future.dir
    manager.shutdown()

    restarted = started(two_dirs, clock)
    resumed = restarted.get_future_log("t", 0)
    assert resumed is not None and resumed.dir == future_dir and resumed.log_end_offset == 2
    current = restarted.get_log("t", 0)
    assert current.dir.parent == a
    while catch_up(current, resumed, 1 << 20):
        pass
    restarted.replace_current_with_future_log("t", 0)
    assert restarted.get_log("t", 0).dir == b / "t-0"
    assert contents(restarted.get_log("t", 0)) == contents(current)
    restarted.shutdown()


def test_an_unclean_restart_recovers_the_future_log_too(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    current = manager.create_log("t", 0)
    append(current, 2)
    future = manager.create_future_log("t", 0, b)
    catch_up(current, future, 1 << 20)
    segment = future.active_segment.log.path
    manager.shutdown()
    # As after a crash: no clean-shutdown marker, and a torn batch at the end of the future log.
    for directory in two_dirs:
        (directory / CLEAN_SHUTDOWN_FILE).unlink()
    with open(segment, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x40torn")
    restarted = started(two_dirs, clock)
    resumed = restarted.get_future_log("t", 0)
    assert resumed.log_end_offset == 4
    assert contents(resumed) == contents(restarted.get_log("t", 0))


def test_deleting_the_partition_deletes_its_future_log(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    append(manager.create_log("t", 0), 1)
    future = manager.create_future_log("t", 0, b)
    manager.delete_log("t", 0)
    assert manager.get_future_log("t", 0) is None
    assert future.dir.name.endswith("-delete")
    manager.delete_due_files(clock.now + 60_000)
    assert not any(b.glob("t-0*"))


def test_a_future_log_is_not_made_in_the_current_logs_directory_nor_an_unknown_one(two_dirs, tmp_path, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    manager.create_log("t", 0)
    with pytest.raises(KafkaStorageException, match="current log directory"):
        manager.create_future_log("t", 0, a)
    with pytest.raises(LogDirNotFoundException, match="is not found in the config"):
        manager.is_log_dir_online(str(tmp_path / "c"))
    assert manager.is_log_dir_online(str(b))


def test_a_partition_not_created_yet_goes_to_its_preferred_directory(two_dirs, clock):
    a, b = two_dirs
    manager = started(two_dirs, clock)
    manager.create_log("other", 0)  # in a: b now has fewer logs, but the preference wins
    manager.maybe_update_preferred_log_dir("t", 0, a)
    assert manager.create_log("t", 0).dir.parent == a
    assert manager.create_log("t", 1).dir.parent == b  # the preference was used up


def test_checkpoints_name_the_future_log_in_its_directory(two_dirs, clock):
    from samsa.storage.checkpoints import OffsetCheckpointFile
    from samsa.storage.log_manager import RECOVERY_POINT_CHECKPOINT_FILE
    a, b = two_dirs
    manager = started(two_dirs, clock)
    current = manager.create_log("t", 0)
    append(current, 2)
    future = manager.create_future_log("t", 0, b)
    catch_up(current, future, 1 << 20)
    future.flush()
    manager.checkpoint()
    assert OffsetCheckpointFile(b / RECOVERY_POINT_CHECKPOINT_FILE).read() == {("t", 0): 4}
