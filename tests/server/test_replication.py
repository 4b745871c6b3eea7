"""Replication between in-process brokers on real sockets; the test plays the controller, calling
become_leader_or_follower on each broker as LeaderAndIsr would."""

from __future__ import annotations

import trio
import trio.testing

from loopback import Client, broker_config, fetch_request, one_batch, produce_request

from samsa.server.broker import Broker
from samsa.storage.checkpoints import OffsetCheckpointFile
from samsa.server.clock import wall_clock_ms
from samsa.server.replication.replica_manager import PartitionState
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

TOPIC = "replicated"
LAG_MS = 30_000


class Cluster:
    def __init__(self, tmp_path, size: int, nursery: trio.Nursery, **overrides) -> None:
        self.brokers = [Broker(broker_config(tmp_path / f"broker{i}", node_id=i, broker_id=i,
                                             replica_lag_time_max_ms=LAG_MS, replica_fetch_wait_max_ms=200,
                                             replica_fetch_backoff_ms=20, **overrides))
                        for i in range(size)]
        self.scopes = [trio.CancelScope() for _ in range(size)]
        self.stopped = [trio.Event() for _ in range(size)]
        self.isr_changes: list[tuple[int, tuple[int, ...]]] = []  # (leader, new ISR)
        self._isr_changed = trio.Event()
        self._nursery = nursery

    async def start(self) -> None:
        for broker, scope, stopped in zip(self.brokers, self.scopes, self.stopped):
            await self._nursery.start(self._serve, broker, scope, stopped)
            broker.services.replica_manager.create_topic(TOPIC, 1, {"min.insync.replicas": "2"})
            broker.services.replica_manager.isr_change_listener = (
                lambda partition, change, broker_id=broker.node_id: self._record_isr_change(broker_id, partition, change))

    def _record_isr_change(self, leader: int, partition, change) -> None:
        """The controller's part: every proposed ISR change is taken at once."""
        assert partition.isr_change_committed(change, partition.leader_epoch, change.isr, partition.partition_epoch + 1)
        self.isr_changes.append((leader, change.isr))
        self._isr_changed.set()
        self._isr_changed = trio.Event()

    async def isr_change(self, leader: int, isr: tuple[int, ...], timeout: float = 10) -> None:
        """Until `leader` has reported the ISR `isr` (as it would to ZooKeeper)."""
        with trio.fail_after(timeout):
            while (leader, isr) not in self.isr_changes:
                await self._isr_changed.wait()

    @staticmethod
    async def _serve(broker: Broker, scope: trio.CancelScope, stopped: trio.Event,
                     task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            with scope:
                await broker.run(task_status=task_status)
        finally:
            stopped.set()

    async def stop(self, broker_id: int) -> None:
        """Stop the broker and wait until it has shut down (its fetchers are gone)."""
        self.scopes[broker_id].cancel()
        await self.stopped[broker_id].wait()

    def port(self, broker_id: int) -> int:
        return self.brokers[broker_id].endpoints[0].port

    def elect(self, leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], on=None) -> None:
        """LeaderAndIsr for the topic's partition 0 to `on` (default: every replica)."""
        state = PartitionState(TOPIC, 0, leader, epoch, isr, epoch, replicas)
        addresses = {b.node_id: ("127.0.0.1", b.endpoints[0].port) for b in self.brokers}
        for broker_id in (replicas if on is None else on):
            errors = self.brokers[broker_id].services.replica_manager.become_leader_or_follower([state], addresses)
            assert errors == {(TOPIC, 0): ErrorCode.NONE}

    async def log_end_offset(self, broker_id: int, offset: int, timeout: float = 10) -> None:
        """Until the broker's log reaches `offset` (an append wakes what waits for the log end, as a
        follower's fetch does)."""
        partition = self.partition(broker_id)
        with trio.fail_after(timeout):
            while partition.log.log_end_offset < offset:
                appended = trio.Event()
                partition.park(appended, on_log_end=True)
                await appended.wait()

    async def leader_has_seen(self, leader: int, follower: int, offset: int, timeout: float = 10) -> None:
        """Until the leader knows the follower's log reaches `offset`: its next fetch tells. No event
        marks that fetch (the high watermark need not move), so this looks every few milliseconds."""
        state = self.partition(leader).leader_state
        with trio.fail_after(timeout):
            while state.followers[follower].log_end_offset < offset:
                await trio.sleep(0.005)

    def log(self, broker_id: int):
        return self.brokers[broker_id].services.replica_manager.get(TOPIC, 0).log

    def log_bytes(self, broker_id: int) -> bytes:
        return b"".join(segment.log.read_bytes() for segment in self.log(broker_id).segments)

    def partition(self, broker_id: int):
        return self.brokers[broker_id].services.replica_manager.get(TOPIC, 0)


