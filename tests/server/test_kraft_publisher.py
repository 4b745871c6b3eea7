"""server/kraft/publisher.py: what a committed batch of the metadata log changes on a KRaft broker
beyond its cache. Here: the group coordinators hear of topics created, grown or deleted anywhere in
the cluster (Kafka's GroupCoordinator onNewMetadataImage), hosted here or not; a consumer-protocol
group whose coordinator loaded before its topic existed otherwise assigns nothing for ever."""

from __future__ import annotations

import uuid

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.features import BrokerFeatures
from samsa.server.kraft.metadata_cache import KraftMetadataCache
from samsa.server.kraft.publisher import BrokerMetadataPublisher
from samsa.server.metadata.image import MetadataImage
from samsa.server.replication.replica_manager import ReplicaManager
from samsa.server.throttle import BrokerQuotas
from samsa.storage.cluster_metadata import MetadataReplay
from samsa.storage.log_config import LogConfig
from samsa.storage.log_manager import LogManager
from samsa.wire.metadata_record import encode_metadata_record
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.register_broker_record import RegisterBrokerRecord
from samsa.wire.metadata_records.remove_topic_record import RemoveTopicRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from samsa.wire.records import Record, build_batch

T1, T2 = uuid.UUID(int=7), uuid.UUID(int=8)


def batch(base_offset: int, *records) -> bytes:
    values = [encode_metadata_record(r, v) for r, v in records]
    return build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)], base_offset=base_offset,
                       base_timestamp=0)


def partition(topic_id: uuid.UUID, index: int):
    """A partition of broker 3 alone: nothing of it is hosted on broker 2."""
    return PartitionRecord(partition_id=index, topic_id=topic_id, replicas=[3], isr=[3], leader=3, leader_epoch=0,
                           partition_epoch=0), 2


def test_topics_changed_anywhere_reach_the_group_coordinators(tmp_path):
    config = KafkaConfig({"process.roles": "broker", "node.id": "2", "controller.listener.names": "CONTROLLER",
                          "controller.quorum.bootstrap.servers": "127.0.0.1:9093", "log.dirs": str(tmp_path)})
    logs = LogManager([tmp_path], LogConfig(), lambda: 0)
    logs.startup()
    replicas = ReplicaManager(logs, MetadataImage(tmp_path / "metadata.json", "cluster"), config)
    changes: list[int] = []
    replicas.on_topics_changed = lambda: changes.append(len(changes))
    cache = KraftMetadataCache(2, "cluster")
    publisher = BrokerMetadataPublisher(2, cache, replicas, BrokerFeatures.kraft_mode(), None,
                                        BrokerQuotas(config, cache.client_quotas), "PLAINTEXT", lambda offset: None)
    replay = MetadataReplay()

    def publish(*records) -> int:
        replay.batches(batch(replay.image.end_offset, *records))
        publisher.publish(replay, replay.image.end_offset - 1)
        return len(changes)

    broker = RegisterBrokerRecord(broker_id=3, broker_epoch=13, end_points=[RegisterBrokerRecord.BrokerEndpoint(
        name="PLAINTEXT", host="127.0.0.1", port=9093, security_protocol=0)])
    assert publish((broker, 3)) == 0
    assert publish((TopicRecord(name="t1", topic_id=T1), 0), partition(T1, 0)) == 1  # created
    assert publish((UnfenceBrokerRecord(id=3, epoch=13), 0)) == 1  # no topic changed
    assert publish(partition(T1, 1)) == 2  # grown
    assert publish((TopicRecord(name="t2", topic_id=T2), 0), partition(T2, 0)) == 3
    assert publish((RemoveTopicRecord(topic_id=T1), 0)) == 4  # deleted
    assert sorted(cache.topics) == ["t2"] and replicas.partitions == {}
