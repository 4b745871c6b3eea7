"""Samsa brokers in Kafka 3.9's ZooKeeper layout, in one ZooKeeper (under a chroot) with a real
Kafka 3.9 broker: one cluster id whoever comes first, registrations of the same shape (Samsa's
encoder reproduces Kafka's bytes), Kafka's controller counting the Samsa broker among the live ones
and listing it in Metadata, a broker id taken twice refused, the registration made again after a
session expiry; Kafka's controller telling the Samsa broker the cluster's metadata (UpdateMetadata),
so that Samsa's Metadata, DescribeCluster and topic configs answer as Kafka's; topics created, grown
and deleted through a Samsa broker by way of ZooKeeper and Kafka's controller; replication between
Kafka and Samsa both ways (LeaderAndIsr, StopReplica and AlterPartition with Kafka's controller)."""

from __future__ import annotations

import json
import os
import signal
import uuid
from contextlib import contextmanager

import pytest
from compat_util import confluent_admin, wait_for
from server_process import HOST, BrokerStartError
from wire_client import WireClient

from samsa.wire import zk_data
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

kazoo_client = pytest.importorskip("kazoo.client")

Metadata = request_class(ApiKey.METADATA)
CreateTopics = request_class(ApiKey.CREATE_TOPICS)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
CreatePartitions = request_class(ApiKey.CREATE_PARTITIONS)
DescribeCluster = request_class(ApiKey.DESCRIBE_CLUSTER)
DescribeConfigs = request_class(ApiKey.DESCRIBE_CONFIGS)
DYNAMIC_TOPIC_CONFIG = 1
CHROOT = "/kafka/cluster-a"
T = 30


