"""storage/cluster_metadata.py replays a `__cluster_metadata-0` directory as Kafka writes it: the
newest snapshot, then the log's records past it. The directories are built here with the generated
metadata record codecs, as Kafka's controller writes them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from samsa.storage.cluster_metadata import (
    CLUSTER_METADATA_DIR, ClusterMetadataError, KraftAcl, MetadataReplay, find_cluster_metadata, read_cluster_metadata,
)
from samsa.wire.codec import Message
from samsa.wire.metadata_record import MetadataRecordError, encode_metadata_record
from samsa.wire.metadata_records.abort_transaction_record import AbortTransactionRecord
from samsa.wire.metadata_records.access_control_entry_record import AccessControlEntryRecord
from samsa.wire.metadata_records.begin_transaction_record import BeginTransactionRecord
from samsa.wire.metadata_records.broker_registration_change_record import BrokerRegistrationChangeRecord
from samsa.wire.metadata_records.clear_elr_record import ClearElrRecord
from samsa.wire.metadata_records.client_quota_record import ClientQuotaRecord, EntityData
from samsa.wire.metadata_records.config_record import ConfigRecord
from samsa.wire.metadata_records.end_transaction_record import EndTransactionRecord
from samsa.wire.metadata_records.feature_level_record import FeatureLevelRecord
from samsa.wire.metadata_records.partition_change_record import PartitionChangeRecord
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.producer_ids_record import ProducerIdsRecord
from samsa.wire.metadata_records.register_broker_record import RegisterBrokerRecord
from samsa.wire.metadata_records.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from samsa.wire.metadata_records.remove_topic_record import RemoveTopicRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from samsa.wire.metadata_records.unregister_broker_record import UnregisterBrokerRecord
from samsa.wire.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from samsa.wire.metadata_records.delegation_token_record import DelegationTokenRecord
from samsa.wire.metadata_records.remove_delegation_token_record import RemoveDelegationTokenRecord
from samsa.wire.records import Record, build_batch

ORDERS, GONE = uuid.UUID(int=1), uuid.UUID(int=2)
ACL_ID = uuid.UUID(int=3)
# A snapshot's header and footer: control records (type 3 and 4) of a control batch.
SNAPSHOT_HEADER = Record(0, 0, b"\x00\x00\x00\x03", b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", [])


def batch(base_offset: int, *records: Message | tuple[Message, int]) -> bytes:
    values = [encode_metadata_record(*(r if isinstance(r, tuple) else (r, 0))) for r in records]
    return build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)], base_offset=base_offset,
                       base_timestamp=0)


def control_batch(base_offset: int) -> bytes:
    return build_batch([SNAPSHOT_HEADER], base_offset=base_offset, is_control=True, base_timestamp=0)


def topic(name: str, topic_id: uuid.UUID, partitions: int) -> list[Message]:
    return [TopicRecord(name=name, topic_id=topic_id),
            *[(PartitionRecord(partition_id=p, topic_id=topic_id, replicas=[1], isr=[1], leader=1), 2)
              for p in range(partitions)]]


@pytest.fixture
def log_dir(tmp_path) -> Path:
    (tmp_path / CLUSTER_METADATA_DIR).mkdir()
    return tmp_path


def write(log_dir: Path, name: str, *batches: bytes) -> None:
    (log_dir / CLUSTER_METADATA_DIR / name).write_bytes(b"".join(batches))


def test_replays_the_log_into_topics_configs_and_the_producer_id_block(log_dir):
    write(log_dir, f"{0:020d}.log",
          control_batch(0),
          batch(1, FeatureLevelRecord(name="metadata.version", feature_level=27),
                RegisterBrokerRecord(broker_id=1)),
          batch(3, *topic("orders", ORDERS, 3)),
          batch(7, ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
                ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy", value="compact"),
                ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value="5"),
                ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value="2")),
          batch(11, ProducerIdsRecord(broker_id=1, next_producer_id=1000),
                ProducerIdsRecord(broker_id=1, next_producer_id=2000),
                ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=None),
                (PartitionChangeRecord(partition_id=2, topic_id=ORDERS, replicas=[1, 2]), 0)),
          batch(15, *topic("gone", GONE, 1), ConfigRecord(resource_type=2, resource_name="gone", name="a", value="b"),
                RemoveTopicRecord(topic_id=GONE)))
    image = read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)
    assert list(image.topics) == ["orders"]
    orders = image.topics["orders"]
    assert orders.topic_id == ORDERS
    assert orders.replicas == {0: [1], 1: [1], 2: [1, 2]}
    assert orders.configs == {"cleanup.policy": "compact"}
    assert image.broker_configs == {"": {"log.retention.ms": "5"}, "1": {"log.cleaner.threads": "2"}}
    assert image.next_producer_id == 2000
    assert image.features == {"metadata.version": 27}
    assert (image.snapshot, image.end_offset) == (None, 19)


def test_quotas_scram_credentials_and_acls(log_dir):
    user_default = [EntityData(entity_type="user", entity_name=None)]
    alice_client = [EntityData(entity_type="user", entity_name="alice"),
                    EntityData(entity_type="client-id", entity_name="app")]
    acl = AccessControlEntryRecord(id=ACL_ID, resource_type=2, resource_name="orders", pattern_type=3,
                                   principal="User:alice", host="*", operation=3, permission_type=3)
    write(log_dir, f"{0:020d}.log", batch(
        0, ClientQuotaRecord(entity=user_default, key="producer_byte_rate", value=1024.0),
        ClientQuotaRecord(entity=alice_client, key="consumer_byte_rate", value=10.0),
        ClientQuotaRecord(entity=alice_client, key="consumer_byte_rate", remove=True),
        UserScramCredentialRecord(name="alice", mechanism=2, salt=b"s", stored_key=b"k", server_key=b"v",
                                  iterations=8192),
        acl, AccessControlEntryRecord(id=uuid.UUID(int=4), resource_name="x", principal="User:bob"),
        RemoveAccessControlEntryRecord(id=uuid.UUID(int=4))))
    image = read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)
    assert image.client_quotas == {(("user", None),): {"producer_byte_rate": 1024.0}}
    assert image.scram_credentials == {"alice": {2: (b"s", b"k", b"v", 8192)}}
    assert image.acls == {ACL_ID: KraftAcl(2, "orders", 3, "User:alice", "*", 3, 3)}


def test_delegation_tokens(log_dir):
    def token(token_id, expiry):
        return DelegationTokenRecord(owner="User:alice", requester="User:bob", renewers=["User:carol"],
                                     issue_timestamp=1, max_timestamp=3, expiration_timestamp=expiry,
                                     token_id=token_id)
    write(log_dir, f"{0:020d}.log", batch(0, token("kept", 2), token("gone", 2), token("kept", 3),
                                          RemoveDelegationTokenRecord(token_id="gone")))
    image = read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)
    assert image.delegation_tokens == {"kept": {
        "token_id": "kept", "owner": "User:alice", "requester": "User:bob", "renewers": ["User:carol"],
        "issue_timestamp": 1, "max_timestamp": 3, "expiry_timestamp": 3}}


def test_the_newest_snapshot_then_the_log_past_it(log_dir):
    write(log_dir, f"{0:020d}-{0:010d}.checkpoint", control_batch(0))
    write(log_dir, f"{4:020d}-{1:010d}.checkpoint", control_batch(0), batch(0, *topic("orders", ORDERS, 1)),
          batch(2, ProducerIdsRecord(next_producer_id=1000)))
    # The log still holds what the snapshot covers (offsets 0-3): not replayed again.
    write(log_dir, f"{0:020d}.log", batch(0, *topic("old", GONE, 1)), batch(2, ProducerIdsRecord(next_producer_id=5)),
          batch(3, RemoveTopicRecord(topic_id=GONE), ProducerIdsRecord(next_producer_id=3000)))
    image = read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)
    assert list(image.topics) == ["orders"]
    assert image.next_producer_id == 3000
    assert (image.snapshot, image.end_offset) == (f"{4:020d}-{1:010d}.checkpoint", 5)


def test_a_metadata_transaction_applies_at_its_end_and_not_if_aborted(log_dir):
    write(log_dir, f"{0:020d}.log",
          batch(0, BeginTransactionRecord(name="create"), *topic("orders", ORDERS, 2), EndTransactionRecord()),
          batch(5, BeginTransactionRecord(name="create"), *topic("gone", GONE, 1), AbortTransactionRecord()))
    assert list(read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR).topics) == ["orders"]


def test_a_log_that_ends_inside_a_transaction_is_refused(log_dir):
    write(log_dir, f"{0:020d}.log", batch(0, BeginTransactionRecord(), *topic("orders", ORDERS, 1)))
    with pytest.raises(ClusterMetadataError, match="kafka-server-stop"):
        read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)


def test_an_unknown_record_version_says_what_to_run(log_dir):
    value = encode_metadata_record(TopicRecord(name="t", topic_id=ORDERS), 0)
    newer = value[:2] + b"\x09" + value[3:]  # TopicRecord v9
    write(log_dir, f"{0:020d}.log", build_batch([Record(0, 0, None, newer, [])], base_timestamp=0))
    with pytest.raises(ClusterMetadataError, match="gen_messages.py --metadata-records") as e:
        read_cluster_metadata(log_dir / CLUSTER_METADATA_DIR)
    assert "TopicRecord version 9" in str(e.value)


def test_finds_the_metadata_log_in_any_log_dir(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    (second / CLUSTER_METADATA_DIR).mkdir(parents=True)
    assert find_cluster_metadata([first, second]) == second / CLUSTER_METADATA_DIR
    assert find_cluster_metadata([first]) is None


# --- the replay a KRaft cluster's broker runs on what it fetches (server/kraft/) ---------------------

# Recorded from Kafka 4.4: one controller (node 1) and a Samsa broker (node 2) registered, unfenced,
# topic t1 (2 partitions, replicas [2]) created, then the broker's controlled shutdown.
RECORDED = Path(__file__).parent / "data" / "kraft_broker_metadata" / "00000000000000000000.log"


def test_replays_a_recorded_kafka_log_into_brokers_and_partition_registrations():
    replay = MetadataReplay()
    replay.batches(RECORDED.read_bytes())
    image = replay.image
    assert image.features["metadata.version"] == 33
    broker = image.brokers[2]
    assert broker.endpoints == {"PLAINTEXT": ("127.0.0.1", 19192, 0)} and broker.epoch == 50
    assert broker.fenced and broker.in_controlled_shutdown  # fenced again at its controlled shutdown
    t1 = image.topics["t1"]
    # Created with leader 2 at epoch 0; the controlled shutdown left them without a leader (epoch 1).
    assert sorted(t1.partitions) == [0, 1]
    assert all(p.replicas == (2,) and p.isr == (2,) and p.leader == -1 and p.leader_epoch == 1
               and p.partition_epoch == 1 for p in t1.partitions.values())


def test_partition_changes_merge_as_kafkas_partition_registration():
    replay = MetadataReplay()
    replay.batches(batch(0, TopicRecord(name="orders", topic_id=ORDERS),
                         (PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                                          leader_epoch=4, partition_epoch=7), 2)))
    # The ISR shrinks (leader unchanged: -2), then the leader moves (its epoch bumps).
    replay.batches(batch(2, PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=[1, 2]),
                         PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2)))
    partition = replay.image.topics["orders"].partitions[0]
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (2, 5, 9)
    assert partition.isr == (1, 2) and partition.replicas == (1, 2, 3)
    assert replay.image.end_offset == 4


def test_eligible_leader_replicas_merge_and_a_clear_elr_record_empties_them():
    """KIP-966 (eligible.leader.replicas.version 1): PartitionRecord and PartitionChangeRecord (v2)
    carry the ELR and last known ELR, merged as Kafka's PartitionRegistration.merge (null:
    unchanged); ClearElrRecord empties them for one topic or, with no name, every topic, and each
    partition it changes moves its partition epoch as Kafka's TopicDelta.maybeClearElr does."""
    other = uuid.UUID(int=99)
    replay = MetadataReplay()
    replay.batches(batch(0, TopicRecord(name="orders", topic_id=ORDERS), TopicRecord(name="other", topic_id=other),
                         (PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=[1, 2, 3], isr=[1], leader=1,
                                          leader_epoch=4, partition_epoch=7, eligible_leader_replicas=[2, 3]), 2),
                         (PartitionRecord(partition_id=1, topic_id=ORDERS, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
                                          leader_epoch=0, partition_epoch=0), 2),
                         (PartitionRecord(partition_id=0, topic_id=other, replicas=[1, 2], isr=[], leader=-1,
                                          leader_epoch=3, partition_epoch=5, last_known_elr=[2]), 2)))
    orders = replay.image.topics["orders"].partitions
    assert (orders[0].elr, orders[0].last_known_elr, orders[1].elr) == ((2, 3), (), ())
    # Replica 2 leaves the ELR; a change without ELR fields leaves them as they are.
    replay.batches(batch(5, (PartitionChangeRecord(partition_id=0, topic_id=ORDERS, eligible_leader_replicas=[3],
                                                   last_known_elr=[]), 2),
                         (PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=[1, 2]), 2)))
    orders = replay.image.topics["orders"].partitions
    assert (orders[0].elr, orders[0].last_known_elr, orders[0].isr, orders[0].partition_epoch) == ((3,), (), (1, 2), 9)
    replay.batches(batch(7, ClearElrRecord(topic_name="orders")))
    orders = replay.image.topics["orders"].partitions
    assert (orders[0].elr, orders[0].partition_epoch) == ((), 10)
    assert orders[1].partition_epoch == 0  # nothing to clear: unchanged
    assert replay.image.topics["other"].partitions[0].last_known_elr == (2,)
    replay.batches(batch(8, ClearElrRecord(topic_name="")))
    cleared = replay.image.topics["other"].partitions[0]
    assert (cleared.last_known_elr, cleared.partition_epoch, cleared.leader_epoch) == ((), 6, 3)
    with pytest.raises(MetadataRecordError, match="Unable to clear elr for topic with name gone"):
        replay.batches(batch(9, ClearElrRecord(topic_name="gone")))


def test_broker_registrations_fencing_and_unregistration():
    replay = MetadataReplay()
    replay.batches(batch(0, (RegisterBrokerRecord(broker_id=5, broker_epoch=9, end_points=[
        RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=0)]), 3)))
    assert replay.image.brokers[5].fenced
    replay.batches(batch(1, UnfenceBrokerRecord(id=5, epoch=9)))
    assert not replay.image.brokers[5].fenced
    replay.batches(batch(2, (BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=9, fenced=1), 1)))
    assert replay.image.brokers[5].fenced
    replay.batches(batch(3, UnregisterBrokerRecord(broker_id=5, broker_epoch=9)))
    assert replay.image.brokers == {}
