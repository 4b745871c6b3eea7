"""Fetch from the closest replica (KIP-392): Kafka's RackAwareReplicaSelector, the leader's
preferred_read_replica answers and a follower serving consumers up to its high watermark. The
in-process brokers of test_replication.py; the racks are put in the leader's metadata cache by hand
(as the controller's UpdateMetadata would)."""

from __future__ import annotations

import pytest
import trio

from loopback import Client, broker_config
from test_replication import TOPIC, produce, run_cluster

from samsa.coordinator.partition_leader import FollowerState
from samsa.server.config.kafka_config import ConfigError, KafkaConfig
from samsa.server.replication.replica_selector import (RACK_AWARE_REPLICA_SELECTOR, ReplicaView, preferred_read_replica,
                                           rack_aware_select, replica_selector)
from samsa.server.metadata.cache import AliveBroker
from samsa.server.zookeeper.metadata_cache import ZkMetadataCache
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Fetch = request_class(ApiKey.FETCH)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
RACKS = {0: "r1", 1: "r2", 2: "r2"}


# -- the selector


def view(node_id, rack, log_end_offset=10, since_caught_up_ms=0):
    return ReplicaView(node_id, rack, log_end_offset, since_caught_up_ms)


def test_rack_aware_selector_prefers_the_leader_then_the_most_caught_up_replica_of_the_clients_rack():
    leader = view(0, "r1")
    behind, ahead, late, other = view(1, "r2", 8), view(2, "r2", 10, 500), view(3, "r2", 10, 100), view(4, "r3")
    replicas = [leader, behind, ahead, late, other]
    assert rack_aware_select("r2", replicas, leader) == late  # log end first, then the latest catch-up
    assert rack_aware_select("r2", [leader, view(5, "r2"), view(6, "r2")], leader) == view(6, "r2")  # then the id
    assert rack_aware_select("r1", replicas, leader) == leader  # the leader is in the client's rack
    assert rack_aware_select("r9", replicas, leader) == leader  # no replica there
    assert rack_aware_select("", replicas, leader) == leader  # the client names no rack
    assert rack_aware_select(None, replicas, leader) == leader


def test_preferred_read_replica_counts_in_sync_followers_holding_the_offset_and_reachable():
    def follower(broker_id, log_end_offset, last_caught_up_time_ms=1000):
        return FollowerState(broker_id, log_end_offset=log_end_offset, last_caught_up_time_ms=last_caught_up_time_ms)

    racks = {0: "r1", 1: "r2", 2: "r2", 3: None}  # 3: not reachable on the client's listener
    select = replica_selector(RACK_AWARE_REPLICA_SELECTOR)

    def preferred(client_rack, isr, followers, fetch_offset=5):
        return preferred_read_replica(select, client_rack, fetch_offset, 2000, 0, 10, isr, followers, racks.get)

    followers = [follower(1, 10), follower(2, 10, 1500), follower(3, 10)]
    assert preferred("r2", (0, 1, 2, 3), followers) == 2
    assert preferred("r2", (0, 1, 3), followers) == 1  # 2 left the ISR
    assert preferred("r2", (0, 3), followers) is None  # none of the rack in sync: the leader serves
    assert preferred("r2", (0, 1, 2), followers, fetch_offset=11) is None  # the offset is beyond them
    assert preferred("r1", (0, 1, 2), followers) is None  # the leader itself
    assert preferred(None, (0, 1, 2), followers) is None


def test_replica_selector_class_names_kafkas_selector_and_unknown_names_stop_the_broker(tmp_path):
    assert replica_selector(None) is None and replica_selector("") is None
    assert broker_config(tmp_path).replica_selector is None
    config = broker_config(tmp_path, replica_selector_class=RACK_AWARE_REPLICA_SELECTOR)
    assert config.replica_selector is rack_aware_select
    with pytest.raises(ConfigError, match="ClassNotFoundException: com.example.Closest"):
        KafkaConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
                     "replica.selector.class": "com.example.Closest"})


# -- the fetch answers


def with_racks(broker, racks: dict[int, str]) -> None:
    """The brokers' racks as the controller's UpdateMetadata would bring them."""
    cache = ZkMetadataCache(broker.node_id, broker.services.metadata)
    cache.alive_brokers = {i: AliveBroker(i, {"PLAINTEXT": ("127.0.0.1", 1)}, rack) for i, rack in racks.items()}
    broker.services.metadata_cache = cache


