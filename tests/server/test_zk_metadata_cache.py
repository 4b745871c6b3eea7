"""server/zookeeper/metadata_cache.py and the UpdateMetadata handler without a ZooKeeper: Kafka's
ZkMetadataCache rules (partial updates merged, deletion by leader -2, topic ids, listeners,
LEADER_NOT_AVAILABLE), the fencing of stale controllers and broker epochs, and what Metadata,
DescribeCluster, DescribeTopicPartitions and FindCoordinator answer from the cache (compat-tests/test_zookeeper_cluster.py has a real Kafka 3.9
controller send it)."""

from __future__ import annotations

import uuid

import pytest
from cluster_member import as_cluster_member as cluster_member
from loopback import Client, broker_config, run_with_broker

from samsa.client.errors import BrokerUnreachable
from samsa.coordinator.group_coordinator import partition_for
from samsa.server.zookeeper.control_plane import ZkControlPlane
from samsa.server.zookeeper.metadata_cache import StaleControllerEpoch, ZkMetadataCache
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

UpdateMetadata = request_class(ApiKey.UPDATE_METADATA)
TopicState = UpdateMetadata.UpdateMetadataTopicState
PartitionState = UpdateMetadata.UpdateMetadataPartitionState
LiveBroker = UpdateMetadata.UpdateMetadataBroker
Endpoint = UpdateMetadata.UpdateMetadataEndpoint
TOPIC_ID = uuid.UUID("6c3b8a6a-2f41-4e4b-9d0e-6f2b0f5f3a11")


class Local:
    cluster_id = "cluster-1"
    broker_configs: dict = {}
    acls: list = []
    scram_credentials: dict = {}
    client_quotas: dict = {}


def broker(node_id: int, port: int, listeners=("PLAINTEXT",), rack=None):
    return LiveBroker(id=node_id, rack=rack, endpoints=[
        Endpoint(port=port + i, host="127.0.0.1", listener=name, security_protocol=0)
        for i, name in enumerate(listeners)])


def partition(topic, index, leader, isr, replicas, leader_epoch=0, offline=()):
    return PartitionState(topic_name=topic, partition_index=index, controller_epoch=1, leader=leader,
                          leader_epoch=leader_epoch, isr=list(isr), zk_version=0, replicas=list(replicas),
                          offline_replicas=list(offline))


def request(partitions=(), brokers=(), controller_epoch=1, broker_epoch=-1, topic_ids=None):
    topics: dict[str, list] = {}
    for p in partitions:
        topics.setdefault(p.topic_name, []).append(p)
    topic_ids = topic_ids or {}
    return UpdateMetadata(controller_id=0, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                          topic_states=[TopicState(topic_name=t, topic_id=topic_ids.get(t, TOPIC_ID),
                                                   partition_states=states) for t, states in topics.items()],
                          live_brokers=list(brokers))


def test_partial_updates_merge_and_leader_minus_two_deletes():
    cache = ZkMetadataCache(1, Local())
    two = [broker(0, 9092), broker(1, 9093, rack="r1")]
    assert cache.update_metadata(request([partition("t", 0, 0, [0, 1], [0, 1]), partition("t", 1, 1, [1, 0], [1, 0])],
                                         two), 8) == []
    assert cache.topics["t"].num_partitions == 2 and cache.topics["t"].replication_factor == 2
    assert cache.topics_by_id[TOPIC_ID].name == "t"
    # A partial update: only partition 1 moves; partition 0 stays as it was.
    cache.update_metadata(request([partition("t", 1, 0, [0], [1, 0], leader_epoch=1)], two), 8)
    view = cache.partition_metadata("t", "PLAINTEXT")
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.isr_nodes) for p in view] == [
        (0, 0, 0, [0, 1]), (1, 0, 1, [0])]
    assert [(b.node_id, b.port, b.rack) for b in cache.alive_nodes("PLAINTEXT")] == [(0, 9092, None), (1, 9093, "r1")]
    assert cache.controller_id == 0
    deleted = cache.update_metadata(request([partition("t", 0, -2, [], []), partition("t", 1, -2, [], [])], two), 8)
    assert deleted == [("t", 0), ("t", 1)]
    assert "t" not in cache.topics and TOPIC_ID not in cache.topics_by_id and "t" not in cache.topic_ids


