"""A leader serving its followers' and consumers' fetches (Kafka's ReplicaManager.fetchMessages and
DelayedFetch): what a long poll's passes read and record. One broker in-process leads a partition
whose followers (brokers 1 and 2, never started) the test plays over a socket. Deterministic: a
fetch is parked once every task is blocked, and nothing waits on a timer."""

from __future__ import annotations

import trio
import trio.testing

from loopback import Client, broker_config, one_batch, run_with_broker

from samsa.server.replication.replica_manager import PartitionState
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

TOPIC = "replicated"
LEADER, FOLLOWERS = 0, (1, 2)
Fetch = request_class(ApiKey.FETCH)


def lead(broker, partitions: int = 1):
    """The broker leads TOPIC's partitions at leader epoch 1, replicas and ISR 0, 1, 2."""
    replicas = broker.services.replica_manager
    replicas.create_topic(TOPIC, partitions, {"min.insync.replicas": "2"}, replication_factor=3)
    everyone = (LEADER, *FOLLOWERS)
    errors = replicas.become_leader_or_follower(
        [PartitionState(TOPIC, i, LEADER, 1, everyone, 1, everyone) for i in range(partitions)],
        {b: ("127.0.0.1", 1) for b in everyone})
    assert set(errors.values()) == {ErrorCode.NONE}
    return [replicas.get(TOPIC, i) for i in range(partitions)]


def follower_fetch(replica_id: int, offsets: dict[int, int], last_fetched_epoch: int = 1, max_wait_ms: int = 60_000):
    """Fetch v12 as a replica fetcher sends it, without a session."""
    return Fetch(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=10 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(topic=TOPIC, partitions=[
                     Fetch.FetchPartition(partition=p, current_leader_epoch=1, fetch_offset=offset,
                                          last_fetched_epoch=last_fetched_epoch, log_start_offset=0,
                                          partition_max_bytes=1 << 20) for p, offset in offsets.items()])],
                 forgotten_topics_data=[])


async def one_record_and_a_follower(broker):
    """TOPIC's partition led by the broker with one record, and broker 1's replica fetcher connected."""
    (partition,) = lead(broker)
    partition.append(bytearray(one_batch([b"a"])))
    return partition, await Client.connect(broker.endpoints[0].port, "broker-1-fetcher-0")


async def parked_call(nursery, client: Client, request, answered: dict) -> None:
    """Send `request` in the background; return once every task is blocked (the fetch parked, or
    answered: `answered["response"]` then holds the answer)."""
    async def call():
        answered["response"] = await client.call(request, 12)

    nursery.start_soon(call)
    await trio.testing.wait_all_tasks_blocked()


def test_a_follower_fetch_woken_by_an_append_records_where_the_follower_was_when_it_came(tmp_path):
    """Kafka's DelayedFetch reads with updateFetchState false: the follower's fetch state is what
    its request said, when it came (the leader's log end offset then), not updated again by the
    read after the wake."""
    async def scenario(broker):
        partition, follower = await one_record_and_a_follower(broker)
        answered: dict = {}
        async with trio.open_nursery() as nursery:
            await parked_call(nursery, follower, follower_fetch(1, {0: 1}), answered)
            assert "response" not in answered and partition.has_parked_fetches
            state = partition.leader_state.followers[1]
            assert (state.log_end_offset, state.last_fetch_leader_log_end_offset) == (1, 1)
            partition.append(bytearray(one_batch([b"b"])))
        data = answered["response"].responses[0].partitions[0]
        assert (data.error_code, len(data.records) > 0) == (ErrorCode.NONE, True)
        assert (state.log_end_offset, state.last_fetch_leader_log_end_offset) == (1, 1)

    run_with_broker(broker_config(tmp_path, broker_id=0, node_id=0), scenario)


def test_a_follower_fetch_whose_log_diverges_is_answered_at_once(tmp_path):
    """Kafka's fetchMessages answers a diverging epoch at once, whatever min_bytes and max_wait_ms
    say: the follower truncates before it can fetch anything."""
    async def scenario(broker):
        partition, follower = await one_record_and_a_follower(broker)
        answered: dict = {}
        async with trio.open_nursery() as nursery:
            # The follower holds two records of epoch 0, which the leader's log (epoch 1 from 0) never had.
            await parked_call(nursery, follower, follower_fetch(1, {0: 2}, last_fetched_epoch=0), answered)
            assert "response" in answered and not partition.has_parked_fetches
        data = answered["response"].responses[0].partitions[0]
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset) == (0, 0)

    run_with_broker(broker_config(tmp_path, broker_id=0, node_id=0), scenario)