@contextmanager
def zk_reader(connect: str):
    client = kazoo_client.KazooClient(hosts=connect)
    client.start(timeout=T)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def read_meta(broker) -> dict[str, str]:
    lines = (broker.data_dir / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def metadata_brokers(kafka) -> dict[int, tuple[str, int, str | None]]:
    with WireClient(HOST, kafka.port) as client:
        response = client.call(Metadata(topics=[], allow_auto_topic_creation=False), 12)
    return {b.node_id: (b.host, b.port, b.rack) for b in response.brokers}


def assert_same_shape(kafka_json: bytes, samsa_json: bytes) -> None:
    """The same keys in the same order, each value of the same JSON type."""
    kafka_doc, samsa_doc = json.loads(kafka_json), json.loads(samsa_json)
    assert list(kafka_doc) == list(samsa_doc)
    assert {k: type(v) for k, v in kafka_doc.items()} == {k: type(v) for k, v in samsa_doc.items()}


def assert_kafkas_bytes(data: bytes, encode, decode) -> None:
    """Samsa's encoder writes back exactly the bytes Kafka wrote."""
    assert encode(decode(data)) == data


def test_samsa_joins_the_cluster_kafka_created(kafka39_factory, topic_name):
    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0, "broker.rack": "rack-a"})
    samsa = kafka39_factory({"zookeeper.connect": connect, "broker.id": 1, "broker.rack": "rack-b",
                             "zookeeper.session.timeout.ms": 6000})

    with zk_reader(connect) as client:
        cluster_id = zk_data.decode_cluster_id(client.get(zk_data.CLUSTER_ID)[0])
        kafka_json, kafka_stat = client.get(zk_data.broker_path(0))
        samsa_json, samsa_stat = client.get(zk_data.broker_path(1))
        assert_same_shape(kafka_json, samsa_json)
        assert_kafkas_bytes(kafka_json, zk_data.encode_broker, lambda d: zk_data.decode_broker(0, d))
        assert zk_data.decode_broker(1, samsa_json).endpoints == (
            zk_data.EndPoint("PLAINTEXT", HOST, samsa.port, "PLAINTEXT"),)
        assert zk_data.decode_broker(1, samsa_json).rack == "rack-b"
        # Both ephemeral, created then filled in one multi (data version 1).
        assert samsa_stat.ephemeralOwner and kafka_stat.ephemeralOwner
        assert samsa_stat.version == kafka_stat.version == 1
        assert_kafkas_bytes(client.get(zk_data.CONTROLLER)[0], zk_data.encode_controller, zk_data.decode_controller)
        assert_kafkas_bytes(client.get(zk_data.FEATURE)[0], zk_data.encode_feature, zk_data.decode_feature)
    assert read_meta(samsa) == {"version": "0", "broker.id": "1", "cluster.id": cluster_id}
    assert read_meta(kafka)["cluster.id"] == cluster_id

    # Kafka's controller takes the Samsa broker in and tells every broker about it.
    wait_for(lambda: "Newly added brokers: 1, deleted brokers: , bounced brokers: , all live brokers: 0,1"
             in kafka.output(), T, what="Kafka's controller to see broker 1")
    assert wait_for(lambda: metadata_brokers(kafka).get(1), T, what="broker 1 in Kafka's Metadata") == (
        HOST, samsa.port, "rack-b")

    # A topic Kafka creates (on its own broker): its znodes are what Samsa's encoders write.
    with WireClient(HOST, kafka.port) as wire:
        topic = CreateTopics.CreatableTopic(
            name=topic_name, num_partitions=-1, replication_factor=-1,
            assignments=[CreateTopics.CreatableReplicaAssignment(partition_index=p, broker_ids=[0]) for p in range(3)],
            configs=[CreateTopics.CreatableTopicConfig(name=k, value=v) for k, v in
                     {"retention.ms": "60000", "cleanup.policy": "compact", "max.message.bytes": "2000"}.items()])
        response = wire.call(CreateTopics(topics=[topic], timeout_ms=T * 1000), 7)
        assert response.topics[0].error_code == ErrorCode.NONE
    with zk_reader(connect) as client:
        state_path = zk_data.partition_state_path(topic_name, 2)
        state = wait_for(lambda: client.exists(state_path) and client.get(state_path)[0], T, what="partition state")
        assert_kafkas_bytes(state, zk_data.encode_partition_state, zk_data.decode_partition_state)
        assert_kafkas_bytes(client.get(zk_data.topic_path(topic_name))[0], zk_data.encode_topic, zk_data.decode_topic)
        assert_kafkas_bytes(client.get(zk_data.config_entity_path("topics", topic_name))[0],
                            zk_data.encode_config_entity, zk_data.decode_config_entity)

    samsa.stop()  # its session closes with it, and the controller notices
    wait_for(lambda: "deleted brokers: 1, bounced brokers: , all live brokers: 0" in kafka.output(), T,
             what="Kafka's controller to see broker 1 go")


def test_kafka_joins_the_cluster_samsa_created(kafka39_factory):
    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    # No broker.id: generated as reserved.broker.max.id + /brokers/seqid's next version.
    samsa = kafka39_factory({"zookeeper.connect": connect})
    assert read_meta(samsa)["broker.id"] == "1001"
    cluster_id = read_meta(samsa)["cluster.id"]
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0})
    assert read_meta(kafka)["cluster.id"] == cluster_id
    with zk_reader(connect) as client:
        assert zk_data.decode_cluster_id(client.get(zk_data.CLUSTER_ID)[0]) == cluster_id
        assert client.get(zk_data.BROKER_SEQUENCE_ID)[1].version == 1
        assert_same_shape(client.get(zk_data.broker_path(0))[0], client.get(zk_data.broker_path(1001))[0])
        # Samsa, first, ran for controller and won.
        assert zk_data.decode_controller(client.get(zk_data.CONTROLLER)[0]).broker_id == 1001
    # The Samsa controller tells Kafka the cluster (UpdateMetadata).
    assert wait_for(lambda: metadata_brokers(kafka).get(1001), T, what="broker 1001 in Kafka's Metadata") == (
        HOST, samsa.port, None)

    # A fresh cluster has no ACL change paths (an authorizer makes them): nothing to purge, no error.
    assert "Error processing the notifications" not in samsa.output()

    # Kafka's broker id again: refused, as Kafka refuses it (the ephemeral belongs to another session).
    twin = kafka39_factory({"zookeeper.connect": connect, "broker.id": 0}, start=False)
    with pytest.raises(BrokerStartError, match="exited with code 1"):
        twin.start()
    assert "/brokers/ids/0, node already exists and owner" in twin.output()