def test_the_control_plane_names_the_topics_an_update_deleted_with_their_ids():
    """What the UpdateMetadata handler hands the share coordinator: a topic once its last partition goes."""
    cache = ZkMetadataCache(1, Local())
    plane = ZkControlPlane(None, cache)  # type: ignore[arg-type]  # the membership answers broker epochs only
    two = [broker(0, 9092), broker(1, 9093)]
    assert plane.update_metadata(request([partition("t", 0, 0, [0], [0]), partition("t", 1, 0, [0], [0])], two),
                                 8, 1) == (ErrorCode.NONE, {})
    assert plane.update_metadata(request([partition("t", 0, -2, [], [])], two), 8, 2) == (ErrorCode.NONE, {})
    assert plane.update_metadata(request([partition("t", 1, -2, [], [])], two), 8, 3) == (ErrorCode.NONE,
                                                                                           {"t": TOPIC_ID})
    assert plane.update_metadata(request([], two, controller_epoch=0), 8, 4) == (ErrorCode.STALE_CONTROLLER_EPOCH, {})


def test_a_zero_topic_id_forgets_the_known_one():
    cache = ZkMetadataCache(0, Local())
    cache.update_metadata(request([partition("t", 0, 0, [0], [0])], [broker(0, 9092)]), 8)
    cache.update_metadata(request([partition("t", 0, 0, [0], [0])], [broker(0, 9092)],
                                  topic_ids={"t": uuid.UUID(int=0)}), 8)
    assert cache.topics["t"].topic_id == uuid.UUID(int=0) and not cache.topics_by_id


def test_leader_not_available_listener_not_found_and_replica_not_available():
    cache = ZkMetadataCache(0, Local())
    cache.update_metadata(request([partition("gone", 0, 2, [2], [2, 0]), partition("t", 0, 1, [1, 0], [0, 1])],
                                  [broker(0, 9092, ("PLAINTEXT", "INTERNAL")), broker(1, 9094)]), 8)
    (gone,) = cache.partition_metadata("gone", "PLAINTEXT")
    assert (gone.error_code, gone.leader_id, gone.replica_nodes) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, [2, 0])
    # Broker 1 lives but has no INTERNAL listener: LISTENER_NOT_FOUND from Metadata v6, else LEADER_NOT_AVAILABLE.
    (t,) = cache.partition_metadata("t", "INTERNAL", error_unavailable_listeners=True)
    assert (t.error_code, t.leader_id) == (ErrorCode.LISTENER_NOT_FOUND, -1)
    (t,) = cache.partition_metadata("t", "INTERNAL")
    assert t.error_code == ErrorCode.LEADER_NOT_AVAILABLE
    # Metadata v0 leaves out replicas unreachable on the listener, and says so.
    (t,) = cache.partition_metadata("t", "PLAINTEXT", error_unavailable_endpoints=True)
    assert (t.error_code, t.leader_id, t.replica_nodes) == (ErrorCode.NONE, 1, [0, 1])
    cache.update_metadata(request([], [broker(0, 9092), broker(1, 9094, ("INTERNAL",))]), 8)
    (gone,) = cache.partition_metadata("gone", "PLAINTEXT")  # an update without partitions keeps them
    (t,) = cache.partition_metadata("gone", "PLAINTEXT", error_unavailable_endpoints=True)
    assert t.replica_nodes == [0] and cache.partition_metadata("nope", "PLAINTEXT") is None


def test_an_older_controller_epoch_is_refused_and_changes_nothing():
    cache = ZkMetadataCache(0, Local())
    cache.update_metadata(request([partition("t", 0, 0, [0], [0])], [broker(0, 9092)], controller_epoch=5), 8)
    with pytest.raises(StaleControllerEpoch):
        cache.update_metadata(request([partition("t", 0, -2, [], [])], [], controller_epoch=4), 8)
    assert "t" in cache.topics and cache.controller_epoch == 5 and cache.alive_brokers


