import os
import shutil
import time
import uuid

import pytest
from storage_helpers import make_batch, small_config

from samsa.storage.checkpoints import OffsetCheckpointFile, PartitionMetadataFile, read_properties
from samsa.storage.errors import InconsistentTopicIdException, KafkaStorageException
from samsa.storage.log_config import LogConfig
from samsa.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_CHECKPOINT_FILE, RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE, LogManager,
)
from samsa.storage.log import segment_file_sizes
from samsa.storage.log_segment import LogSegment
from samsa.wire.errors import ErrorCode


def started(dirs, clock, config=None, **kwargs) -> LogManager:
    manager = LogManager(dirs, config or small_config(), clock)
    manager.startup(**kwargs)
    return manager


def fill(manager: LogManager, topic: str, partition: int, batches: int):
    log = manager.create_log(topic, partition)
    for _ in range(batches):
        log.append_as_leader(make_batch([1000, 1001]))
    log.high_watermark = log.log_end_offset
    return log


def test_logs_survive_a_clean_restart(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "orders", 0, 3)
    fill(manager, "orders", 1, 1).delete_records(1)
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    ends = {("orders", 0): 6, ("orders", 1): 2}
    assert OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read() == ends
    assert OffsetCheckpointFile(tmp_path / REPLICATION_OFFSET_CHECKPOINT_FILE).read() == ends
    # Only a start offset above the first segment's base is recorded, as Kafka does.
    assert OffsetCheckpointFile(tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE).read() == {("orders", 1): 1}

    manager = started([tmp_path], clock)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from here on is unclean
    first, second = manager.get_log("orders", 0), manager.get_log("orders", 1)
    assert (first.log_end_offset, first.high_watermark, first.recovery_point) == (6, 6, 6)
    assert (second.log_start_offset, second.log_end_offset) == (1, 2)
    assert manager.get_log("orders", 2) is None


def test_an_unclean_start_recovers_past_the_recovery_point(tmp_path, clock, monkeypatch):
    manager = started([tmp_path], clock, config=small_config(segment_bytes=200))
    fill(manager, "t", 0, 4)  # segments at 0 and 4: two 97-byte batches each
    manager.shutdown()
    OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).write({("t", 0): 5})
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    recovered = []
    original = LogSegment.recover

    def spy(self):
        recovered.append(self.base_offset)
        return original(self)
    monkeypatch.setattr(LogSegment, "recover", spy)
    manager = started([tmp_path], clock, config=small_config(segment_bytes=200))
    assert recovered == [4]
    assert manager.get_log("t", 0).recovery_point == 5


def test_a_damaged_checkpoint_means_recovery_not_failure(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "t", 0, 2)
    manager.shutdown()
    (tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).write_text("garbage")
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    manager = started([tmp_path], clock)
    assert manager.get_log("t", 0).log_end_offset == 4


def test_topic_configs_apply_on_startup(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "a", 0, 1)
    fill(manager, "b", 0, 1)
    manager.shutdown()
    special = LogConfig(retention_ms=5)
    manager = started([tmp_path], clock, topic_configs={"a": special})
    assert manager.get_log("a", 0).config is special
    assert manager.get_log("b", 0).config == small_config()


def test_new_logs_go_to_the_emptiest_directory(tmp_path, clock):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = started(dirs, clock)
    placed = [manager.create_log("t", p).dir.parent for p in range(4)]
    assert placed == [dirs[0], dirs[1], dirs[0], dirs[1]]
    assert manager.create_log("t", 0).dir.parent == dirs[0]  # get-or-create
    manager.shutdown()
    manager = started(dirs, clock)
    assert sorted(log.name for log in manager.logs()) == ["t-0", "t-1", "t-2", "t-3"]


def test_delete_log_renames_then_cleanup_removes(tmp_path, clock):
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=1000))
    fill(manager, "gone", 0, 1)
    fill(manager, "kept", 0, 1)
    manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    marked = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(marked) == 1 and marked[0].startswith("gone-0.")
    assert ("gone", 0) not in OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read()
    manager.cleanup(clock.now + 999)
    assert (tmp_path / marked[0]).exists()
    manager.cleanup(clock.now + 1000)
    assert not (tmp_path / marked[0]).exists()
    assert manager.create_log("gone", 0).log_end_offset == 0


