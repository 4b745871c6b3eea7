"""wire/zk_data.py: Kafka 3.9's znodes byte for byte. The expected bytes below are what a real
Kafka 3.9.2 broker (ZooKeeper mode, ZooKeeper 3.8.4) wrote: its registration (with and without
broker.rack), the controller, a 13-partition topic created with seven configs, a user's quota
config and its notification, literal and prefixed ACLs (kafka-acls) and their change events."""

from __future__ import annotations

import pytest

from samsa.wire import zk_data as z

KAFKA_BROKER = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                b'"endpoints":["PLAINTEXT://127.0.0.1:32905"],"jmx_port":-1,"port":32905,"host":"127.0.0.1",'
                b'"version":5,"timestamp":"1795648259880"}')
KAFKA_TOPIC = (b'{"partitions":{"11":[0],"12":[0],"0":[0],"1":[0],"2":[0],"3":[0],"4":[0],"5":[0],"6":[0],'
               b'"7":[0],"8":[0],"9":[0],"10":[0]},"topic_id":"mWrEYWnCTLeyhtvmgwL2Xg","adding_replicas":{},'
               b'"removing_replicas":{},"version":3}')
KAFKA_PARTITION_STATE = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
KAFKA_TOPIC_CONFIG = (b'{"version":1,"config":{"cleanup.policy":"compact","flush.ms":"10","max.message.bytes":"1000",'
                      b'"min.insync.replicas":"1","retention.ms":"1000","segment.bytes":"1048576",'
                      b'"segment.ms":"100000"}}')
KAFKA_USER_CONFIG = b'{"version":1,"config":{"producer_byte_rate":"1024","consumer_byte_rate":"2048"}}'


def test_broker_registration_is_kafkas():
    broker = z.BrokerRegistration(0, (z.EndPoint("PLAINTEXT", "127.0.0.1", 32905, "PLAINTEXT"),),
                                  timestamp=1795648259880)
    assert z.encode_broker(broker) == KAFKA_BROKER
    assert z.decode_broker(0, KAFKA_BROKER) == broker


def test_broker_registration_with_rack_is_kafkas():
    kafkas = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
              b'"endpoints":["PLAINTEXT://127.0.0.1:58787"],"rack":"rack-a","jmx_port":-1,"port":58787,'
              b'"host":"127.0.0.1","version":5,"timestamp":"1795648829937"}')
    broker = z.BrokerRegistration(0, (z.EndPoint("PLAINTEXT", "127.0.0.1", 58787, "PLAINTEXT"),), rack="rack-a",
                                  timestamp=1795648829937)
    assert z.encode_broker(broker) == kafkas


def test_broker_registration_with_rack_listeners_and_features_round_trips():
    broker = z.BrokerRegistration(
        7, (z.EndPoint("CLIENT", "::1", 9092, "SASL_SSL"), z.EndPoint("REPLICATION", "h", 9093, "PLAINTEXT")),
        rack="rack-a", features={"metadata.version": (1, 21), "kraft.version": (0, 1)}, timestamp=5)
    data = z.encode_broker(broker)
    assert z.decode_broker(7, data) == broker
    assert b'"endpoints":["CLIENT://[::1]:9092","REPLICATION://h:9093"]' in data
    assert b'"host":"h","port":9093' not in data and b'"host":"h"' in data  # the first PLAINTEXT one
    assert b'"metadata.version":{"min_version":1,"max_version":21}' in data  # Kafka's LinkedHashMap order


def test_broker_registration_without_plaintext_has_null_host():
    data = z.encode_broker(z.BrokerRegistration(1, (z.EndPoint("SSL", "h", 1, "SSL"),)))
    assert b'"host":null' in data and b'"port":-1' in data


def test_old_registration_versions_decode():
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert z.decode_broker(3, v1).endpoints == (z.EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),)
    v2 = b'{"version":2,"host":"h","port":9092,"jmx_port":-1,"endpoints":["SSL://h:9093"]}'
    assert z.decode_broker(3, v2).endpoints == (z.EndPoint("SSL", "h", 9093, "SSL"),)
    with pytest.raises(z.ZkDataError):
        z.decode_broker(3, b'{"version":0}')
    with pytest.raises(z.ZkDataError):
        z.decode_broker(3, b"not json")