def test_old_versions_ungrouped_states_and_listener_names():
    cache = ZkMetadataCache(0, Local())
    v0 = UpdateMetadata(controller_id=3, controller_epoch=1, ungrouped_partition_states=[
        partition("t", 0, 0, [0], [0])], live_brokers=[LiveBroker(id=0, v0_host="h", v0_port=1)])
    cache.update_metadata(v0, 0)
    assert [(b.host, b.port) for b in cache.alive_nodes("PLAINTEXT")] == [("h", 1)] and cache.controller_id == 3
    v2 = UpdateMetadata(controller_id=3, controller_epoch=1, ungrouped_partition_states=[],
                        live_brokers=[LiveBroker(id=0, rack="r", endpoints=[
                            Endpoint(port=2, host="h", listener="ignored", security_protocol=1)])])
    cache.update_metadata(v2, 2)
    assert [(b.port, b.rack) for b in cache.alive_nodes("SSL")] == [(2, "r")]


# --- the handler, on a broker made a cluster member by hand ---------------------------------------

class NoZooKeeper:
    def __init__(self) -> None:
        self.created: list[tuple[str, dict[int, list[int]], dict[str, str]]] = []

    async def close(self) -> None:
        pass

    async def create_topic(self, topic: str, topic_id: str, assignment: dict[int, list[int]],
                           configs: dict[str, str]) -> None:
        self.created.append((topic, assignment, configs))


def as_cluster_member(broker, broker_epoch: int) -> None:
    cluster_member(broker, NoZooKeeper(), broker_epoch)