def test_deleted_logs_are_removed_each_at_its_own_time(tmp_path, clock):
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=1000))
    assert manager.file_deletion_due_in(clock.now) is None
    for name in ("first", "second"):
        fill(manager, name, 0, 1)
    manager.delete_log("first", 0)
    clock.now += 400
    manager.delete_log("second", 0)
    assert manager.file_deletion_due_in(clock.now) == 600
    manager.delete_due_files(clock.now + 599)
    assert len([p for p in tmp_path.iterdir() if p.name.endswith("-delete")]) == 2
    manager.delete_due_files(clock.now + 600)
    assert [p.name.split(".")[0] for p in tmp_path.iterdir() if p.name.endswith("-delete")] == ["second-0"]
    assert manager.file_deletion_due_in(clock.now + 600) == 400
    manager.delete_due_files(clock.now + 1000)
    assert manager.file_deletion_due_in(clock.now + 1000) is None
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]


def test_a_deleted_log_waits_the_brokers_delay_as_it_is_then_not_its_topics(tmp_path, clock):
    """Kafka's deleteLogs reads file.delete.delay.ms from the broker's current default config."""
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=1000))
    manager.create_log("t", 0, small_config(file_delete_delay_ms=60_000))
    manager.delete_log("t", 0)
    assert manager.file_deletion_due_in(clock.now) == 1000
    manager.default_config = small_config(file_delete_delay_ms=200)  # log.segment.delete.delay.ms changed
    assert manager.file_deletion_due_in(clock.now) == 200
    manager.delete_due_files(clock.now + 200)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]


def test_a_deletion_that_fails_leaves_the_others_to_go(tmp_path, clock, monkeypatch, caplog):
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=0))
    broken = fill(manager, "broken", 0, 1)
    fill(manager, "fine", 0, 1)
    manager.delete_log("broken", 0)
    manager.delete_log("fine", 0)

    def fail() -> None:
        raise OSError("Input/output error")
    monkeypatch.setattr(broken, "delete", fail)
    manager.delete_due_files(clock.now)
    assert [p.name.split(".")[0] for p in tmp_path.iterdir() if p.name.endswith("-delete")] == ["broken-0"]
    assert "Exception while deleting" in caplog.text
    assert manager.file_deletion_due_in(clock.now) is None  # not retried, as in Kafka


def test_startup_finishes_deletions_and_skips_foreign_directories(tmp_path, clock):
    (tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "moving-0.0123456789abcdef0123456789abcdef-future").mkdir()
    (tmp_path / "lost+found").mkdir()
    manager = started([tmp_path], clock)
    assert manager.logs() == []
    assert not (tmp_path / "old-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert (tmp_path / "lost+found").exists()


def test_cleanup_applies_retention_everywhere(tmp_path, clock):
    config = small_config(segment_bytes=len(make_batch([1, 2])), retention_ms=1000, file_delete_delay_ms=0)
    manager = started([tmp_path], clock, config=config)
    for partition in range(3):
        fill(manager, "t", partition, 3)  # timestamps far in the past
    assert manager.cleanup(clock.now) == 9
    for log in manager.logs():
        assert (log.log_start_offset, [s.size for s in log.segments]) == (6, [0])
        assert not [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]


def test_segments_renamed_deleted_are_due_at_their_own_time(tmp_path, clock):
    """Kafka's delete-file task: the `.deleted` files go file.delete.delay.ms after the rename,
    whenever that falls, not at the retention check after it."""
    config = small_config(segment_bytes=len(make_batch([1, 2])), retention_ms=1000, file_delete_delay_ms=500)
    manager = started([tmp_path], clock, config=config)
    log = fill(manager, "t", 0, 3)
    assert manager.file_deletion_due_in(clock.now) is None
    assert manager.cleanup(clock.now) == 3
    deleted = [p for p in log.dir.iterdir() if p.name.endswith(".deleted")]
    assert len(deleted) >= 3 and manager.file_deletion_due_in(clock.now) == 500
    manager.delete_due_files(clock.now + 499)
    assert all(p.exists() for p in deleted)
    manager.delete_due_files(clock.now + 500)
    assert not any(p.exists() for p in deleted)
    assert manager.file_deletion_due_in(clock.now + 500) is None


def test_flush_dirty_flushes_rolled_and_due_logs(tmp_path, clock):
    manager = started([tmp_path], clock, config=small_config(segment_bytes=200))
    rolled = fill(manager, "t", 0, 3)
    idle = fill(manager, "t", 1, 1)
    manager.flush_dirty(clock.now)
    assert rolled.recovery_point == 6
    assert idle.recovery_point == 0  # flush.ms defaults to Long.MAX: no time-based flush
    idle.update_config(small_config(flush_ms=10))
    manager.flush_dirty(clock.now + 10)
    assert idle.recovery_point == 2


def test_meta_properties(tmp_path, clock):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, small_config(), clock)
    cluster_id = manager.ensure_meta_properties(1, lambda: "fresh-cluster-id")
    assert cluster_id == "fresh-cluster-id"
    props = read_properties(dirs[0] / "meta.properties")
    assert {k: props[k] for k in ("version", "node.id", "cluster.id")} == {
        "version": "1", "node.id": "1", "cluster.id": "fresh-cluster-id"}
    assert read_properties(dirs[1] / "meta.properties")["directory.id"] != props["directory.id"]
    assert manager.ensure_meta_properties(1, lambda: "another") == "fresh-cluster-id"
    with pytest.raises(KafkaStorageException, match="node id"):
        manager.ensure_meta_properties(2, lambda: "another")
    (dirs[1] / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=other\n")
    with pytest.raises(KafkaStorageException, match="cluster"):
        manager.ensure_meta_properties(1, lambda: "another")


def test_a_directory_is_used_by_one_broker_at_a_time(tmp_path, clock):
    first = started([tmp_path], clock)
    with pytest.raises(KafkaStorageException, match="lock"):
        started([tmp_path], clock)
    first.shutdown()
    started([tmp_path], clock).shutdown()


def test_a_thousand_partitions_load_quickly(tmp_path, clock):
    manager = started([tmp_path], clock)
    for partition in range(1000):
        manager.create_log("many", partition)
    manager.shutdown()
    begin = time.perf_counter()
    manager = started([tmp_path], clock)
    elapsed = time.perf_counter() - begin
    assert len(manager.logs()) == 1000
    print(f"loaded 1000 empty partitions in {elapsed:.3f}s")
    manager.shutdown()


def test_no_clean_shutdown_marker_where_a_log_went_offline(tmp_path, clock, monkeypatch):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = started(dirs, clock)
    broken = fill(manager, "t", 0, 1)
    fill(manager, "t", 1, 1)
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "Input/output error")))
    with pytest.raises(KafkaStorageException):
        broken.flush()
    monkeypatch.undo()
    manager.shutdown()
    assert not (broken.dir.parent / CLEAN_SHUTDOWN_FILE).exists()
    assert [d for d in dirs if (d / CLEAN_SHUTDOWN_FILE).exists()] == [d for d in dirs if d != broken.dir.parent]


