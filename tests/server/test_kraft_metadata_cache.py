"""server/kraft/metadata_cache.py: what a KRaft cluster's broker serves from the metadata log it
replayed (storage/cluster_metadata.py's MetadataReplay), as Kafka's KRaftMetadataCache answers."""

from __future__ import annotations

import uuid
from pathlib import Path

from samsa.server.kraft.metadata_cache import KraftMetadataCache
from samsa.storage.cluster_metadata import MetadataReplay
from samsa.wire.errors import ErrorCode
from samsa.wire.metadata_record import encode_metadata_record
from samsa.wire.metadata_records.config_record import ConfigRecord
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.register_broker_record import RegisterBrokerRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from samsa.wire.records import Record, build_batch

RECORDED = Path(__file__).parents[1] / "storage" / "data" / "kraft_broker_metadata" / "00000000000000000000.log"
T1 = uuid.UUID(int=7)


def batch(base_offset: int, *records) -> bytes:
    values = [encode_metadata_record(r, v) for r, v in records]
    return build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)], base_offset=base_offset,
                       base_timestamp=0)


def broker(node_id: int, port: int):
    return RegisterBrokerRecord(broker_id=node_id, broker_epoch=10 + node_id, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port, security_protocol=0)]), 3


def test_a_running_cluster():
    replay = MetadataReplay()
    replay.batches(batch(0, broker(2, 9092), broker(3, 9093), (UnfenceBrokerRecord(id=2, epoch=12), 0),
                         (TopicRecord(name="t1", topic_id=T1), 0),
                         (PartitionRecord(partition_id=0, topic_id=T1, replicas=[2, 3], isr=[2, 3], leader=2,
                                          leader_epoch=0, partition_epoch=0), 2),
                         (PartitionRecord(partition_id=1, topic_id=T1, replicas=[3, 2], isr=[3, 2], leader=3,
                                          leader_epoch=0, partition_epoch=0), 2)))
    cache = KraftMetadataCache(2, "cluster")
    cache.publish(replay.image, replay.image.end_offset - 1)
    # Broker 3 is registered but still fenced: not alive, and what it leads has no live leader.
    assert [b.node_id for b in cache.alive_nodes("PLAINTEXT")] == [2]
    assert cache.controller_id == 2
    p0, p1 = cache.partition_metadata("t1", "PLAINTEXT")
    assert (p0.error_code, p0.leader_id, p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == (
        ErrorCode.NONE, 2, [2, 3], [2, 3], [3])
    assert (p1.error_code, p1.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    assert cache.topics["t1"].topic_id == T1 and cache.topics["t1"].replication_factor == 2
    assert cache.partition_states["t1"][1].leader == 3
    assert cache.partition_metadata("other", "PLAINTEXT") is None


def test_the_recorded_log_after_a_controlled_shutdown():
    replay = MetadataReplay()
    replay.batches(RECORDED.read_bytes())
    cache = KraftMetadataCache(2, "cluster")
    cache.publish(replay.image, replay.image.end_offset - 1)
    assert cache.alive_nodes("PLAINTEXT") == [] and cache.controller_id is None
    assert [p.error_code for p in cache.partition_metadata("t1", "PLAINTEXT")] == [ErrorCode.LEADER_NOT_AVAILABLE] * 2
    assert cache.features["metadata.version"] == 33


def test_topic_configs_follow_the_log_as_it_is_replayed():
    """A KRaft broker reads the replay's image after each batch (no finish()): a topic's configs,
    those created with it (ConfigRecords before its TopicRecord) and those altered later, are in it."""
    replay = MetadataReplay()
    replay.batches(batch(0, (ConfigRecord(resource_type=2, resource_name="t1", name="retention.ms", value="1"), 0),
                         (TopicRecord(name="t1", topic_id=T1), 0)))
    cache = KraftMetadataCache(2, "cluster")
    cache.publish(replay.image, replay.image.end_offset - 1)
    assert cache.topics["t1"].configs == {"retention.ms": "1"}
    replay.batches(batch(2, (ConfigRecord(resource_type=2, resource_name="t1", name="cleanup.policy",
                                          value="compact"), 0),
                         (ConfigRecord(resource_type=2, resource_name="t1", name="retention.ms", value=None), 0)))
    cache.publish(replay.image, replay.image.end_offset - 1)
    assert cache.topics["t1"].configs == {"cleanup.policy": "compact"}


def test_eligible_leader_replicas_are_the_registrations():
    """DescribeTopicPartitions answers each partition's ELR and last known ELR (KIP-966) from the
    registration, as Kafka's KRaftMetadataCache.describeTopicResponse."""
    replay = MetadataReplay()
    replay.batches(batch(0, broker(2, 9092), (UnfenceBrokerRecord(id=2, epoch=12), 0),
                         (TopicRecord(name="t1", topic_id=T1), 0),
                         (PartitionRecord(partition_id=0, topic_id=T1, replicas=[2, 3, 4], isr=[2], leader=2,
                                          leader_epoch=1, partition_epoch=3, eligible_leader_replicas=[3],
                                          last_known_elr=[4]), 2),
                         (PartitionRecord(partition_id=1, topic_id=T1, replicas=[2, 3], isr=[2, 3], leader=2,
                                          leader_epoch=0, partition_epoch=0), 2)))
    cache = KraftMetadataCache(2, "cluster")
    cache.publish(replay.image, replay.image.end_offset - 1)
    p0, p1 = cache.partition_metadata("t1", "PLAINTEXT")
    assert (p0.eligible_leader_replicas, p0.last_known_elr) == ([3], [4])
    assert (p1.eligible_leader_replicas, p1.last_known_elr) == ([], [])
