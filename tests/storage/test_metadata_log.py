"""storage/metadata_log.py: a KRaft broker's metadata log on disk as Kafka lays it out, and
storage/metadata_snapshot.py: its snapshots as Kafka's broker writes them. Driven with the metadata
log Kafka 4.4's controller wrote (tests/storage/data/kraft_metadata_44, recorded by
compat-tests/record_kraft_metadata.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from samsa.storage.cluster_metadata import CLUSTER_METADATA_DIR, MetadataReplay, read_cluster_metadata
from samsa.storage.metadata_log import MetadataLog, MetadataLogConfig, QuorumState, SnapshotId
from samsa.storage.metadata_snapshot import SNAPSHOT_FOOTER, SNAPSHOT_HEADER, build_snapshot
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.records import decode_batch, iter_batch_headers

RECORDED = Path(__file__).parent / "data" / "kraft_metadata_44"
LOG = (RECORDED / "00000000000000000000.log").read_bytes()
KAFKA_SNAPSHOT = RECORDED / "00000000000000000024-0000000001.checkpoint"


def open_log(tmp_path, config: MetadataLogConfig | None = None) -> MetadataLog:
    return MetadataLog.in_log_dir(tmp_path, config or MetadataLogConfig(), lambda: 1_000_000)


def batches(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.next_offset) for _, h in iter_batch_headers(data)]


def test_appended_batches_are_read_back_after_a_reopen(tmp_path):
    metadata_log = open_log(tmp_path)
    assert metadata_log.end_offset == 0 and metadata_log.snapshots == []
    assert metadata_log.append_as_follower(LOG) == 47
    metadata_log.close()
    assert (tmp_path / CLUSTER_METADATA_DIR / "00000000000000000000.log").read_bytes() == LOG
    reopened = open_log(tmp_path)
    assert reopened.end_offset == 47 and reopened.last_fetched_epoch == 1
    assert reopened.read(0) == LOG
    assert batches(reopened.read(24)) == [b for b in batches(LOG) if b[1] > 24]
    # The single broker's reader replays it as Kafka left it.
    assert "orders" in read_cluster_metadata(tmp_path / CLUSTER_METADATA_DIR).topics
    # As Kafka's: partition.metadata names the metadata topic's id.
    assert (tmp_path / CLUSTER_METADATA_DIR / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ")


def test_a_torn_tail_is_cut_at_open(tmp_path):
    metadata_log = open_log(tmp_path)
    metadata_log.append_as_follower(LOG)
    metadata_log.close()
    segment = tmp_path / CLUSTER_METADATA_DIR / "00000000000000000000.log"
    segment.write_bytes(LOG[:-5])  # a crash in the middle of the last batch
    reopened = open_log(tmp_path)
    assert reopened.end_offset == batches(LOG)[-1][0]


def test_truncation_to_a_diverging_epoch(tmp_path):
    metadata_log = open_log(tmp_path)
    metadata_log.append_as_follower(LOG)
    ends = [end for _, end in batches(LOG)]
    # The leader's epoch 1 ends at a batch boundary before this log's end.
    assert metadata_log.truncate_to_end_offset(ends[5], 1) == ends[5]
    assert metadata_log.end_offset == ends[5] and metadata_log.read(0) == LOG[:len(metadata_log.read(0))]
    # An epoch this log never had: cut where the latest epoch below it ends (nothing here).
    assert metadata_log.truncate_to_end_offset(ends[7], 3) == ends[5]


def test_snapshots_written_whole_and_partial_ones_deleted_at_open(tmp_path):
    metadata_log = open_log(tmp_path)
    metadata_log.append_as_follower(LOG)
    data = KAFKA_SNAPSHOT.read_bytes()
    assert metadata_log.write_snapshot(SnapshotId(24, 1), data)
    assert not metadata_log.write_snapshot(SnapshotId(24, 1), data)  # already here
    directory = tmp_path / CLUSTER_METADATA_DIR
    (directory / "00000000000000000030-0000000001.checkpoint.part").write_bytes(b"half")
    metadata_log.close()
    reopened = open_log(tmp_path)
    assert reopened.snapshots == [SnapshotId(24, 1)] and reopened.read_snapshot(SnapshotId(24, 1)) == data
    assert sorted(p.name for p in directory.glob("*.checkpoint*")) == [KAFKA_SNAPSHOT.name]


def test_a_snapshot_past_the_log_end_truncates_the_log_fully(tmp_path):
    """A snapshot fetched from the leader, whose log starts past this one's end."""
    metadata_log = open_log(tmp_path)
    metadata_log.append_as_follower(LOG[:batches_end(LOG, 10)])
    metadata_log.write_snapshot(SnapshotId(24, 1), KAFKA_SNAPSHOT.read_bytes())
    assert metadata_log.truncate_to_latest_snapshot()
    assert (metadata_log.start_offset, metadata_log.end_offset) == (24, 24)
    assert metadata_log.last_fetched_epoch == 1  # the snapshot's, the log being empty
    metadata_log.close()
    reopened = open_log(tmp_path)
    assert (reopened.start_offset, reopened.end_offset, reopened.snapshots) == (24, 24, [SnapshotId(24, 1)])


