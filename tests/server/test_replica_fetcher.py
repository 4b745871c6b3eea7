"""Where a follower truncates after OffsetsForLeaderEpoch (KIP-101, KIP-279); the fetchers a
follower runs per leader."""

from types import SimpleNamespace

import trio
import trio.testing

from samsa.server.config.kafka_config import KafkaConfig
from samsa.server.replication.replica_fetcher import (PartitionFetchState, ReplicaFetcher, ReplicaFetcherManager,
                                                       truncation_offset)


def test_agreed_epoch_keeps_what_both_have():
    # Leader: epoch 3 ends at 10. Follower: epoch 3 ends at its log end, 12.
    assert truncation_offset(3, 10, (3, 12), log_end_offset=12, high_watermark=8) == (10, True)
    # The follower has less of the epoch than the leader: nothing to cut.
    assert truncation_offset(3, 10, (3, 9), log_end_offset=9, high_watermark=8) == (9, True)


def test_an_epoch_the_follower_never_had_cuts_to_the_end_of_its_epoch_below_and_asks_again():
    # The follower asked about its epoch 5; the leader's largest epoch <= 5 is 4, ending at 20.
    # The follower has no epoch 4: its epoch 3 ends at 15.
    assert truncation_offset(4, 20, (3, 15), log_end_offset=25, high_watermark=10) == (15, False)


def test_a_leader_without_the_epoch_leaves_the_committed_records():
    assert truncation_offset(-1, -1, (-1, -1), log_end_offset=25, high_watermark=10) == (10, True)


def test_a_follower_without_epochs_there_trusts_the_leaders_end():
    assert truncation_offset(2, 7, (-1, -1), log_end_offset=25, high_watermark=3) == (7, True)


def test_a_fetcher_left_without_partitions_is_replaced_when_one_comes():
    """A fenced leader epoch drops a partition from its fetcher, which ends once it has none; a
    partition later followed from the same leader gets a running fetcher, not that one."""
    started = []
    config = KafkaConfig({"num.replica.fetchers": "1", "replica.fetch.backoff.ms": "1000"})
    manager = ReplicaFetcherManager(SimpleNamespace(get=lambda topic, index: SimpleNamespace(leader_epoch=3),
                                                    local_id=2), config)
    manager.nursery = SimpleNamespace(start_soon=lambda run: started.append(run.__self__))
    manager.add_partition(("t", 0), 0, ("127.0.0.1", 9092))
    (first,) = started
    first.partitions.clear()  # as ReplicaFetcher._partition_error does for FENCED_LEADER_EPOCH
    trio.run(first.run)  # nothing to fetch: it ends
    manager.add_partition(("u", 0), 0, ("127.0.0.1", 9092))
    assert len(started) == 2 and ("u", 0) in started[1].partitions and not first.partitions


def test_a_leader_that_stops_answering_costs_the_connection_after_the_socket_timeout():
    """replica.socket.timeout.ms bounds every call of a fetcher (one deadline for all of them):
    a leader silent past it is given up, and the fetcher connects again after its backoff."""
    config = KafkaConfig({"replica.socket.timeout.ms": "30000", "replica.fetch.backoff.ms": "1000"})
    log_ = SimpleNamespace(leader_epoch_cache=SimpleNamespace(latest_epoch=2))
    partition = SimpleNamespace(leader_epoch=3, is_offline=False, log=log_, name="t-0")
    replicas = SimpleNamespace(get=lambda topic, index: partition, local_id=2)

    async def main():
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        listener.listen(2)
        fetcher = ReplicaFetcher(0, 0, listener.getsockname(), replicas, config)
        fetcher.add(("t", 0), PartitionFetchState(3, partition=partition))
        events = []

        async def silent_leader():
            for _ in range(2):
                sock, _ = await listener.accept()
                events.append(("accepted", trio.current_time()))
                while await sock.recv(1 << 16):  # the request (OffsetForLeaderEpoch), never answered
                    events.append(("asked", trio.current_time()))
                events.append(("closed", trio.current_time()))
            fetcher.stop()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(silent_leader)
            nursery.start_soon(fetcher.run)
        listener.close()
        return events

    events = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [kind for kind, _ in events] == ["accepted", "asked", "closed", "accepted", "asked", "closed"]
    times = [at for _, at in events]
    assert times[2] - times[1] == 30  # the timeout after the call
    assert times[3] - times[2] == 1  # the backoff