def test_topic_assignment_is_kafkas():
    topic = z.TopicAssignment({p: z.ReplicaAssignment((0,)) for p in range(13)}, "mWrEYWnCTLeyhtvmgwL2Xg")
    assert z.encode_topic(topic) == KAFKA_TOPIC
    assert z.decode_topic(KAFKA_TOPIC) == topic


def test_topic_reassignment_round_trips():
    topic = z.TopicAssignment({0: z.ReplicaAssignment((1, 2, 3), adding_replicas=(3,), removing_replicas=(1,)),
                               1: z.ReplicaAssignment((2, 3))})
    data = z.encode_topic(topic)
    assert z.decode_topic(data) == topic
    assert b"topic_id" not in data
    assert z.decode_topic(None) == z.TopicAssignment({})


def test_partition_state_is_kafkas():
    state = z.PartitionState(leader=0, leader_epoch=0, isr=(0,), controller_epoch=1)
    assert z.encode_partition_state(state) == KAFKA_PARTITION_STATE
    assert z.decode_partition_state(KAFKA_PARTITION_STATE, zk_version=4) == z.PartitionState(0, 0, (0,), 1, zk_version=4)
    recovering = z.PartitionState(2, 5, (2,), 3, z.LEADER_RECOVERY_RECOVERING)
    assert z.decode_partition_state(z.encode_partition_state(recovering)) == recovering


def test_config_entities_are_kafkas():
    # Inserted in the order the tools gave them: Properties orders by hash, not by insertion.
    assert z.encode_config_entity({"retention.ms": "1000", "cleanup.policy": "compact", "segment.bytes": "1048576",
                                   "min.insync.replicas": "1", "max.message.bytes": "1000", "flush.ms": "10",
                                   "segment.ms": "100000"}) == KAFKA_TOPIC_CONFIG
    assert z.encode_config_entity({"producer_byte_rate": "1024", "consumer_byte_rate": "2048"}) == KAFKA_USER_CONFIG
    assert z.decode_config_entity(KAFKA_USER_CONFIG) == {"producer_byte_rate": "1024", "consumer_byte_rate": "2048"}
    assert z.decode_config_entity(None) == {}
    assert z.encode_config_change("users/alice") == b'{"version":2,"entity_path":"users/alice"}'
    assert z.decode_config_change(b'{"version":2,"entity_path":"users/alice"}') == "users/alice"
    assert z.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "topics/t"


def test_cluster_controller_and_feature_are_kafkas():
    assert z.encode_cluster_id("fu3BtO7JSRqtd49UEojohQ") == b'{"version":"1","id":"fu3BtO7JSRqtd49UEojohQ"}'
    assert z.decode_cluster_id(b'{"version":"1","id":"fu3BtO7JSRqtd49UEojohQ"}') == "fu3BtO7JSRqtd49UEojohQ"
    controller = b'{"version":2,"brokerid":0,"timestamp":"1795648260048","kraftControllerEpoch":-1}'
    assert z.encode_controller(z.ControllerRegistration(0, 1795648260048)) == controller
    assert z.decode_controller(controller) == z.ControllerRegistration(0, 1795648260048, -1)
    assert z.encode_controller_epoch(12) == b"12" and z.decode_controller_epoch(b"12") == 12
    assert z.encode_feature(z.FeatureZNode()) == b'{"features":{},"version":2,"status":1}'
    finalized = z.FeatureZNode({"metadata.version": 21})
    assert z.decode_feature(z.encode_feature(finalized)) == finalized