def test_a_clean_restart_opens_each_log_on_first_use(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "t", 0, 3)
    fill(manager, "t", 1, 2).delete_records(1)
    manager.create_log("t", 2)
    manager.shutdown()
    names = (RECOVERY_POINT_CHECKPOINT_FILE, LOG_START_OFFSET_CHECKPOINT_FILE, REPLICATION_OFFSET_CHECKPOINT_FILE)
    checkpoints = {name: OffsetCheckpointFile(tmp_path / name).read() for name in names}
    assert checkpoints[LOG_START_OFFSET_CHECKPOINT_FILE] == {("t", 1): 1}

    manager = started([tmp_path], clock)
    assert manager.opened_logs() == []
    assert [manager.has_log("t", p) for p in range(4)] == [True, True, True, False]
    manager.checkpoint()  # what the checkpoints said of the logs not opened, they still say
    assert {name: OffsetCheckpointFile(tmp_path / name).read() for name in names} == checkpoints

    second = manager.get_log("t", 1)
    assert manager.opened_logs() == [second]
    assert (second.log_start_offset, second.log_end_offset, second.high_watermark, second.recovery_point) == (1, 4, 4, 4)
    assert manager.get_log("t", 1) is second and manager.create_log("t", 1) is second
    manager.checkpoint()
    assert {name: OffsetCheckpointFile(tmp_path / name).read() for name in names} == checkpoints
    assert sorted(log.name for log in manager.logs()) == ["t-0", "t-1", "t-2"]
    assert manager.get_log("t", 0).log_end_offset == 6
    manager.shutdown()