def test_registration_survives_a_session_expiry(kafka39_factory):
    zk = kafka39_factory.zookeeper()
    # ZooKeeper's smallest session timeout is two ticks (4 s with the fixture's tickTime).
    # No controller to ask for a controlled shutdown at the end (Kafka would retry three times, 5 s apart).
    samsa = kafka39_factory({"zookeeper.connect": zk.connect, "broker.id": 5, "zookeeper.session.timeout.ms": 4000,
                             "controlled.shutdown.enable": "false"})
    with zk_reader(zk.connect) as client:
        first_owner = client.exists(zk_data.broker_path(5)).ephemeralOwner
        os.kill(samsa.proc.pid, signal.SIGSTOP)  # silent past the session timeout: ZooKeeper expires it
        try:
            wait_for(lambda: not client.exists(zk_data.broker_path(5)), T, interval=0.2, what="the session to expire")
        finally:
            os.kill(samsa.proc.pid, signal.SIGCONT)
        stat = wait_for(lambda: client.exists(zk_data.broker_path(5)), T, what="the broker to register again")
        assert stat.ephemeralOwner != first_owner
        assert zk_data.decode_broker(5, client.get(zk_data.broker_path(5))[0]).endpoints[0].port == samsa.port
    assert "registering broker 5 again" in samsa.output()


def metadata_answer(port: int) -> dict:
    """A Metadata v12 answer for every topic, as comparable data: brokers, controller, topics with
    their partitions in index order."""
    with WireClient(HOST, port) as client:
        response = client.call(Metadata(topics=None, allow_auto_topic_creation=False), 12)
    return {
        "cluster_id": response.cluster_id,
        "controller_id": response.controller_id,
        "brokers": sorted((b.node_id, b.host, b.port, b.rack) for b in response.brokers),
        "topics": {t.name: (t.error_code, t.topic_id, t.is_internal, [
            (p.partition_index, p.error_code, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes),
             list(p.offline_replicas)) for p in sorted(t.partitions, key=lambda p: p.partition_index)])
                   for t in response.topics},
    }


def describe_cluster_answer(port: int) -> tuple:
    with WireClient(HOST, port) as client:
        response = client.call(DescribeCluster(endpoint_type=1), 1)
    return (response.error_code, response.cluster_id, response.controller_id,
            sorted((b.broker_id, b.host, b.port, b.rack) for b in response.brokers))


def topic_overrides(port: int, topic: str) -> dict[str, str]:
    """A topic's overrides as DescribeConfigs lists them (the defaults come from each broker's own config)."""
    with WireClient(HOST, port) as client:
        response = client.call(DescribeConfigs(resources=[DescribeConfigs.DescribeConfigsResource(
            resource_type=2, resource_name=topic, configuration_keys=None)]), 4)
    (result,) = response.results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c.value for c in result.configs if c.config_source == DYNAMIC_TOPIC_CONFIG}


def controller_failures(kafka, request_type: str) -> int:
    """How often Kafka's controller failed to send a request of this type to broker 1."""
    return sum(1 for line in kafka.output().splitlines()
               if "fails to send request" in line and request_type in line and "id: 1 rack" in line)