def consumer_fetch(offset: int, rack: str = "", max_wait_ms: int = 0):
    return Fetch(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, rack_id=rack, topics=[Fetch.FetchTopic(topic=TOPIC, partitions=[
                     Fetch.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])


async def fetch(port: int, offset: int, rack: str = "", version: int = 12, max_wait_ms: int = 0):
    client = await Client.connect(port)
    response = await client.call(consumer_fetch(offset, rack, max_wait_ms), version)
    return response.responses[0].partitions[0]


async def list_latest_offset(port: int, replica_id: int = -1):
    request = ListOffsets(replica_id=replica_id, isolation_level=0, topics=[ListOffsets.ListOffsetsTopic(
        name=TOPIC, partitions=[ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    client = await Client.connect(port)
    answer = (await client.call(request, 7)).topics[0].partitions[0]
    return answer.error_code, answer.offset


async def until_high_watermark(cluster, broker_id: int, offset: int, timeout: float = 10) -> None:
    """Until the follower's high watermark (from its leader's fetch responses) reaches `offset`."""
    partition = cluster.partition(broker_id)
    with trio.fail_after(timeout):
        while partition.log.high_watermark < offset:
            moved = trio.Event()
            partition.park(moved)
            await moved.wait()


def test_the_leader_sends_a_consumer_to_an_in_sync_replica_of_its_rack(tmp_path):
    async def scenario(cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        assert (await produce(cluster.port(0), [b"a", b"b"])).error_code == ErrorCode.NONE
        with_racks(cluster.brokers[0], RACKS)
        sent = await fetch(cluster.port(0), 0, rack="r2")
        assert sent.preferred_read_replica in (1, 2)
        assert (sent.error_code, sent.high_watermark, sent.log_start_offset, len(sent.records)) == (
            ErrorCode.NONE, 2, 0, 0)
        for rack in ("r1", "r9", ""):  # the leader's rack, a rack without replicas, none: read here
            data = await fetch(cluster.port(0), 0, rack=rack)
            assert (data.preferred_read_replica, data.error_code) == (-1, ErrorCode.NONE)
            assert len(data.records) > 0
        before_v11 = await fetch(cluster.port(0), 0, version=10)
        assert before_v11.preferred_read_replica == -1 and len(before_v11.records) > 0
        # The controller takes 2 out of the ISR, then 1: the leader stops pointing at them.
        cluster.elect(leader=0, epoch=2, isr=(0, 1), replicas=(0, 1, 2), on=(0,))
        assert (await fetch(cluster.port(0), 0, rack="r2")).preferred_read_replica == 1
        cluster.elect(leader=0, epoch=3, isr=(0,), replicas=(0, 1, 2), on=(0,))
        data = await fetch(cluster.port(0), 0, rack="r2")
        assert data.preferred_read_replica == -1 and len(data.records) > 0

    run_cluster(tmp_path, 3, scenario, replica_selector_class=RACK_AWARE_REPLICA_SELECTOR)


def test_without_a_replica_selector_the_leader_serves_every_consumer(tmp_path):
    async def scenario(cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        with_racks(cluster.brokers[0], RACKS)
        data = await fetch(cluster.port(0), 0, rack="r2")
        assert data.preferred_read_replica == -1 and len(data.records) > 0

    run_cluster(tmp_path, 2, scenario)


def test_a_follower_serves_consumers_up_to_its_high_watermark(tmp_path):
    async def scenario(cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
        for value in (b"a", b"b"):  # two batches
            assert (await produce(cluster.port(0), [value])).error_code == ErrorCode.NONE
        await until_high_watermark(cluster, 1, 2)
        from_leader, from_follower = await fetch(cluster.port(0), 0), await fetch(cluster.port(1), 0)
        assert (from_follower.error_code, from_follower.high_watermark, from_follower.preferred_read_replica) == (
            ErrorCode.NONE, 2, -1)
        assert bytes(from_follower.records) == bytes(from_leader.records)
        # A long poll on the follower answers once its high watermark covers new records.
        async with trio.open_nursery() as nursery:
            polled: list = []

            async def poll():
                polled.append(await fetch(cluster.port(1), 2, max_wait_ms=10_000))
            nursery.start_soon(poll)
            assert (await produce(cluster.port(0), [b"c"])).error_code == ErrorCode.NONE
        assert (polled[0].error_code, polled[0].high_watermark) == (ErrorCode.NONE, 3) and len(polled[0].records) > 0
        # ListOffsets stays with the leader (but for the debugging replica id).
        assert await list_latest_offset(cluster.port(1)) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        assert await list_latest_offset(cluster.port(0)) == (ErrorCode.NONE, 3)
        assert (await list_latest_offset(cluster.port(1), replica_id=-2))[0] == ErrorCode.NONE
        # The follower fetches no more and its high watermark stays behind its log end (3):
        # beyond the high watermark nothing is read; beyond the log end is out of range.
        cluster.brokers[1].services.replica_manager.fetchers.remove_partition((TOPIC, 0))
        cluster.log(1).high_watermark = 1
        below = await fetch(cluster.port(1), 0)
        assert (below.error_code, below.high_watermark) == (ErrorCode.NONE, 1)
        assert bytes(below.records) == bytes((await fetch(cluster.port(0), 0)).records)[:len(below.records)]
        assert len(below.records) < len(from_leader.records)  # batch a only
        between = await fetch(cluster.port(1), 2)
        assert (between.error_code, len(between.records)) == (ErrorCode.NONE, 0)
        assert (await fetch(cluster.port(1), 4)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        # Before Fetch v11 consumers read the leader only; a replica stopped serves nobody.
        assert (await fetch(cluster.port(1), 0, version=10)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        cluster.brokers[1].services.replica_manager.stop_replicas({(TOPIC, 0): (1, False)})
        assert (await fetch(cluster.port(1), 0)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run_cluster(tmp_path, 2, scenario)