def test_admin_notification_and_producer_id_znodes_round_trip():
    reassignment = {("t", 0): (1, 2), ("u", 3): (3,)}
    assert z.decode_reassign_partitions(z.encode_reassign_partitions(reassignment)) == reassignment
    assert z.encode_reassign_partitions({("t", 0): [1]}) == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}')
    assert z.decode_preferred_replica_election(z.encode_preferred_replica_election([("t", 1)])) == [("t", 1)]
    assert z.encode_isr_change([("t", 1)]) == b'{"version":1,"partitions":[{"topic":"t","partition":1}]}'
    assert z.decode_isr_change(z.encode_isr_change([("t", 1), ("u", 0)])) == [("t", 1), ("u", 0)]
    assert z.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}' and z.decode_log_dir_event(
        z.encode_log_dir_event(3)) == 3
    assert z.log_dir_event_path("0000000007") == "/log_dir_event_notification/log_dir_event_0000000007"
    block = z.ProducerIdBlock(2, 1000, 1000)
    assert z.encode_producer_id_block(block) == b'{"version":1,"broker":2,"block_start":"1000","block_end":"1999"}'
    assert z.decode_producer_id_block(z.encode_producer_id_block(block)) == block
    assert z.next_producer_id_block(None, 1) == z.ProducerIdBlock(1, 0, 1000)
    assert z.next_producer_id_block(block, 0) == z.ProducerIdBlock(0, 2000, 1000)
    with pytest.raises(ValueError, match="exhausted"):
        z.next_producer_id_block(z.ProducerIdBlock(0, 2**63 - 1500, 1000), 0)


def test_acl_znodes_are_kafkas():
    acls = [z.AclEntry("User:alice", "Allow", "Read"), z.AclEntry("User:alice", "Allow", "DescribeConfigs")]
    kafkas = (b'{"acls":[{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"Read"},'
              b'{"principal":"User:alice","permissionType":"Allow","host":"*","operation":"DescribeConfigs"}],'
              b'"version":1}')
    assert z.encode_acls(acls) == kafkas
    assert z.decode_acls(kafkas) == acls
    assert z.acl_resource_path("LITERAL", "Topic", "t1") == "/kafka-acl/Topic/t1"
    assert z.acl_resource_path("PREFIXED", "Topic", "pre") == "/kafka-acl-extended/prefixed/Topic/pre"
    assert z.acl_change_store_path("LITERAL") == "/kafka-acl-changes"
    assert z.acl_change_store_path("PREFIXED") == "/kafka-acl-extended-changes"
    assert z.encode_literal_acl_change("TOPIC", "t1") == b"TOPIC:t1"
    assert z.decode_literal_acl_change(b"TOPIC:a:b") == ("TOPIC", "a:b")
    extended = b'{"version":1,"resourceType":"TOPIC","name":"pre","patternType":"PREFIXED"}'
    assert z.encode_extended_acl_change("TOPIC", "pre", "PREFIXED") == extended
    assert z.decode_extended_acl_change(extended) == ("TOPIC", "pre", "PREFIXED")


def test_paths():
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.config_entity_path("topics", "t") == "/config/topics/t"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert z.sequence_number("/isr_change_notification/isr_change_0000000003", z.ISR_CHANGE_PREFIX) == "0000000003"
    # What a Kafka 3.9 broker creates at startup (seen in its ZooKeeper), no more, no less.
    assert set(z.PERSISTENT_ZK_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics", "/brokers/seqid",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification", "/config/topics",
        "/config/clients", "/config/users", "/config/brokers", "/config/ips"}


def test_json_escapes_as_jackson():
    assert z.encode_json({"k": 'a"\\\n\x01é/'}) == '{"k":"a\\"\\\\\\n\\u0001é/"}'.encode()


def test_map_orders_grow_with_the_table():
    # "0".."9" hash to 48..57, "10" to 1567, "11" to 1568. At 12 entries a Scala mutable.HashMap
    # has doubled to 32 buckets (and sorts a bucket by hash), a Java HashMap still has 16.
    keys = [str(i) for i in range(12)]
    assert list(z._order_scala_mutable((k, 0) for k in keys)) == ["11", *map(str, range(10)), "10"]
    assert list(z._order_java_hash((k, 0) for k in keys)) == ["0", "11", *map(str, range(1, 10)), "10"]
    # Properties' ConcurrentHashMap doubles at three quarters already.
    assert list(z._order_java_hash(((k, 0) for k in keys), concurrent=True)) == ["11", *map(str, range(10)), "10"]
    # Scala's immutable Map keeps insertion order up to four entries.
    assert list(z._order_scala_immutable([("b", 1), ("a", 2), ("c", 3), ("d", 4)])) == ["b", "a", "c", "d"]