def test_kafkas_controller_tells_samsa_the_cluster_metadata(kafka39_factory, topic_name):
    from confluent_kafka.admin import NewTopic

    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0, "broker.rack": "rack-a"})
    # Its listener answers before it has elected itself controller and told itself so (librdkafka's
    # admin then gives up "waiting for controller"; a loaded CI machine took longer than T once).
    wait_for(lambda: metadata_answer(kafka.port)["controller_id"] == 0, 4 * T, interval=0.2,
             what="Kafka to name itself controller")
    # Partitions on both brokers, created before broker 1 is up: the leaders are Kafka's, broker 1
    # a replica out of the ISR until it has caught up; and a topic of Kafka's broker alone.
    admin = confluent_admin(f"{HOST}:{kafka.port}")
    spread, alone = f"{topic_name}-spread", f"{topic_name}-alone"
    futures = admin.create_topics([NewTopic(spread, 3, replica_assignment=[[0, 1], [1, 0], [0, 1]]),
                                   NewTopic(alone, 2, 1, config={"retention.ms": "60000", "cleanup.policy": "compact"})],
                                  operation_timeout=T)
    for future in futures.values():
        future.result(timeout=T)
    samsa = kafka39_factory({"zookeeper.connect": connect, "broker.id": 1, "broker.rack": "rack-b"})

    def same_answers():
        kafka_view, samsa_view = metadata_answer(kafka.port), metadata_answer(samsa.port)
        return kafka_view == samsa_view and {spread, alone} <= set(samsa_view["topics"]) and samsa_view

    answer = wait_for(same_answers, T, what="Samsa's Metadata to be Kafka's")
    assert answer["controller_id"] == 0
    assert answer["brokers"] == [(0, HOST, kafka.port, "rack-a"), (1, HOST, samsa.port, "rack-b")]
    assert [(p[2], p[4]) for p in answer["topics"][spread][3]] == [(0, [0, 1]), (0, [1, 0]), (0, [0, 1])]
    assert answer["topics"][spread][1] != uuid.UUID(int=0)
    assert describe_cluster_answer(samsa.port) == describe_cluster_answer(kafka.port)
    # Topic overrides, read from /config/topics/<t>.
    assert topic_overrides(samsa.port, alone) == topic_overrides(kafka.port, alone) == {
        "retention.ms": "60000", "cleanup.policy": "compact"}
    assert topic_overrides(samsa.port, spread) == {}

    # The controller's LeaderAndIsr made broker 1 a follower of the spread topic's partitions: it
    # catches up, and Kafka's leader takes it into the ISRs, which Samsa's Metadata shows too.
    wait_for(lambda: all(p[5] == [0, 1] for p in metadata_answer(samsa.port)["topics"][spread][3]), T,
             what="broker 1 in the ISRs")
    assert controller_failures(kafka, "LeaderAndIsr") == controller_failures(kafka, "UpdateMetadata") == 0

    # CreateTopics on a Samsa broker writes ZooKeeper; Kafka's controller creates the topic.
    second = kafka39_factory({"zookeeper.connect": connect, "broker.id": 2, "broker.rack": "rack-c"})
    created = f"{topic_name}-via-samsa"
    with WireClient(HOST, second.port) as wire:
        wait_for(lambda: len(metadata_answer(second.port)["brokers"]) == 3, T, what="broker 2 to know the cluster")
        new = CreateTopics.CreatableTopic(
            name=created, num_partitions=-1, replication_factor=-1,
            assignments=[CreateTopics.CreatableReplicaAssignment(partition_index=p, broker_ids=[0]) for p in range(2)],
            configs=[CreateTopics.CreatableTopicConfig(name="retention.ms", value="120000")])
        (result,) = wire.call(CreateTopics(topics=[new], timeout_ms=T * 1000), 7).topics
        assert (result.error_code, result.num_partitions, result.replication_factor) == (ErrorCode.NONE, 2, 1)
    too_many = CreateTopics.CreatableTopic(name=f"{created}-4", num_partitions=1, replication_factor=4)
    uneven = CreateTopics.CreatableTopic(name=f"{created}-uneven", num_partitions=-1, replication_factor=-1, assignments=[
        CreateTopics.CreatableReplicaAssignment(partition_index=0, broker_ids=[0]),
        CreateTopics.CreatableReplicaAssignment(partition_index=1, broker_ids=[0, 2])])
    for refused in (too_many, uneven):
        answers = []
        for port in (second.port, kafka.port):
            with WireClient(HOST, port) as wire:
                (answer,) = wire.call(CreateTopics(topics=[refused], timeout_ms=T * 1000), 7).topics
            answers.append((answer.error_code, answer.error_message))
        assert answers[0] == answers[1] and answers[0][0] != ErrorCode.NONE
    # Samsa answered once its own UpdateMetadata came; Kafka's broker gets its copy about then.
    kafka_view = wait_for(lambda: metadata_answer(kafka.port)["topics"].get(created), T, what="the topic at Kafka")
    assert kafka_view == metadata_answer(second.port)["topics"][created]
    assert kafka_view[1] == result.topic_id
    assert [(p[2], p[4]) for p in kafka_view[3]] == [(0, [0]), (0, [0])]
    assert topic_overrides(kafka.port, created) == {"retention.ms": "120000"}
    with zk_reader(connect) as client:  # the shape of the znode Kafka wrote for a topic it created
        assert_same_shape(client.get(zk_data.topic_path(alone))[0], client.get(zk_data.topic_path(created))[0])
        assert zk_data.decode_config_entity(client.get(zk_data.config_entity_path("topics", created))[0]) == {
            "retention.ms": "120000"}

    # CreatePartitions on the Samsa broker: the topic's znode grows, the controller adds them.
    def grow(port, count, assignments):
        request = CreatePartitions(topics=[CreatePartitions.CreatePartitionsTopic(
            name=created, count=count, assignments=assignments and [
                CreatePartitions.CreatePartitionsAssignment(broker_ids=ids) for ids in assignments])],
            timeout_ms=T * 1000)
        with WireClient(HOST, port) as wire:
            (answer,) = wire.call(request, 3).results
        return answer.error_code, answer.error_message

    assert grow(second.port, 3, [[0]]) == (ErrorCode.NONE, None)
    assert grow(second.port, 2, None) == grow(kafka.port, 2, None)
    assert grow(second.port, 5, [[0], [7]]) == grow(kafka.port, 5, [[0], [7]])
    assert grow(second.port, 5, [[0]]) == grow(kafka.port, 5, [[0]])
    wait_for(lambda: len(metadata_answer(kafka.port)["topics"][created][3]) == 3, T, what="Kafka to add a partition")
    assert metadata_answer(second.port)["topics"][created] == metadata_answer(kafka.port)["topics"][created]

    # DeleteTopics on the Samsa broker: marked in /admin/delete_topics, deleted by the controller,
    # answered once the controller's UpdateMetadata has dropped it.
    with WireClient(HOST, second.port) as wire:
        (deleted,) = wire.call(DeleteTopics(topic_names=[created], timeout_ms=T * 1000), 5).responses
    assert deleted.error_code == ErrorCode.NONE
    assert created not in metadata_answer(second.port)["topics"]
    wait_for(lambda: created not in metadata_answer(kafka.port)["topics"], T, what="Kafka to drop the topic")

    # A topic with replicas on Samsa deleted: the controller's StopReplica (delete) takes Samsa's logs
    # too, and the deletion completes once every replica has answered it.
    assert all((samsa.data_dir / f"{spread}-{p}").is_dir() for p in range(3))
    admin.delete_topics([spread], operation_timeout=T)[spread].result(timeout=T)
    wait_for(lambda: spread not in metadata_answer(kafka.port)["topics"], T, what="Kafka to drop the spread topic")
    wait_for(lambda: not any((samsa.data_dir / f"{spread}-{p}").exists() for p in range(3)), T,
             what="Samsa's logs of the deleted topic to go")
    wait_for(lambda: f"Deletion of topic {spread} successfully completed" in kafka.output(), T,
             what="the controller to complete the deletion")
    assert controller_failures(kafka, "StopReplica") == 0