async def produce(port: int, values: list[bytes], acks: int = -1):
    client = await Client.connect(port)
    response = await client.call(produce_request(TOPIC, one_batch(values), acks=acks), 9)
    return response.responses[0].partition_responses[0]


async def replicate_one_record_then_stop_the_follower(cluster: Cluster) -> None:
    cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
    assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
    await cluster.stop(1)


def run_cluster(tmp_path, size: int, scenario, **overrides) -> None:
    async def main():
        async with trio.open_nursery() as nursery:
            cluster = Cluster(tmp_path, size, nursery, **overrides)
            await cluster.start()
            await scenario(cluster)
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_acks_all_returns_once_every_follower_has_the_same_bytes_at_the_same_offsets(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        for i in range(3):
            answer = await produce(cluster.port(0), [b"a%d" % i, b"b%d" % i])
            assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2 * i)
        assert cluster.log(0).high_watermark == 6
        assert cluster.log_bytes(1) == cluster.log_bytes(2) == cluster.log_bytes(0)
        assert cluster.log(1).leader_epoch_cache.entries == [(1, 0)]
        # Producing to a follower: it is not the leader; so is consuming from one before Fetch v11
        # (from v11 a follower serves consumers: KIP-392, test_replica_selection.py).
        assert (await produce(cluster.port(1), [b"x"])).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        client = await Client.connect(cluster.port(1))
        fetched = await client.call(fetch_request(TOPIC, 0), 10)
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run_cluster(tmp_path, 3, scenario)


def test_followers_fetch_through_incremental_fetch_sessions(tmp_path):
    """KIP-227: a follower's first fetch opens a session on the leader; its later fetches name only
    the partitions that moved, and records still arrive through it."""
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        sessions = cluster.brokers[0].fetch_sessions.sessions
        assert len(sessions) == 2  # one per follower
        assert all(list(s.partitions) == [(TOPIC, 0)] and s.epoch > 1 for s in sessions.values())
        answer = await produce(cluster.port(0), [b"b", b"c"])
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 1)
        await cluster.log_end_offset(1, 3)
        await cluster.log_end_offset(2, 3)
        assert cluster.log_bytes(1) == cluster.log_bytes(2) == cluster.log_bytes(0)

    run_cluster(tmp_path, 3, scenario)


def test_consumers_read_up_to_the_high_watermark(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1), on=(0,))  # broker 1 does not follow yet
        answer = await produce(cluster.port(0), [b"v"], acks=1)
        assert answer.error_code == ErrorCode.NONE
        client = await Client.connect(cluster.port(0))
        data = (await client.call(fetch_request(TOPIC, 0), 12)).responses[0].partitions[0]
        assert (data.high_watermark, len(data.records)) == (0, 0)
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1), on=(1,))
        data = (await client.call(fetch_request(TOPIC, 0, max_wait_ms=5000, min_bytes=1), 12)).responses[0]
        assert data.partitions[0].high_watermark == 1
        assert len(data.partitions[0].records) > 0

    run_cluster(tmp_path, 2, scenario)