def test_log_summaries_describe_the_logs_not_opened_as_they_would_be_opened(tmp_path, clock, monkeypatch):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = started(dirs, clock, config=small_config(segment_bytes=200))
    fill(manager, "t", 0, 4)  # four 97-byte batches of two records: segments at 0 and 4
    fill(manager, "t", 1, 2).delete_records(3)
    manager.create_log("t", 2)
    opened_figures = manager.log_summaries()
    manager.shutdown()

    manager = started(dirs, clock, config=small_config(segment_bytes=200))
    stats = []
    monkeypatch.setattr("samsa.storage.log_manager.segment_file_sizes",
                        lambda directory: stats.append(directory.name) or segment_file_sizes(directory))
    assert manager.log_summaries() == opened_figures
    assert [(s.partition, s.num_segments, s.log_start_offset, s.log_end_offset) for s in opened_figures] == [
        (0, 2, 0, 8), (1, 1, 3, 4), (2, 1, 0, 0)]
    assert opened_figures[0].size == 4 * 97 and opened_figures[2].size == 0
    assert manager.opened_logs() == []
    assert manager.log_summaries() == opened_figures and sorted(stats) == ["t-0", "t-1", "t-2"]  # stat once

    opened = manager.get_log("t", 0)
    manager.delete_log("t", 2)
    assert manager.log_summaries() == opened_figures[:2]
    # Each log went to the directory holding the fewest: t-1 to b. Kafka drops an offline log's metrics.
    assert opened.dir.parent == dirs[0] and (dirs[1] / "t-1").is_dir()
    manager.failure_channel.maybe_add_offline_log_dir(dirs[1], "test", OSError("test"))
    assert manager.log_summaries() == opened_figures[:1]
    manager.failure_channel.maybe_add_offline_log_dir(dirs[0], "test", OSError("test"))
    assert manager.log_summaries() == []
    manager.shutdown()


def test_an_unclean_start_loads_every_log_at_once(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "t", 0, 1)
    manager.shutdown()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    manager = started([tmp_path], clock)
    assert [log.name for log in manager.opened_logs()] == ["t-0"]
    manager.shutdown()


def test_a_crash_after_a_clean_start_recovers_from_the_checkpointed_recovery_points(tmp_path, clock, monkeypatch):
    config = small_config(segment_bytes=200)
    manager = started([tmp_path], clock, config=config)
    fill(manager, "idle", 0, 4)  # segments at 0 and 4, recovery point 8 at shutdown
    fill(manager, "busy", 0, 1)
    manager.shutdown()
    manager = started([tmp_path], clock, config=config)
    busy = manager.get_log("busy", 0)
    busy.append_as_leader(make_batch([1000, 1001]))
    busy.flush()
    manager.checkpoint()
    manager.shutdown()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as if the broker had died after that checkpoint
    recovered = []
    original = LogSegment.recover

    def spy(self):
        recovered.append((self.log.path.parent.name, self.base_offset))
        return original(self)
    monkeypatch.setattr(LogSegment, "recover", spy)
    manager = started([tmp_path], clock, config=config)
    assert sorted(recovered) == [("busy-0", 0), ("idle-0", 4)]
    assert manager.get_log("idle", 0).log_end_offset == 8
    assert manager.get_log("busy", 0).log_end_offset == 4


def test_a_log_not_yet_opened_takes_config_changes_and_can_be_deleted(tmp_path, clock):
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=0))
    fill(manager, "t", 0, 1)
    fill(manager, "t", 1, 1)
    manager.shutdown()
    manager = started([tmp_path], clock, config=small_config(file_delete_delay_ms=0))
    special = small_config(retention_ms=5)
    manager.update_config("t", 0, special)
    assert manager.opened_logs() == []
    assert manager.get_log("t", 0).config is special

    assert manager.delete_log("t", 1) is None  # deleted without being opened
    assert not manager.has_log("t", 1) and manager.get_log("t", 1) is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("t-1")][0].endswith("-delete")
    manager.checkpoint()
    assert ("t", 1) not in OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read()
    manager.cleanup(clock.now)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("t-1")]
    assert manager.create_log("t", 1).log_end_offset == 0
    manager.shutdown()


def test_a_log_that_cannot_be_opened_holds_up_no_other(tmp_path, clock):
    manager = started([tmp_path], clock)
    fill(manager, "t", 0, 1)
    fill(manager, "t", 1, 1)
    manager.shutdown()
    manager = started([tmp_path], clock)
    shutil.rmtree(tmp_path / "t-0")
    (tmp_path / "t-0").write_bytes(b"not a directory")
    assert [log.name for log in manager.logs()] == ["t-1"]
    assert manager.cleanup(clock.now) == 0
    with pytest.raises(KafkaStorageException):
        manager.get_log("t", 0)
    assert manager.has_log("t", 0)  # tried again on its next use
    manager.shutdown()


# -- partition.metadata: the topic id of a partition directory, as Kafka writes it -----------------

TOPIC_ID, OTHER_TOPIC_ID = uuid.UUID(int=0xD74AB645FE6445EAB1E27AFD3481A8E7), uuid.uuid4()


def test_a_new_log_names_its_topic_id_as_kafka_does(tmp_path, clock):
    manager = started([tmp_path], clock)
    created = manager.create_log("orders", 0, topic_id=TOPIC_ID)
    assert (created.dir / "partition.metadata").read_text() == "version: 0\ntopic_id: 10q2Rf5kReqx4nr9NIGo5w"
    assert PartitionMetadataFile(created.dir).read() == TOPIC_ID
    assert manager.create_log("orders", 0, topic_id=TOPIC_ID) is created