# --- replication between Kafka 3.9 and Samsa ----------------------------------------------------

Produce = request_class(ApiKey.PRODUCE)


def produce_all(port: int, topic: str, values: list[bytes]) -> tuple[int, int]:
    """One batch with acks=all to partition 0 through the broker at `port`: (error code, base offset)."""
    from samsa.wire import records

    batch = records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)])
    request = Produce(acks=-1, timeout_ms=T * 1000, topic_data=[Produce.TopicProduceData(
        name=topic, partition_data=[Produce.PartitionProduceData(index=0, records=batch)])])
    with WireClient(HOST, port) as client:
        answer = client.call(request, 9).responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def produce_to_new_leader(port: int, topic: str, values: list[bytes]) -> tuple[int, int]:
    """produce_all to a leader the controller just named: ZooKeeper shows the partition's state
    before the broker has the controller's LeaderAndIsr and UpdateMetadata, and until then it
    answers (writing nothing) UNKNOWN_TOPIC_OR_PARTITION (no metadata yet, as Kafka's produce
    checks it first) or NOT_LEADER_OR_FOLLOWER."""
    not_yet = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return wait_for(lambda: (answer := produce_all(port, topic, values))[0] not in not_yet and answer, T,
                    what=f"{topic}'s leader to take produce")