def test_update_metadata_fencing_then_metadata_and_describe_cluster_answer_from_it(tmp_path):
    Metadata = request_class(ApiKey.METADATA)
    DescribeCluster = request_class(ApiKey.DESCRIBE_CLUSTER)
    DescribeTopicPartitions = request_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
    FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)

    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=100)
        port = samsa.endpoints[0].port
        client = await Client.connect(port)
        api_versions = await client.call(request_class(ApiKey.API_VERSIONS)(), 0)
        assert [(k.min_version, k.max_version) for k in api_versions.api_keys if k.api_key == 6] == [(0, 8)]
        live = [broker(0, port), broker(1, 19093, rack="r1")]
        update = request([partition("t", 0, 1, [1, 0], [1, 0], leader_epoch=3), partition("t", 1, 0, [0], [0, 1]),
                          partition("t", 2, 7, [7], [7])], live, controller_epoch=2, broker_epoch=99)
        assert (await client.call(update, 8)).error_code == ErrorCode.STALE_BROKER_EPOCH
        assert not samsa.services.metadata_cache.topics
        update.broker_epoch = 101  # newer than ours: accepted, as Kafka does
        assert (await client.call(update, 8)).error_code == ErrorCode.NONE
        update.controller_epoch = 1
        assert (await client.call(update, 8)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        update.broker_epoch = -1  # unknown: not stale
        update.controller_epoch = 2
        assert (await client.call(update, 8)).error_code == ErrorCode.NONE

        answer = await client.call(Metadata(topics=None), 12)
        assert [(b.node_id, b.port, b.rack) for b in answer.brokers] == [(0, port, None), (1, 19093, "r1")]
        assert answer.controller_id == 0
        (t,) = answer.topics
        assert (t.name, t.topic_id, t.error_code) == ("t", TOPIC_ID, ErrorCode.NONE)
        assert [(p.partition_index, p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
                for p in t.partitions] == [(0, 0, 1, 3, [1, 0], [1, 0]), (1, 0, 0, 0, [0, 1], [0]),
                                           (2, ErrorCode.LEADER_NOT_AVAILABLE, -1, 0, [7], [7])]
        unknown = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="nope")],
                                             allow_auto_topic_creation=False), 12)
        assert unknown.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # auto.create.topics.enable: AdminUtils' assignment refuses brokers with and without racks
        # (Kafka's AdminOperationException, an unknown server error), and nothing is written.
        unknown = await client.call(Metadata(topics=[Metadata.MetadataRequestTopic(name="nope")],
                                             allow_auto_topic_creation=True), 12)
        assert unknown.topics[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert samsa.zookeeper.client.created == []
        cluster = await client.call(DescribeCluster(endpoint_type=1), 1)
        assert [(b.broker_id, b.port) for b in cluster.brokers] == [(0, port), (1, 19093)]
        assert cluster.controller_id == 0

        # DescribeTopicPartitions pages the same partitions.
        described = await client.call(DescribeTopicPartitions(
            topics=[DescribeTopicPartitions.TopicRequest(name="t")], response_partition_limit=2), 0)
        assert [(p.partition_index, p.leader_id, p.isr_nodes) for p in described.topics[0].partitions] == [
            (0, 1, [1, 0]), (1, 0, [0])]
        assert (described.next_cursor.topic_name, described.next_cursor.partition_index) == ("t", 2)

        # FindCoordinator: the leader of the key's __consumer_offsets partition, once there is one.
        def coordinator_of(group):
            return FindCoordinator(key_type=0, coordinator_keys=[group])

        answer = await client.call(coordinator_of("g"), 4)
        assert answer.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        # Not created: two live brokers, offsets.topic.replication.factor 3 (Kafka's default).
        assert samsa.zookeeper.client.created == []
        offsets = [partition("__consumer_offsets", 0, 1, [1], [1]), partition("__consumer_offsets", 1, 7, [7], [7])]
        assert (await client.call(request(offsets, live, controller_epoch=2), 8)).error_code == ErrorCode.NONE
        groups = {partition_for(g, 2): g for g in ("a", "b", "c", "d")}
        answer = await client.call(coordinator_of(groups[0]), 4)
        assert (answer.coordinators[0].error_code, answer.coordinators[0].node_id,
                answer.coordinators[0].port) == (ErrorCode.NONE, 1, 19093)
        answer = await client.call(coordinator_of(groups[1]), 4)  # its leader is not alive
        assert answer.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE

    run_with_broker(broker_config(tmp_path, offsets_topic_num_partitions=2), scenario)


def test_topics_changed_anywhere_in_the_cluster_reach_the_group_coordinators(tmp_path):
    """A topic created, grown or deleted on other brokers changes the groups' topics as the broker's
    own topics do (the replica manager's on_topics_changed): a consumer group subscribed to it must
    assign its partitions. A leader moving changes nothing for them."""
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=100)
        replicas = samsa.services.replica_manager
        signalled = []
        told_groups = replicas.on_topics_changed
        replicas.on_topics_changed = lambda: (signalled.append(1), told_groups())
        client = await Client.connect(samsa.endpoints[0].port)
        live = [broker(0, samsa.endpoints[0].port), broker(1, 19093)]

        async def update(*partitions) -> None:
            assert (await client.call(request(partitions, live), 8)).error_code == ErrorCode.NONE

        await update(partition("elsewhere", 0, 1, [1], [1]))
        assert len(signalled) == 1
        await update(partition("elsewhere", 0, 1, [1], [1], leader_epoch=1))
        assert len(signalled) == 1
        await update(partition("elsewhere", 1, 1, [1], [1]))
        assert len(signalled) == 2
        await update(partition("elsewhere", 0, -2, [1], [1]), partition("elsewhere", 1, -2, [1], [1]))
        assert len(signalled) == 3 and "elsewhere" not in samsa.services.metadata_cache.topics

    run_with_broker(broker_config(tmp_path), scenario)


def test_a_single_broker_neither_serves_nor_lists_update_metadata(tmp_path):
    async def scenario(samsa):
        client = await Client.connect(samsa.endpoints[0].port)
        api_versions = await client.call(request_class(ApiKey.API_VERSIONS)(), 0)
        assert ApiKey.UPDATE_METADATA not in {k.api_key for k in api_versions.api_keys}
        with pytest.raises(BrokerUnreachable, match="closed the connection"):
            await client.call(request([], [broker(0, 1)]), 8)

    run_with_broker(broker_config(tmp_path), scenario)