@pytest.mark.parametrize("clean", [True, False])
def test_a_log_of_another_topic_id_is_refused(tmp_path, clock, clean):
    manager = started([tmp_path], clock)
    fill(manager, "orders", 0, 1)
    fill(manager, "orders", 1, 1)
    manager.shutdown()
    PartitionMetadataFile(tmp_path / "orders-0").write(OTHER_TOPIC_ID)  # a deleted namesake's log
    if not clean:
        (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    manager = started([tmp_path], clock, topic_ids={"orders": TOPIC_ID})
    with pytest.raises(InconsistentTopicIdException) as e:
        manager.get_log("orders", 0)
    assert e.value.error_code == ErrorCode.INCONSISTENT_TOPIC_ID
    assert manager.get_log("orders", 1).log_end_offset == 2  # without the file: it gets one
    assert PartitionMetadataFile(tmp_path / "orders-1").read() == TOPIC_ID
    assert PartitionMetadataFile(tmp_path / "orders-0").read() == OTHER_TOPIC_ID  # left as it was


def test_kraft_metadata_log_is_no_partition(tmp_path, clock):
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "__cluster_metadata-0" / f"{0:020d}.log").write_bytes(b"")
    manager = started([tmp_path], clock)
    assert not manager.has_log("__cluster_metadata", 0)
    manager.shutdown()
    assert not OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE).read()


# -- a failed log directory (Kafka's LogDirFailureChannel and LogManager.handleLogDirFailure) ------

def full_disk_in(monkeypatch, directory):
    """Every write to a file under `directory` fails with ENOSPC from now on."""
    real_pwrite = os.pwrite

    def pwrite(fd, data, offset):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(directory)):
            raise OSError(28, "No space left on device")
        return real_pwrite(fd, data, offset)
    monkeypatch.setattr(os, "pwrite", pwrite)


def test_an_io_error_takes_its_whole_log_dir_offline_until_a_restart(tmp_path, clock, monkeypatch, caplog):
    failing, other = tmp_path / "a", tmp_path / "b"
    halted = []
    manager = LogManager([failing, other], small_config(), clock, on_all_log_dirs_failed=lambda: halted.append(1))
    manager.startup()
    first, elsewhere, neighbour = fill(manager, "t", 0, 2), fill(manager, "t", 1, 2), fill(manager, "u", 0, 1)
    assert (first.dir.parent, elsewhere.dir.parent, neighbour.dir.parent) == (failing, other, failing)
    full_disk_in(monkeypatch, failing)
    with pytest.raises(KafkaStorageException) as refused:
        first.append_as_leader(make_batch([1002]))
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(KafkaStorageException):  # the neighbour went offline with its directory
        neighbour.read(0, 1 << 20)
    assert manager.is_log_offline("u", 0) and not manager.is_log_offline("t", 1)
    assert manager.live_log_dirs == [other] and manager.failure_channel.offline_log_dirs == {failing}
    assert elsewhere.append_as_leader(make_batch([1002])).first_offset == 4
    assert manager.create_log("v", 0).dir.parent == other  # new logs only where the disk works
    manager.checkpoint()  # the failed directory's checkpoints are not written
    with pytest.raises(KafkaStorageException):
        first.append_as_leader(make_batch([1003]))  # no I/O tried: logged once
    assert [r.levelname for r in caplog.records if "No space left" in r.getMessage()] == ["ERROR"]
    assert halted == []
    manager.shutdown()
    assert not (failing / CLEAN_SHUTDOWN_FILE).exists() and (other / CLEAN_SHUTDOWN_FILE).exists()

    monkeypatch.undo()  # space back, a restart: recovered, online again
    manager = started([failing, other], clock)
    assert manager.get_log("t", 0).log_end_offset == 4
    assert manager.get_log("t", 0).append_as_leader(make_batch([1004])).first_offset == 4
    manager.shutdown()


def test_the_last_log_dir_failing_is_reported_to_the_broker(tmp_path, clock, monkeypatch):
    halted = []
    manager = LogManager([tmp_path], small_config(), clock, on_all_log_dirs_failed=lambda: halted.append(1))
    manager.startup()
    log = fill(manager, "t", 0, 1)
    full_disk_in(monkeypatch, tmp_path)
    with pytest.raises(KafkaStorageException):
        log.append_as_leader(make_batch([1002]))
    assert halted == [1]
    with pytest.raises(KafkaStorageException, match="all log directories are offline"):
        manager.create_log("t", 1)