def partition_state(client, topic: str) -> zk_data.PartitionState:
    return zk_data.decode_partition_state(client.get(zk_data.partition_state_path(topic, 0))[0])


def segment_bytes(broker, topic: str) -> bytes:
    """The partition's first segment as the broker wrote it (Samsa's only once it has stopped: it
    may hold writes in a buffer)."""
    return (broker.data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()


def test_kafka_and_samsa_replicate_each_other(kafka39_factory, topic_name):
    """A topic with two replicas on Kafka 3.9 and Samsa: whichever leads, acks=all returns once
    both hold the records, byte for byte (Kafka's replica fetcher fetching from Samsa, Samsa's from
    Kafka); a stopped Samsa leaves the ISR (Kafka leads alone, acks=all goes on), and once started
    again it catches up and is taken back in."""
    from confluent_kafka.admin import NewTopic

    zk = kafka39_factory.zookeeper()
    connect = zk.connect + CHROOT
    kafka = kafka39_factory.kafka39(connect, overrides={"broker.id": 0})
    # One controlled shutdown attempt: it leaves a partition whose only live replica it is (below).
    samsa = kafka39_factory({"zookeeper.connect": connect, "broker.id": 1, "zookeeper.session.timeout.ms": 6000,
                             "controlled.shutdown.max.retries": 1})
    wait_for(lambda: len(metadata_answer(samsa.port)["brokers"]) == 2, T, what="Samsa to know the cluster")
    kafka_led, samsa_led = f"{topic_name}-k", f"{topic_name}-s"
    admin = confluent_admin(f"{HOST}:{kafka.port}")
    for future in admin.create_topics([NewTopic(kafka_led, 1, replica_assignment=[[0, 1]]),
                                       NewTopic(samsa_led, 1, replica_assignment=[[1, 0]])],
                                      operation_timeout=T).values():
        future.result(timeout=T)

    with zk_reader(connect) as client:
        for topic, leader in ((kafka_led, 0), (samsa_led, 1)):
            state = wait_for(lambda t=topic: client.exists(zk_data.partition_state_path(t, 0))
                             and partition_state(client, t), T, what="the partition state")
            assert (state.leader, state.isr) == (leader, (leader, 1 - leader))
        # The controller's LeaderAndIsr is answered: nothing retried behind it.
        wait_for(lambda: metadata_answer(samsa.port)["topics"].get(samsa_led), T, what="the topics at Samsa")
        assert controller_failures(kafka, "LeaderAndIsr") == 0

        # Through each leader, acks=all: answered once the other replica has the records.
        assert produce_to_new_leader(samsa.port, samsa_led, [b"s%d" % i for i in range(5)]) == (ErrorCode.NONE, 0)
        assert produce_all(samsa.port, samsa_led, [b"t%d" % i for i in range(3)]) == (ErrorCode.NONE, 5)
        assert produce_to_new_leader(kafka.port, kafka_led, [b"k%d" % i for i in range(4)]) == (ErrorCode.NONE, 0)
        # Not the leader: refused by either.
        assert produce_all(kafka.port, samsa_led, [b"x"])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert produce_all(samsa.port, kafka_led, [b"x"])[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        kafka_followed = segment_bytes(kafka, samsa_led)
        assert len(kafka_followed) > 0

        # Two Samsa brokers, Kafka only the controller: the Samsa leader tells it of ISR changes
        # (AlterPartition), here the follower taken back in after a restart.
        second = kafka39_factory({"zookeeper.connect": connect, "broker.id": 2})
        pair = f"{topic_name}-p"
        admin.create_topics([NewTopic(pair, 1, replica_assignment=[[1, 2]])],
                            operation_timeout=T)[pair].result(timeout=T)
        wait_for(lambda: client.exists(zk_data.partition_state_path(pair, 0))
                 and partition_state(client, pair).isr == (1, 2), T, what="the pair's ISR")
        assert produce_to_new_leader(samsa.port, pair, [b"p"]) == (ErrorCode.NONE, 0)
        second.stop()
        wait_for(lambda: partition_state(client, pair).isr == (1,), T, what="the ISR without broker 2")
        assert produce_all(samsa.port, pair, [b"q", b"r"]) == (ErrorCode.NONE, 1)
        second.start()
        wait_for(lambda: partition_state(client, pair).isr == (1, 2), T, what="broker 2 back in the ISR")
        wait_for(lambda: f"[Partition {pair}-0 broker=1] ISR updated to 1,2 and version updated to" in samsa.output(), T,
                 what="the controller's answer")
        assert produce_all(samsa.port, pair, [b"s"]) == (ErrorCode.NONE, 3)
        second.stop()

        # Samsa stops, asking the controller first to move its leaders (ControlledShutdown): Kafka
        # leads both alone, Samsa out of the ISRs. The pair's partition has no other live replica to
        # move to: the controller says so, and Samsa stops all the same.
        assert samsa.stop() == 0
        assert "Shutting down broker 1" in kafka.output()
        assert f"partitions remaining to move: ['{pair}-0']" in samsa.output()
        assert segment_bytes(samsa, samsa_led) == kafka_followed  # what Kafka copied from Samsa
        assert segment_bytes(samsa, kafka_led) == segment_bytes(kafka, kafka_led)  # what Samsa copied from Kafka
        for topic in (kafka_led, samsa_led):
            state = wait_for(lambda t=topic: partition_state(client, t).isr == (0,) and partition_state(client, t),
                             T, what="the ISR without Samsa")
            assert state.leader == 0
        assert produce_all(kafka.port, kafka_led, [b"l%d" % i for i in range(2)]) == (ErrorCode.NONE, 4)
        assert produce_all(kafka.port, samsa_led, [b"m%d" % i for i in range(2)]) == (ErrorCode.NONE, 8)

        # Samsa again: it follows Kafka for both, catches up and is back in both ISRs.
        samsa.start()
        for topic in (kafka_led, samsa_led):
            wait_for(lambda t=topic: set(partition_state(client, t).isr) == {0, 1}, T, what="Samsa back in the ISR")
        assert produce_all(kafka.port, kafka_led, [b"n"]) == (ErrorCode.NONE, 6)
        samsa.stop()
        for topic in (kafka_led, samsa_led):
            assert segment_bytes(samsa, topic) == segment_bytes(kafka, topic)
        assert segment_bytes(samsa, pair) == segment_bytes(second, pair)
