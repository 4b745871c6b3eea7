"""server/metadata/image.py's load_or_import: on a log dir Kafka wrote, Samsa's metadata image is what
Kafka's `__cluster_metadata` log holds (storage/cluster_metadata.py reads it), saved as Samsa's."""

from __future__ import annotations

import json
import uuid

import pytest

from samsa.server.security.authorizer import AclBinding
from samsa.server.metadata.image import METADATA_FILE, MetadataImage, load_or_import
from samsa.server.security.scram import ScramCredential
from samsa.storage.cluster_metadata import CLUSTER_METADATA_DIR, ClusterMetadataError
from samsa.storage.log_manager import CLEAN_SHUTDOWN_FILE
from samsa.wire.metadata_record import encode_metadata_record
from samsa.wire.metadata_records.access_control_entry_record import AccessControlEntryRecord
from samsa.wire.metadata_records.client_quota_record import ClientQuotaRecord, EntityData
from samsa.wire.metadata_records.config_record import ConfigRecord
from samsa.wire.metadata_records.partition_record import PartitionRecord
from samsa.wire.metadata_records.producer_ids_record import ProducerIdsRecord
from samsa.wire.metadata_records.topic_record import TopicRecord
from samsa.wire.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from samsa.wire.records import Record, build_batch

ORDERS = uuid.UUID(int=1)


def kafka_log_dir(path, *, clean: bool = True):
    records = [
        (TopicRecord(name="orders", topic_id=ORDERS), 0),
        *[(PartitionRecord(partition_id=p, topic_id=ORDERS, replicas=[0], isr=[0], leader=0), 2) for p in range(2)],
        (ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1"), 0),
        (ConfigRecord(resource_type=16, resource_name="apps", name="metrics", value="org.apache.kafka."), 0),
        (ConfigRecord(resource_type=16, resource_name="apps", name="interval.ms", value="1000"), 0),
        (ConfigRecord(resource_type=16, resource_name="gone", name="metrics", value="*"), 0),
        (ConfigRecord(resource_type=16, resource_name="gone", name="metrics", value=None), 0),
        (ProducerIdsRecord(broker_id=0, next_producer_id=1000), 0),
        (AccessControlEntryRecord(id=uuid.UUID(int=9), resource_type=2, resource_name="orders", pattern_type=3,
                                  principal="User:alice", host="*", operation=3, permission_type=3), 0),
        (UserScramCredentialRecord(name="alice", mechanism=1, salt=b"s", stored_key=b"k", server_key=b"v",
                                   iterations=4096), 0),
        (ClientQuotaRecord(entity=[EntityData(entity_type="user", entity_name="alice")],
                           key="producer_byte_rate", value=100.0), 0),
    ]
    (path / CLUSTER_METADATA_DIR).mkdir(parents=True)
    (path / CLUSTER_METADATA_DIR / f"{0:020d}.log").write_bytes(build_batch(
        [Record(i, 0, None, encode_metadata_record(r, v), []) for i, (r, v) in enumerate(records)], base_timestamp=0))
    if clean:
        (path / CLEAN_SHUTDOWN_FILE).write_text('{"version":0,"brokerEpoch":-1}')
    return path


def test_the_image_of_a_kafka_log_dir(tmp_path):
    image = load_or_import([kafka_log_dir(tmp_path)], "cluster")
    orders = image.topics["orders"]
    assert (orders.topic_id, orders.num_partitions, orders.replication_factor) == (ORDERS, 2, 1)
    assert orders.configs == {"retention.ms": "1000"} and image.topics_by_id[ORDERS] is orders
    assert image.broker_configs == {"": {"min.insync.replicas": "1"}}
    assert image.client_metrics == {"apps": {"metrics": "org.apache.kafka.", "interval.ms": "1000"}}  # KIP-714
    assert image.allocate_producer_id_block(1000) == 1000, "past every id Kafka handed out"
    (acl,) = image.acls
    assert (AclBinding.from_json(acl).principal, acl["operation"], acl["permission"]) == ("User:alice", "READ", "ALLOW")
    assert ScramCredential.from_json(image.scram_credentials["alice"]["SCRAM-SHA-256"]).iterations == 4096
    assert image.client_quotas == {(("user", "alice"),): {"producer_byte_rate": 100.0}}
    # Saved as Samsa's image: the next start reads it, Kafka's log no more.
    saved = MetadataImage.load(tmp_path, "cluster")
    assert saved.topics["orders"].topic_id == ORDERS and saved.next_producer_id == 2000
    assert saved.client_metrics == image.client_metrics
    assert json.loads((tmp_path / METADATA_FILE).read_text())["cluster_id"] == "cluster"
    (tmp_path / CLUSTER_METADATA_DIR / f"{0:020d}.log").write_bytes(b"")
    assert "orders" in load_or_import([tmp_path], "cluster").topics


def test_without_a_clean_shutdown_the_error_says_what_to_run(tmp_path):
    with pytest.raises(ClusterMetadataError, match="kafka-server-stop.sh"):
        load_or_import([kafka_log_dir(tmp_path, clean=False)], "cluster")
    assert not (tmp_path / METADATA_FILE).exists()


def test_a_samsa_log_dir_is_loaded_as_before(tmp_path):
    assert load_or_import([tmp_path], "cluster").topics == {}