def test_a_stopped_follower_leaves_the_isr_and_acks_all_needs_min_insync_replicas(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        await cluster.stop(2)
        assert (await produce(cluster.port(0), [b"b"], acks=1)).error_code == ErrorCode.NONE
        await cluster.log_end_offset(1, 2)  # broker 1 has it, broker 2 not
        await cluster.leader_has_seen(0, follower=1, offset=2)
        leader = cluster.brokers[0].services.replica_manager
        leader.maybe_shrink_isrs(wall_clock_ms() + LAG_MS // 2)
        assert cluster.partition(0).isr == (0, 1, 2)  # not yet lagging for the lag time
        later = wall_clock_ms() + LAG_MS + 1000
        leader.maybe_shrink_isrs(later)
        assert cluster.partition(0).isr == (0, 1)
        assert cluster.isr_changes == [(0, (0, 1))]
        # The leader's clock is past the lag time from now on: broker 2 no longer counts as caught up.
        cluster.partition(0).clock_ms = lambda: later
        assert (await produce(cluster.port(0), [b"c"])).error_code == ErrorCode.NONE  # 2 in sync: enough
        await cluster.stop(1)
        assert (await produce(cluster.port(0), [b"d"], acks=1)).error_code == ErrorCode.NONE
        leader.maybe_shrink_isrs(wall_clock_ms() + LAG_MS + 1000)
        assert cluster.partition(0).isr == (0,)
        answer = await produce(cluster.port(0), [b"e"])
        assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert cluster.log(0).log_end_offset == 4  # refused before the append
        # Kafka 3.9: under min.insync.replicas the high watermark stays (d is not committed).
        assert cluster.log(0).high_watermark == 3

    run_cluster(tmp_path, 3, scenario)


def test_min_insync_replicas_is_capped_at_the_replica_count(tmp_path):
    """Kafka 4.4's effectiveMinIsr: a partition of one replica takes acks=all produces although its
    topic's min.insync.replicas is 2, and its high watermark moves."""
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0,), replicas=(0,), on=(0,))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        assert cluster.log(0).high_watermark == 1

    run_cluster(tmp_path, 2, scenario)


def test_acks_all_waiting_for_a_follower_that_stopped_times_out(tmp_path):
    async def scenario(cluster: Cluster):
        await replicate_one_record_then_stop_the_follower(cluster)
        client = await Client.connect(cluster.port(0))
        request = produce_request(TOPIC, one_batch([b"b"]), acks=-1)
        request.timeout_ms = 300
        answer = (await client.call(request, 9)).responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert cluster.log(0).log_end_offset == 2  # appended all the same, as Kafka does

    run_cluster(tmp_path, 2, scenario)