def batches_end(data: bytes, offset: int) -> int:
    """The byte length of the batches ending at or before `offset`."""
    end = 0
    for pos, header in iter_batch_headers(data):
        if header.next_offset > offset:
            break
        end = pos + header.size
    return end


def test_cleaning_moves_the_log_start_to_a_newer_snapshot(tmp_path):
    metadata_log = open_log(tmp_path, MetadataLogConfig(segment_bytes=600, max_retention_bytes=1))
    for pos, header in iter_batch_headers(LOG):  # as fetched, batch by batch: rolled in several segments
        metadata_log.append_as_follower(LOG[pos:pos + header.size])
    assert len(metadata_log.log.segments) > 2
    metadata_log.write_snapshot(SnapshotId(0, 0), (RECORDED / "00000000000000000000-0000000000.checkpoint").read_bytes())
    metadata_log.write_snapshot(SnapshotId(24, 1), KAFKA_SNAPSHOT.read_bytes())
    assert metadata_log.maybe_clean()
    assert metadata_log.snapshots == [SnapshotId(24, 1)] and 0 < metadata_log.start_offset <= 24
    assert metadata_log.log.segments[0].base_offset <= 24
    assert not metadata_log.maybe_clean()  # the only snapshot is kept


def test_cleaning_by_age_reads_the_snapshots_last_contained_log_timestamp(tmp_path):
    bootstrap = (RECORDED / "00000000000000000000-0000000000.checkpoint").read_bytes()
    _, [header, *_] = decode_batch(bootstrap, 0)
    written_at = int.from_bytes(header.value[2:10], "big")  # SnapshotHeaderRecord's lastContainedLogTimestamp
    now = [written_at + 1000]
    metadata_log = MetadataLog.in_log_dir(tmp_path, MetadataLogConfig(max_retention_ms=1000), lambda: now[0])
    metadata_log.append_as_follower(LOG)
    metadata_log.write_snapshot(SnapshotId(0, 0), bootstrap)
    metadata_log.write_snapshot(SnapshotId(24, 1), KAFKA_SNAPSHOT.read_bytes())
    assert not metadata_log.maybe_clean()  # not older than metadata.max.retention.ms yet
    now[0] += 1
    assert metadata_log.maybe_clean() and metadata_log.snapshots == [SnapshotId(24, 1)]
    assert metadata_log.start_offset == 24


