"""The share coordinator of Samsa brokers in a ZooKeeper cluster: it moves with the leadership of
its `__share_group_state` partition, created through ZooKeeper with the replication factor asked
for, and the share partitions' state, written with acks=all, is read back from the new leader once
the old one is killed with kill -9; back as a follower, the old one no longer coordinates it.

One ZooKeeper and two Samsa brokers (1 and 2, one of them the controller), `__share_group_state` with one partition and two replicas.
Kafka 3.9 cannot be in this cluster: it has no share coordinator.
"""

from __future__ import annotations

import pytest
from compat_util import wait_for
from conftest import BrokerPool
from server_process import HOST
from wire_client import WireClient

from samsa.coordinator.share_coordinator import SharePartitionKey, coordinator_key
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

pytest.importorskip("kazoo.client")

Metadata = request_class(ApiKey.METADATA)
CreateTopics = request_class(ApiKey.CREATE_TOPICS)
FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
Initialize = request_class(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
Read = request_class(ApiKey.READ_SHARE_GROUP_STATE)
Write = request_class(ApiKey.WRITE_SHARE_GROUP_STATE)

CHROOT = "/kafka/share"
T = 30
SHARE = 2
ACKNOWLEDGED = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pool = BrokerPool(tmp_path_factory, "share-cluster")
    try:
        connect = pool.zookeeper().connect + CHROOT
        settings = {"zookeeper.connect": connect, "zookeeper.session.timeout.ms": 6000,
                    "share.coordinator.state.topic.num.partitions": 1,
                    "share.coordinator.state.topic.replication.factor": 2, "share.coordinator.state.topic.min.isr": 1}
        brokers = {i: pool({**settings, "broker.id": i}) for i in (1, 2)}
        wait_for(lambda: len(metadata(brokers[1].port, []).brokers) == 2, T, what="both brokers in the cluster")
        yield brokers
    finally:
        pool.close()


def metadata(port: int, topics: list[str] | None):
    with WireClient(HOST, port) as client:
        return client.call(Metadata(topics=None if topics is None else [Metadata.MetadataRequestTopic(name=t)
                                                                         for t in topics],
                                    allow_auto_topic_creation=False), 12)


def call(port: int, request, version: int):
    with WireClient(HOST, port) as client:
        return client.call(request, version)


def coordinator(brokers, key: str, exclude: int | None = None) -> int:
    """The node FindCoordinator names for the share key (retried while there is none)."""
    def ask():
        port = next(b.port for i, b in brokers.items() if i != exclude)
        found = call(port, FindCoordinator(key_type=SHARE, coordinator_keys=[key]), 6).coordinators[0]
        return found.node_id if found.error_code == ErrorCode.NONE and found.node_id != exclude else None
    return wait_for(ask, T, what="the share coordinator")


def result(response):
    return response.results[0].partitions[0]


def until_served(port: int, request, version: int):
    """The partition's result once the coordinator has loaded it (retried as the persister retries)."""
    retriable = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return wait_for(lambda: (r := result(call(port, request, version))).error_code not in retriable and r, T,
                    what="the share coordinator's answer")


def test_the_share_coordinator_moves_with_its_partition_and_the_state_with_it(cluster):
    create = CreateTopics(topics=[CreateTopics.CreatableTopic(name="shared", num_partitions=1, replication_factor=2)],
                          timeout_ms=T * 1000)
    assert call(cluster[1].port, create, 7).topics[0].error_code == ErrorCode.NONE
    topic = wait_for(lambda: (t := metadata(cluster[2].port, ["shared"]).topics[0]).error_code == 0 and t, T,
                     what="the topic's leader")
    topic_id = topic.topic_id
    key = coordinator_key(SharePartitionKey("g", topic_id, 0))
    first = coordinator(cluster, key)
    state_topic = wait_for(lambda: (t := metadata(cluster[1].port, ["__share_group_state"]).topics[0]).error_code
                           == 0 and t, T, what="__share_group_state")
    assert state_topic.is_internal and [len(p.replica_nodes) for p in state_topic.partitions] == [2]

    port = cluster[first].port
    initialize = Initialize(group_id="g", topics=[Initialize.InitializeStateData(topic_id=topic_id, partitions=[
        Initialize.PartitionData(partition=0, state_epoch=1, start_offset=10)])])
    assert until_served(port, initialize, 0).error_code == ErrorCode.NONE
    write = Write(group_id="g", topics=[Write.WriteStateData(topic_id=topic_id, partitions=[Write.PartitionData(
        partition=0, state_epoch=1, leader_epoch=0, start_offset=10, delivery_complete_count=5,
        state_batches=[Write.StateBatch(first_offset=10, last_offset=14, delivery_state=ACKNOWLEDGED,
                                        delivery_count=1)])])])
    assert result(call(port, write, 1)).error_code == ErrorCode.NONE
    other = next(i for i in cluster if i != first)
    # The broker that does not lead the partition does not coordinate it.
    read = Read(group_id="g", topics=[Read.ReadStateData(topic_id=topic_id, partitions=[
        Read.PartitionData(partition=0, leader_epoch=1)])])
    assert result(call(cluster[other].port, read, 0)).error_code == ErrorCode.NOT_COORDINATOR

    cluster[first].kill()  # kill -9: the other broker leads the partition and coordinates its share partitions
    assert coordinator(cluster, key, exclude=first) == other
    answer = until_served(cluster[other].port, read, 0)
    assert (answer.error_code, answer.state_epoch, answer.start_offset) == (ErrorCode.NONE, 1, 10)
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in answer.state_batches] == [
        (10, 14, ACKNOWLEDGED, 1)]
    # The read at leader epoch 1 fenced the writers of epoch 0.
    assert result(call(cluster[other].port, write, 1)).error_code == ErrorCode.FENCED_LEADER_EPOCH

    cluster[first].start()
    wait_for(lambda: len(metadata(cluster[other].port, []).brokers) == 2, T, what="the killed broker back")
    assert coordinator(cluster, key) == other
    assert result(call(cluster[first].port, read, 0)).error_code == ErrorCode.NOT_COORDINATOR