def test_an_acks_all_produce_waiting_for_its_isr_lets_the_connections_next_one_append(tmp_path):
    """server/network/in_order_responses.py: the second produce appends while the first waits for
    a stopped follower (Kafka would read it only once the first is answered); a ListOffsets behind
    them is handled once they are answered, as in Kafka (it sees the high watermark past both);
    the answers come in request order."""
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        await cluster.stop(2)
        client = await Client.connect(cluster.port(0))
        for value in (b"b", b"c"):
            request = produce_request(TOPIC, one_batch([value]), acks=-1)
            request.timeout_ms = 60_000  # beyond the fail_afters below: only the ISR's shrinking answers them
            await client.send(request, 9)
        ListOffsets = request_class(ApiKey.LIST_OFFSETS)
        await client.send(ListOffsets(replica_id=-1, isolation_level=0, topics=[ListOffsets.ListOffsetsTopic(
            name=TOPIC, partitions=[ListOffsets.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
        await cluster.log_end_offset(0, 3)  # both appended, the first still unanswered
        await cluster.leader_has_seen(0, follower=1, offset=3)  # broker 1 stays in the ISR
        later = wall_clock_ms() + LAG_MS + 1000
        # From now on the leader's clock is past the lag time: broker 2 no longer counts as caught up.
        cluster.partition(0).clock_ms = lambda: later
        cluster.brokers[0].services.replica_manager.maybe_shrink_isrs(later)
        with trio.fail_after(10):
            answers = [(await client.receive()).responses[0].partition_responses[0] for _ in range(2)]
            latest = (await client.receive()).topics[0].partitions[0]
        assert [(a.error_code, a.base_offset) for a in answers] == [(ErrorCode.NONE, 1), (ErrorCode.NONE, 2)]
        assert (latest.error_code, latest.offset) == (ErrorCode.NONE, 3)

    run_cluster(tmp_path, 3, scenario)


def test_a_leader_re_elected_or_whose_zookeeper_session_expired_acknowledges_what_the_isr_has(tmp_path):
    """As Kafka's: the session's expiry changes nothing the broker leads, and a LeaderAndIsr that
    re-elects it at a later epoch (the controller dropped a follower) leaves its log as it is: an
    acks=all produce waiting meanwhile is acknowledged once the ISR has its records, never answered
    NOT_LEADER_OR_FOLLOWER (an idempotent producer would take them for not written and, its epoch
    bumped, write them again); produces and fetches go on."""
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1, 2), replicas=(0, 1, 2))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        await cluster.stop(2)
        async with trio.open_nursery() as nursery:
            answers = []

            async def waiting_produce():
                answers.append(await produce(cluster.port(0), [b"b"]))

            nursery.start_soon(waiting_produce)
            await cluster.log_end_offset(1, 2)  # appended and replicated to broker 1, waiting for broker 2
            cluster.brokers[0].zookeeper_session_lost()
            await cluster.leader_has_seen(0, 1, 2)
            assert not answers
            cluster.elect(leader=0, epoch=2, isr=(0, 1), replicas=(0, 1, 2), on=(0, 1))
        assert (answers[0].error_code, answers[0].base_offset) == (ErrorCode.NONE, 1)
        assert (await produce(cluster.port(0), [b"c"], acks=1)).error_code == ErrorCode.NONE
        client = await Client.connect(cluster.port(0))
        data = (await client.call(fetch_request(TOPIC, 0), 12)).responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE

    run_cluster(tmp_path, 3, scenario)


def test_an_acks_all_produce_appended_before_the_leader_followed_is_not_acknowledged_after_it_leads_again(tmp_path):
    """Between the append and the answer the broker followed (and may have truncated the records),
    then led again: NOT_LEADER_OR_FOLLOWER, as Kafka answers the moment it follows."""
    async def scenario(cluster: Cluster):
        await replicate_one_record_then_stop_the_follower(cluster)
        partition = cluster.partition(0)
        async with trio.open_nursery() as nursery:
            answers = []

            async def waiting_produce():
                answers.append(await produce(cluster.port(0), [b"b"]))

            nursery.start_soon(waiting_produce)
            await cluster.log_end_offset(0, 2)
            # Both LeaderAndIsr at once: the waiting produce sees only the second.
            cluster.elect(leader=1, epoch=2, isr=(0, 1), replicas=(0, 1), on=(0,))
            cluster.elect(leader=0, epoch=3, isr=(0,), replicas=(0, 1), on=(0,))
            assert partition.is_leader
        assert answers[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run_cluster(tmp_path, 2, scenario)


def test_a_new_leader_answers_an_idempotent_producers_retry_as_a_duplicate(tmp_path):
    """The follower rebuilt the producer's sequence state from the batches it fetched: the batch
    the old leader appended (and died before answering) comes again to the new leader, which
    answers it with its offsets and writes nothing; the next sequence is taken."""
    from samsa.wire import records

    def idempotent(values: list[bytes], sequence: int) -> bytes:
        return records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate(values)],
                                   producer_id=7, producer_epoch=0, base_sequence=sequence)

    async def send(port: int, batch: bytes):
        client = await Client.connect(port)
        return (await client.call(produce_request(TOPIC, batch, acks=-1), 9)).responses[0].partition_responses[0]

    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
        assert (await produce(cluster.port(0), [b"plain"])).error_code == ErrorCode.NONE
        first = idempotent([b"a", b"b"], 0)
        assert (answer := await send(cluster.port(0), first)).error_code == ErrorCode.NONE and answer.base_offset == 1
        await cluster.log_end_offset(1, 3)
        cluster.elect(leader=1, epoch=2, isr=(0, 1), replicas=(0, 1))
        again = await send(cluster.port(1), first)
        assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 1)
        assert cluster.log(1).log_end_offset == 3  # nothing written twice
        after = await send(cluster.port(1), idempotent([b"c"], 2))
        assert (after.error_code, after.base_offset) == (ErrorCode.NONE, 3)
        gap = await send(cluster.port(1), idempotent([b"e"], 9))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

    run_cluster(tmp_path, 2, scenario)


def test_a_follower_refused_by_its_leader_backs_off(tmp_path):
    """A leader that has not heard of the follower's epoch yet refuses every OffsetsForLeaderEpoch
    (UNKNOWN_LEADER_EPOCH): the follower asks again replica.fetch.backoff.ms (20 ms here) later,
    not in a busy loop."""
    async def scenario(cluster: Cluster):
        leader = cluster.brokers[1].services.replica_manager
        asked = []
        get = leader.get
        leader.get = lambda topic, index: asked.append(trio.current_time()) or get(topic, index)
        cluster.elect(leader=1, epoch=1, isr=(0, 1), replicas=(0, 1), on=(0,))  # broker 1 not told
        await trio.sleep(0.5)
        assert 3 <= len(asked) <= 40, len(asked)

    run_cluster(tmp_path, 2, scenario)


def test_the_old_leader_truncates_its_divergent_records_when_it_follows_the_new_one(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
        assert (await produce(cluster.port(0), [b"a", b"b"])).error_code == ErrorCode.NONE
        assert (await produce(cluster.port(0), [b"c"])).error_code == ErrorCode.NONE
        # The controller elects broker 1; broker 0 has not heard yet and takes a write of its own.
        cluster.elect(leader=1, epoch=2, isr=(1,), replicas=(0, 1), on=(1,))
        assert (await produce(cluster.port(0), [b"lost1", b"lost2"], acks=1)).error_code == ErrorCode.NONE
        assert cluster.log(0).log_end_offset == 5
        assert (await produce(cluster.port(1), [b"new"], acks=1)).error_code == ErrorCode.NONE
        # A stale client's view of the epoch is fenced at the new leader.
        client = await Client.connect(cluster.port(1))
        stale = fetch_request(TOPIC, 0)
        stale.topics[0].partitions[0].current_leader_epoch = 1
        data = (await client.call(stale, 12)).responses[0].partitions[0]
        assert data.error_code == ErrorCode.FENCED_LEADER_EPOCH
        # A follower whose last fetched epoch ends earlier on the leader is told where (KIP-595's
        # diverging epoch, which Kafka followers rely on) instead of getting records.
        follower_fetch = fetch_request(TOPIC, 5)
        follower_fetch.replica_id = 0
        follower_fetch.topics[0].partitions[0].current_leader_epoch = 2
        follower_fetch.topics[0].partitions[0].last_fetched_epoch = 1
        data = (await client.call(follower_fetch, 12)).responses[0].partitions[0]
        assert data.error_code == ErrorCode.NONE
        assert (data.diverging_epoch.epoch, data.diverging_epoch.end_offset, len(data.records)) == (1, 3, 0)
        cluster.elect(leader=1, epoch=2, isr=(1,), replicas=(0, 1), on=(0,))
        # Broker 0 truncates to offset 3, then fetches; once it is back in the ISR acks=all returns.
        await cluster.isr_change(1, (1, 0))
        assert (await produce(cluster.port(1), [b"after"])).error_code == ErrorCode.NONE
        assert cluster.log_bytes(0) == cluster.log_bytes(1)
        assert cluster.log(0).log_end_offset == 5
        assert cluster.log(0).leader_epoch_cache.entries == [(1, 0), (2, 3)]

    run_cluster(tmp_path, 2, scenario)



def offsets_for_leader_epoch(partitions: list[tuple[str, int, int, int]], replica_id: int = -1):
    """OffsetForLeaderEpoch for (topic, partition, current leader epoch, leader epoch)."""
    Request = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    topics: dict[str, list] = {}
    for topic, index, current, epoch in partitions:
        topics.setdefault(topic, []).append(Request.OffsetForLeaderPartition(
            partition=index, current_leader_epoch=current, leader_epoch=epoch))
    return Request(replica_id=replica_id, topics=[Request.OffsetForLeaderTopic(topic=t, partitions=p)
                                                  for t, p in topics.items()])


def test_offset_for_leader_epoch_answers_where_an_epoch_ends(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0,), replicas=(0,))
        assert (await produce(cluster.port(0), [b"a", b"b"], acks=1)).error_code == ErrorCode.NONE
        cluster.elect(leader=0, epoch=3, isr=(0,), replicas=(0,))
        assert (await produce(cluster.port(0), [b"c"], acks=1)).error_code == ErrorCode.NONE
        client = await Client.connect(cluster.port(0))
        for version in (2, 3, 4):
            response = await client.call(offsets_for_leader_epoch([
                (TOPIC, 0, 3, 1), (TOPIC, 0, -1, 2), (TOPIC, 0, 3, 3), (TOPIC, 0, 2, 3), (TOPIC, 0, 4, 3),
                (TOPIC, 0, -1, 0), (TOPIC, 1, -1, 3), ("missing", 0, -1, 1)]), version)
            answers = [(p.error_code, p.leader_epoch, p.end_offset) for t in response.topics for p in t.partitions]
            assert answers == [
                (ErrorCode.NONE, 1, 2),  # epoch 1 ends where epoch 3 starts
                (ErrorCode.NONE, 1, 2),  # epoch 2 was never used: the largest below it
                (ErrorCode.NONE, 3, 3),  # the latest epoch ends at the log end offset
                (ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
                (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
                (ErrorCode.NONE, 0, 0),  # older than anything known: the log starts with the next epoch
                (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ]

    run_cluster(tmp_path, 1, scenario)


def test_the_replication_checkpoint_holds_the_high_watermark_not_the_log_end(tmp_path):
    async def scenario(cluster: Cluster):
        await replicate_one_record_then_stop_the_follower(cluster)
        assert (await produce(cluster.port(0), [b"b", b"c"], acks=1)).error_code == ErrorCode.NONE
        broker = cluster.brokers[0]
        await trio.to_thread.run_sync(broker.services.log_manager.checkpoint)
        data_dir = broker.log_dirs[0]
        assert OffsetCheckpointFile(data_dir / "replication-offset-checkpoint").read()[(TOPIC, 0)] == 1
        assert (data_dir / "replication-offset-checkpoint").read_text().splitlines()[:2] == ["0", "1"]
        epochs = data_dir / f"{TOPIC}-0" / "leader-epoch-checkpoint"
        assert epochs.read_text() == "0\n1\n1 0\n"

    run_cluster(tmp_path, 2, scenario)


def test_a_follower_behind_the_leaders_log_start_starts_over_there(tmp_path):
    async def scenario(cluster: Cluster):
        # The leader alone in the ISR: with min.insync.replicas=2 its high watermark would not move (Kafka 3.9).
        cluster.brokers[0].services.replica_manager.update_topic_configs(TOPIC, {"min.insync.replicas": "1"})
        cluster.elect(leader=0, epoch=1, isr=(0,), replicas=(0, 1), on=(0,))
        assert (await produce(cluster.port(0), [b"a", b"b", b"c"], acks=1)).error_code == ErrorCode.NONE
        assert (await produce(cluster.port(0), [b"d"], acks=1)).error_code == ErrorCode.NONE
        cluster.log(0).delete_records(3)
        cluster.elect(leader=0, epoch=1, isr=(0,), replicas=(0, 1), on=(1,))
        await cluster.isr_change(0, (0, 1))  # caught up, so back in the ISR
        follower = cluster.log(1)
        assert (follower.log_start_offset, follower.log_end_offset) == (3, 4)
        assert follower.read(3, 1 << 20).records.read_bytes() == cluster.log(0).read(3, 1 << 20).records.read_bytes()
        # DeleteRecords at the leader: the follower's log start follows with the next fetch.
        assert (await produce(cluster.port(0), [b"e"])).error_code == ErrorCode.NONE
        cluster.log(0).delete_records(4)
        assert (await produce(cluster.port(0), [b"f"])).error_code == ErrorCode.NONE
        await cluster.log_end_offset(1, 6)
        assert follower.log_start_offset == 4

    run_cluster(tmp_path, 2, scenario)


def test_stop_replica_stops_fetching_and_leading_and_may_delete_the_log(tmp_path):
    async def scenario(cluster: Cluster):
        cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
        assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
        follower = cluster.brokers[1].services.replica_manager
        assert follower.fetchers.fetch_state((TOPIC, 0)) is not None
        assert follower.stop_replicas({(TOPIC, 0): (-1, False)}) == {(TOPIC, 0): ErrorCode.NONE}
        assert follower.fetchers.fetch_state((TOPIC, 0)) is None
        assert cluster.log(1).log_end_offset == 1  # kept
        leader = cluster.brokers[0].services.replica_manager
        assert leader.stop_replicas({(TOPIC, 0): (-1, True)}) == {(TOPIC, 0): ErrorCode.NONE}
        assert leader.get(TOPIC, 0) is None
        assert (await produce(cluster.port(0), [b"b"], acks=1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run_cluster(tmp_path, 2, scenario)


def test_a_follower_keeps_its_connection_through_long_polls_that_outlast_the_socket_timeout_together(tmp_path):
    """replica.socket.timeout.ms bounds each call of a fetcher, not their sum: long polls that
    come back empty, forty times the timeout in all, go through one connection and one session."""
    async def main():
        async with trio.open_nursery() as nursery:
            cluster = Cluster(tmp_path, 2, nursery, replica_socket_timeout_ms=1000)
            await cluster.start()
            cluster.elect(leader=0, epoch=1, isr=(0, 1), replicas=(0, 1))
            await trio.sleep(40)  # long polls of replica.fetch.wait.max.ms (200 ms), nothing to fetch
            (session,) = cluster.brokers[0].fetch_sessions.sessions.values()
            assert session.epoch > 150
            assert (await produce(cluster.port(0), [b"a"])).error_code == ErrorCode.NONE
            await cluster.log_end_offset(1, 1)
            assert len(cluster.brokers[0].fetch_sessions.sessions) == 1
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