@pytest.mark.parametrize("voters, expected", [
    (None, {"leaderId": 1, "leaderEpoch": 5, "votedId": -1, "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
            "data_version": 1}),
    ([1, 2, 3], {"clusterId": "", "leaderId": 1, "leaderEpoch": 5, "votedId": -1, "appliedOffset": 0,
                 "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}], "data_version": 0})])
def test_quorum_state_as_kafkas_file_quorum_state_store_writes_it(tmp_path, voters, expected):
    metadata_log = open_log(tmp_path)
    assert metadata_log.read_quorum_state() == QuorumState()
    metadata_log.write_quorum_state(QuorumState(1, 5), static_voters=voters)
    assert json.loads((tmp_path / CLUSTER_METADATA_DIR / "quorum-state").read_text()) == expected
    assert open_log(tmp_path).read_quorum_state() == QuorumState(1, 5)


# --- snapshots of the image ------------------------------------------------------------------------

def replayed(data: bytes, start: int = 0) -> MetadataReplay:
    replay = MetadataReplay()
    replay.batches(data, start)
    return replay


def comparable(replay: MetadataReplay):
    image = replay.image
    return (image.topics, replay.topic_configs, image.broker_configs, image.client_quotas, image.scram_credentials,
            image.acls, image.next_producer_id, image.features, image.brokers, image.delegation_tokens)


def test_kafkas_snapshot_and_the_log_after_it_replay_as_the_whole_log():
    whole = replayed(LOG)
    from_snapshot = replayed(KAFKA_SNAPSHOT.read_bytes())
    from_snapshot.batches(LOG, 24)
    assert comparable(from_snapshot) == comparable(whole)


def test_a_snapshot_of_the_image_replays_into_the_same_image():
    whole = replayed(LOG)
    data = build_snapshot(whole, 1, 1234, 5678)
    assert comparable(replayed(data)) == comparable(whole)
    # As Kafka's: a header control batch first, a footer last, every batch of the snapshot's epoch,
    # offsets from 0 without a gap.
    headers = [h for _, h in iter_batch_headers(data)]
    assert headers[0].is_control and headers[-1].is_control and not any(h.is_control for h in headers[1:-1])
    assert {h.partition_leader_epoch for h in headers} == {1}
    assert [h.base_offset for h in headers] == [0] + [h.next_offset for h in headers[:-1]]
    _, [header] = decode_batch(data, 0)
    assert header.key == bytes([0, 0, 0, SNAPSHOT_HEADER]) and header.value == bytes.fromhex("0000" "00000000000004d2" "00")
    last = sum(h.size for h in headers[:-1])
    _, [footer] = decode_batch(data, last)
    assert footer.key == bytes([0, 0, 0, SNAPSHOT_FOOTER]) and footer.value == bytes.fromhex("000000")
    # Kafka's own snapshot has the same framing.
    kafka = KAFKA_SNAPSHOT.read_bytes()
    _, [kafka_header, *_] = decode_batch(kafka, 0)
    assert kafka_header.key == header.key and len(kafka_header.value) == len(header.value)


def test_a_snapshot_keeps_the_eligible_leader_replicas():
    """KIP-966's ELR and last known ELR, in PartitionRecord's tagged fields (version 2)."""
    import uuid

    from samsa.wire.metadata_record import encode_metadata_record
    from samsa.wire.metadata_records.partition_change_record import PartitionChangeRecord
    from samsa.wire.records import Record, build_batch

    topic_id = uuid.UUID(int=9)
    whole = replayed(LOG)
    values = [encode_metadata_record(r, v) for r, v in (
        (TopicRecord(name="elr", topic_id=topic_id), 0),
        (PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1, 2, 3], isr=[1], leader=1, leader_epoch=0,
                         partition_epoch=0), 2),
        (PartitionChangeRecord(partition_id=0, topic_id=topic_id, eligible_leader_replicas=[2],
                               last_known_elr=[3]), 2))]
    whole.batches(build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)], base_offset=47,
                              base_timestamp=0))
    partition = whole.image.topics["elr"].partitions[0]
    assert (partition.elr, partition.last_known_elr) == ((2,), (3,))
    assert comparable(replayed(build_snapshot(whole, 1, 0, 0))) == comparable(whole)
