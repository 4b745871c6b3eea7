"""ShareFetch and ShareAcknowledge end to end over loopback (KIP-932): a broker (share.version
finalized by default), a persister kept in memory (share_helpers), and a
raw client that is a share consumer by hand. Kafka's ShareFetch asks nothing of the group
coordinator (a member id is the session's key), so the member ids here are made up.

Lock expiry runs on the broker's event loop clock: those tests run on trio's MockClock and jump it."""

from __future__ import annotations

import contextlib
import time
import uuid
from types import SimpleNamespace

import trio
import trio.testing

from samsa.coordinator.share_state import RecordState
from samsa.server.security.acl_admin import store_acls
from samsa.server.share.delayed_share_fetch import ShareFetchParams, delayed_share_fetch
from samsa.server.share.share_session_cache import TopicIdPartition
from samsa.storage.file_records import FileRecords
from samsa.server.security.authorizer import ALLOW, GROUP, READ, TOPIC, AclBinding, PatternType
from samsa.wire import records
from samsa.wire.errors import ErrorCode as E
from samsa.wire.protocol import ApiKey, request_class

from loopback import Client, broker_config, one_batch, produce_request, run_with_broker
from share_helpers import (
    ACCEPT, GAP, REJECT, RELEASE, RENEW, MemoryPersister, acquired, fetched_values, share_acknowledge, share_fetch,
)

GROUP_ID = "sg"
InitProducerId = request_class(ApiKey.INIT_PRODUCER_ID)
AddPartitions = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
EndTxn = request_class(ApiKey.END_TXN)
Produce = request_class(ApiKey.PRODUCE)
DeleteTopics = request_class(ApiKey.DELETE_TOPICS)
V = 2  # ShareFetch and ShareAcknowledge version, unless a test says


def run(tmp_path, scenario, *, clock=None, group_configs=None, **overrides) -> None:
    """A broker with topic `t` (one partition) whose share partitions persist in memory, and the
    share group GROUP_ID reading from the earliest offset; `scenario(env)`."""
    config = broker_config(tmp_path, **overrides)

    async def with_env(broker):
        manager = broker.services.share_partitions
        persister = MemoryPersister()
        manager.persister = persister
        broker.services.group_configs.update_group_config(
            GROUP_ID, {"share.auto.offset.reset": "earliest", **(group_configs or {})})
        broker.services.replica_manager.create_topic("t", 1, {}, 1)
        port = broker.endpoints[0].port
        env = SimpleNamespace(broker=broker, manager=manager, persister=persister, port=port,
                              topic_id=broker.services.metadata_cache.topics["t"].topic_id,
                              client=await Client.connect(port), clock=clock)
        await scenario(env)

    run_with_broker(config, with_env, clock)


async def produce(env, values: list[bytes], client=None) -> None:
    response = await (client or env.client).call(produce_request("t", one_batch(values)), 9)
    assert response.responses[0].partition_responses[0].error_code == E.NONE


async def fetch(env, member: str, epoch: int, client=None, version: int = V, **kwargs):
    return await (client or env.client).call(share_fetch(GROUP_ID, member, epoch, env.topic_id, **kwargs), version)


def partition_of(response):
    assert response.error_code == E.NONE, E(response.error_code).name
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


def spso(env) -> int:
    [hosted] = env.manager.partitions.values()
    return hosted.state.start_offset


def persisted_complete(env) -> int:
    """Where the persisted state says delivery is complete up to: its start offset, and past it the
    ACKNOWLEDGED or ARCHIVED records that follow (the start offset a write carries is the one of
    when it was made, as in Kafka: it moves on with the next write)."""
    [state] = env.persister.states.values()
    end = state.start_offset
    for batch in state.state_batches:
        if batch.first_offset > end or batch.delivery_state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            break
        end = max(end, batch.last_offset + 1)
    return end


async def wait_loaded(env, topic: str = "t", group: str = GROUP_ID) -> None:
    """Until the share partition of `topic` has read its state (a fetch started loading it)."""
    [hosted] = [h for h in env.manager.partitions.values() if h.topic == topic and h.key.group_id == group]
    await hosted.initialized.wait()


async def settle() -> None:
    """Let the broker's tasks (lock expiry, background writes) run after a clock jump."""
    await trio.testing.wait_all_tasks_blocked()


def test_a_fetch_acquires_records_that_accept_acknowledges_for_good(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b", b"c"])
        response = await fetch(env, "m1", 0)
        assert response.acquisition_lock_timeout_ms == 30_000
        partition = partition_of(response)
        assert partition.error_code == E.NONE and acquired(partition) == [(0, 2, 1)]
        assert fetched_values(partition) == [(0, b"a"), (1, b"b"), (2, b"c")]
        # Nothing left to acquire: the next fetch of the session names no partition.
        response = await fetch(env, "m1", 1, max_wait_ms=0)
        assert response.error_code == E.NONE and response.responses == []
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 2, env.topic_id, {0: [(0, 2, [ACCEPT])]}), V)
        assert response.error_code == E.NONE and response.acquisition_lock_timeout_ms == 30_000
        assert [(p.partition_index, p.error_code) for t in response.responses for p in t.partitions] == [(0, E.NONE)]
        assert spso(env) == 3 and persisted_complete(env) == 3
        # Another member finds nothing: every record is acknowledged.
        other = await Client.connect(env.port)
        response = await fetch(env, "m2", 0, client=other, max_wait_ms=0)
        assert acquired(partition_of(response)) == []

    run(tmp_path, scenario)


def test_release_redelivers_with_the_delivery_count_raised_reject_and_gap_archive(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b", b"c", b"d"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 3, 1)]
        # Acknowledgements piggybacked on a fetch apply before it reads: the released record is
        # acquired again by the same fetch, one delivery more.
        response = await fetch(env, "m1", 1, acks={0: [(0, 3, [RELEASE, REJECT, GAP, ACCEPT])]})
        partition = partition_of(response)
        assert partition.acknowledge_error_code == E.NONE
        assert acquired(partition) == [(0, 0, 2)] and fetched_values(partition) == [(0, b"a")]
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 2, env.topic_id, {0: [(0, 0, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code == E.NONE
        assert spso(env) == 4 and persisted_complete(env) == 4

    run(tmp_path, scenario)


def test_acknowledging_records_not_acquired_or_invalid_batches_is_refused_per_partition(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 1, 1)]
        ack = env.client.call
        # Another member cannot acknowledge m1's records.
        other = await Client.connect(env.port)
        await fetch(env, "m2", 0, client=other, max_wait_ms=0)
        response = await other.call(share_acknowledge(GROUP_ID, "m2", 1, env.topic_id, {0: [(0, 1, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
        # Batches out of order, types per offset of the wrong length, unknown types, RENEW outside
        # a renew acknowledgement: INVALID_REQUEST (KafkaApis.validateAcknowledgementBatches).
        epoch = 1
        for batches in ([(1, 1, [ACCEPT]), (0, 0, [ACCEPT])], [(0, 1, [ACCEPT, ACCEPT, ACCEPT])], [(0, 1, [9])],
                        [(0, 1, [RENEW])], [(1, 0, [ACCEPT])], [(0, 1, [])]):
            response = await ack(share_acknowledge(GROUP_ID, "m1", epoch, env.topic_id, {0: batches}), V)
            assert response.responses[0].partitions[0].error_code == E.INVALID_REQUEST, batches
            epoch += 1
        # v1 knows no RENEW type at all.
        response = await ack(share_acknowledge(GROUP_ID, "m1", epoch, env.topic_id, {0: [(0, 1, [RENEW])]}), 1)
        assert response.responses[0].partitions[0].error_code == E.INVALID_REQUEST
        assert env.manager.partitions  # nothing of it changed m1's records
        response = await ack(share_acknowledge(GROUP_ID, "m1", epoch + 1, env.topic_id, {0: [(0, 1, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code == E.NONE

    run(tmp_path, scenario)


def test_an_expired_lock_redelivers_with_the_count_raised_until_the_limit_archives(tmp_path):
    clock = trio.testing.MockClock()

    async def scenario(env):
        await produce(env, [b"a", b"b"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 1, 1)]
        clock.jump(30.001)  # share.record.lock.duration.ms (group.share.record.lock.duration.ms: 30 s)
        await settle()
        other = await Client.connect(env.port)
        partition = partition_of(await fetch(env, "m2", 0, client=other))
        assert acquired(partition) == [(0, 1, 2)] and fetched_values(partition) == [(0, b"a"), (1, b"b")]
        # m1 is too late: its records went back (and to m2).
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 1, env.topic_id, {0: [(0, 1, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
        # share.delivery.count.limit is 2 here: the second expiry archives them.
        clock.jump(30.001)
        await settle()
        assert spso(env) == 2
        third = await Client.connect(env.port)
        assert acquired(partition_of(await fetch(env, "m3", 0, client=third, max_wait_ms=0))) == []
        assert persisted_complete(env) == 2

    run(tmp_path, scenario, clock=clock, group_configs={"share.delivery.count.limit": "2"})


def test_renew_keeps_the_records_past_their_first_lock(tmp_path):
    clock = trio.testing.MockClock()

    async def scenario(env):
        await produce(env, [b"a"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        clock.jump(20)
        # A renew acknowledgement (KIP-1222) fetches nothing, and must ask for nothing.
        response = await fetch(env, "m1", 1, renew=True, max_wait_ms=0, min_bytes=0, max_bytes=0, max_records=0,
                               acks={0: [(0, 0, [RENEW])]})
        assert response.error_code == E.NONE
        assert [(p.acknowledge_error_code, p.acquired_records) for p in response.responses[0].partitions] == [(E.NONE, [])]
        bad = await fetch(env, "m1", 2, renew=True, acks={0: [(0, 0, [RENEW])]})
        assert bad.error_code == E.INVALID_REQUEST
        clock.jump(15)  # 35 s after the fetch, 15 s after the renewal
        await settle()
        other = await Client.connect(env.port)
        assert partition_of(await fetch(env, "m2", 0, client=other, max_wait_ms=0)).acquired_records == []
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 2, env.topic_id, {0: [(0, 0, [RENEW])]},
                                                           renew=True), V)
        assert response.responses[0].partitions[0].error_code == E.NONE
        clock.jump(31)
        await settle()
        assert acquired(partition_of(await fetch(env, "m2", 1, client=other))) == [(0, 0, 2)]

    run(tmp_path, scenario, clock=clock)


def test_a_long_poll_is_woken_by_a_produce(tmp_path):
    async def scenario(env):
        producer = await Client.connect(env.port)
        assert (await fetch(env, "m1", 0, max_wait_ms=0)).responses == []  # the session opened, its partition loading
        await wait_loaded(env)
        result = {}

        async def poll():
            started = time.monotonic()
            result["response"] = await fetch(env, "m1", 1, max_wait_ms=20_000)
            result["waited"] = time.monotonic() - started

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked(0.05)
            await produce(env, [b"x"], client=producer)
        assert result["waited"] < 10
        partition = partition_of(result["response"])
        assert acquired(partition) == [(0, 0, 1)] and fetched_values(partition) == [(0, b"x")]

    run(tmp_path, scenario)


def test_sessions_epochs_and_their_errors(tmp_path):
    async def scenario(env):
        await produce(env, [b"a"])
        assert (await fetch(env, "m1", 1)).error_code == E.SHARE_SESSION_NOT_FOUND
        assert (await fetch(env, "m1", 0, acks={0: [(0, 0, [ACCEPT])]})).error_code == E.INVALID_REQUEST
        assert (await fetch(env, "", 0)).error_code == E.INVALID_REQUEST
        assert (await fetch(env, "m" * 37, 0)).error_code == E.INVALID_REQUEST
        ack = await env.client.call(share_acknowledge(GROUP_ID, "m1", 0, env.topic_id, {0: []}), V)
        assert ack.error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        assert (await fetch(env, "m1", 5)).error_code == E.INVALID_SHARE_SESSION_EPOCH
        # group.share.max.share.sessions is 1 here.
        other = await Client.connect(env.port)
        assert (await fetch(env, "m2", 0, client=other, max_wait_ms=0)).error_code == E.SHARE_SESSION_LIMIT_REACHED
        # Epoch -1 reads nothing and closes the session: m1's record goes back.
        response = await fetch(env, "m1", -1)
        assert response.error_code == E.NONE and response.responses == []
        assert (await fetch(env, "m1", 2)).error_code == E.SHARE_SESSION_NOT_FOUND
        assert acquired(partition_of(await fetch(env, "m2", 0, client=other))) == [(0, 0, 2)]

    run(tmp_path, scenario, group_share_max_share_sessions=1)


def test_incremental_sessions_add_forget_and_name_unknown_topics(tmp_path):
    async def scenario(env):
        env.broker.services.replica_manager.create_topic("u", 1, {}, 1)
        u_id = env.broker.services.metadata_cache.topics["u"].topic_id
        unknown = u_id.__class__(int=7)
        await produce(env, [b"a"])
        response = await env.client.call(share_fetch(GROUP_ID, "m1", 0, unknown), V)
        assert [(t.topic_id, p.error_code) for t in response.responses for p in t.partitions] == [
            (unknown, E.UNKNOWN_TOPIC_ID)]
        # Add t to the session and forget the unknown topic: t is read and answered.
        request = share_fetch(GROUP_ID, "m1", 1, env.topic_id)
        request.forgotten_topics_data = [type(request).ForgottenTopic(topic_id=unknown, partitions=[0])]
        partition = partition_of(await env.client.call(request, V))
        assert acquired(partition) == [(0, 0, 1)]
        # Add u; t is still read though the request does not name it. u, being loaded, has no
        # answer yet (Kafka names the partitions the fetch answered)...
        await produce(env, [b"b"])
        response = await env.client.call(share_fetch(GROUP_ID, "m1", 2, u_id, max_wait_ms=0), V)
        named = {t.topic_id: [acquired(p) for p in t.partitions] for t in response.responses}
        assert named == {env.topic_id: [[(1, 1, 1)]]}
        # ... and is named in the next response, once, as a partition the session added.
        await wait_loaded(env, "u")
        response = await env.client.call(share_fetch(GROUP_ID, "m1", 3, max_wait_ms=0), V)
        assert [(t.topic_id, [acquired(p) for p in t.partitions]) for t in response.responses] == [(u_id, [[]])]
        response = await env.client.call(share_fetch(GROUP_ID, "m1", 4, max_wait_ms=0), V)
        assert response.error_code == E.NONE and response.responses == []

    run(tmp_path, scenario)


def test_a_fetch_on_share_partitions_being_loaded_answers_the_first_one_loaded(tmp_path):
    """Kafka completes a delayed share fetch as soon as one of its share partitions is loaded (the
    loader's notification completes it at once): the first fetch of a session on two new share
    partitions, both holding records, answers the records of one partition, the next fetch the
    other's. librdkafka's 0179 counts on it (one partition's records per poll)."""
    Produce = request_class(ApiKey.PRODUCE)

    async def scenario(env):
        env.broker.services.replica_manager.create_topic("two", 2, {}, 1)
        two = env.broker.services.metadata_cache.topics["two"].topic_id
        for index in (0, 1):
            response = await env.client.call(Produce(acks=1, timeout_ms=5000, topic_data=[Produce.TopicProduceData(
                name="two", partition_data=[Produce.PartitionProduceData(
                    index=index, records=one_batch([b"v"] * 50))])]), 9)
            assert response.responses[0].partition_responses[0].error_code == E.NONE

        def answered(response) -> dict[int, list]:
            assert response.error_code == E.NONE
            return {p.partition_index: acquired(p) for t in response.responses for p in t.partitions if acquired(p)}

        first = answered(await env.client.call(share_fetch(GROUP_ID, "m1", 0, two, partitions=(1, 0)), V))
        [(loaded_first, ranges)] = first.items()
        assert ranges == [(0, 49, 1)]
        second = answered(await env.client.call(share_fetch(GROUP_ID, "m1", 1, two, max_wait_ms=0), V))
        assert second == {1 - loaded_first: [(0, 49, 1)]}

    run(tmp_path, scenario)


def test_a_closed_connection_releases_its_members_records(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b"])
        first = await Client.connect(env.port)
        assert acquired(partition_of(await fetch(env, "m1", 0, client=first))) == [(0, 1, 1)]
        await first.aclose()
        # m2's fetch waits for the records, which the broker releases as it sees m1's connection close.
        partition = partition_of(await fetch(env, "m2", 0, max_wait_ms=10_000))
        assert acquired(partition) == [(0, 1, 2)]

    run(tmp_path, scenario)


def test_read_committed_groups_never_get_aborted_records(tmp_path):
    async def scenario(env):
        client = env.client
        response = await client.call(InitProducerId(transactional_id="tx", transaction_timeout_ms=60_000), 4)
        pid, epoch = response.producer_id, response.producer_epoch
        response = await client.call(AddPartitions(
            v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitions.AddPartitionsToTxnTopic(name="t", partitions=[0])]), 3)
        assert response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == E.NONE
        batch = records.build_batch([records.Record(i, 0, None, v, []) for i, v in enumerate([b"x", b"y"])],
                                    producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True,
                                    base_timestamp=int(time.time() * 1000))
        response = await client.call(Produce(transactional_id="tx", acks=-1, timeout_ms=5000, topic_data=[
            Produce.TopicProduceData(name="t", partition_data=[Produce.PartitionProduceData(index=0, records=batch)])]),
            9)
        assert response.responses[0].partition_responses[0].error_code == E.NONE
        await produce(env, [b"committed"])  # offset 2, past the open transaction
        response = await client.call(EndTxn(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                            committed=False), 3)
        assert response.error_code == E.NONE
        # The fetch reads up to the last stable offset: it waits for the abort marker if need be.
        partition = partition_of(await fetch(env, "m1", 0, min_bytes=1, max_wait_ms=10_000))
        offsets = {o for first, last, _ in acquired(partition) for o in range(first, last + 1)}
        assert 2 in offsets and not offsets & {0, 1}
        assert fetched_values(partition) == [(2, b"committed")]

    run(tmp_path, scenario, group_configs={"share.isolation.level": "read_committed"})


def test_max_records_and_the_strict_record_limit(tmp_path):
    async def scenario(env):
        for values in ([b"a", b"b"], [b"c", b"d"], [b"e", b"f"]):
            await produce(env, values)
        # batch_optimized: max_records rounds up to the batch's end.
        assert acquired(partition_of(await fetch(env, "m1", 0, max_records=1))) == [(0, 1, 1)]
        # record_limit (KIP-1206): exactly max_records.
        partition = partition_of(await fetch(env, "m1", 1, max_records=1, acquire_mode=1))
        assert acquired(partition) == [(2, 2, 1)] and fetched_values(partition) == [(2, b"c")]

    run(tmp_path, scenario)


def test_a_failed_write_leaves_the_records_acquired(tmp_path):
    async def scenario(env):
        await produce(env, [b"a"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        env.persister.fail_writes_with = E.COORDINATOR_NOT_AVAILABLE
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 1, env.topic_id, {0: [(0, 0, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code != E.NONE
        env.persister.fail_writes_with = None
        response = await env.client.call(share_acknowledge(GROUP_ID, "m1", 2, env.topic_id, {0: [(0, 0, [ACCEPT])]}), V)
        assert response.responses[0].partitions[0].error_code == E.NONE
        assert spso(env) == 1

    run(tmp_path, scenario)


def test_a_new_share_partition_starts_at_the_latest_offset_by_default(tmp_path):
    async def scenario(env):
        await produce(env, [b"old"])
        request = share_fetch("latest", "m1", 0, env.topic_id, max_wait_ms=0)
        assert (await env.client.call(request, V)).responses == []
        await wait_loaded(env, group="latest")
        await produce(env, [b"new"])
        response = await env.client.call(share_fetch("latest", "m1", 1, env.topic_id), V)
        partition = partition_of(response)
        assert acquired(partition) == [(1, 1, 1)] and fetched_values(partition) == [(1, b"new")]

    run(tmp_path, scenario)


def test_a_topic_deleted_under_the_group(tmp_path):
    async def scenario(env):
        await produce(env, [b"a"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        response = await env.client.call(DeleteTopics(topic_names=["t"], timeout_ms=5000), 5)
        assert response.responses[0].error_code == E.NONE
        # The session still names the topic as it knew it: the partition is gone (Kafka answers the
        # same: its session's TopicIdPartition keeps the name).
        response = await fetch(env, "m1", 1, max_wait_ms=0)
        assert [p.error_code for t in response.responses for p in t.partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION]
        assert env.manager.partitions == {}

    run(tmp_path, scenario)


def test_a_partition_no_longer_led_here_names_its_leader(tmp_path):
    async def scenario(env):
        await produce(env, [b"a"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        replica = env.broker.services.replica_manager.get("t", 0)
        replica.stop_leading()
        other = await Client.connect(env.port)
        partition = partition_of(await fetch(env, "m2", 0, client=other, max_wait_ms=0))
        assert partition.error_code == E.NOT_LEADER_OR_FOLLOWER
        assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (-1, replica.leader_epoch)
        assert env.manager.partitions == {}  # m1's share partition went with the leadership

    run(tmp_path, scenario)


def test_share_fetch_needs_read_on_the_group_and_the_topic(tmp_path):
    def acl(resource_type, name):
        return AclBinding(resource_type, name, PatternType.LITERAL, "User:ANONYMOUS", "*", READ, ALLOW)

    async def scenario(env):
        services = env.broker.services
        await produce_as_super(env)
        assert (await fetch(env, "m1", 0)).error_code == E.GROUP_AUTHORIZATION_FAILED
        store_acls(services.metadata, services.authorizer, [acl(GROUP, GROUP_ID)])
        partition = partition_of(await fetch(env, "m1", 0))
        assert partition.error_code == E.TOPIC_AUTHORIZATION_FAILED
        store_acls(services.metadata, services.authorizer, [acl(GROUP, GROUP_ID), acl(TOPIC, "t")])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]

    async def produce_as_super(env):
        replica = env.broker.services.replica_manager.get("t", 0)
        replica.append(bytearray(one_batch([b"a"])))

    run(tmp_path, scenario, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer")




def test_the_record_states_the_persister_was_given(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 1, 1)]
        [state] = env.persister.states.values()
        # The acquisition is written before the records go out: AVAILABLE, with the delivery made.
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] == [
            (0, 1, RecordState.AVAILABLE, 1)]
        await env.client.call(share_acknowledge(GROUP_ID, "m1", 1, env.topic_id, {0: [(1, 1, [ACCEPT])]}), V)
        [state] = env.persister.states.values()
        # Offset 0 is still acquired (ACQUIRED is never persisted); 1 is acknowledged.
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches] == [
            (0, 0, RecordState.AVAILABLE, 1), (1, 1, RecordState.ACKNOWLEDGED, 1)]

    run(tmp_path, scenario)


def test_records_deleted_under_the_share_partition_move_its_start_offset(tmp_path):
    DeleteRecords = request_class(ApiKey.DELETE_RECORDS)

    async def scenario(env):
        assert (await fetch(env, "m1", 0, max_wait_ms=0)).responses == []
        await wait_loaded(env)  # its start offset: 0, the log's start
        await produce(env, [b"a", b"b", b"c"])
        response = await env.client.call(DeleteRecords(timeout_ms=5000, topics=[DeleteRecords.DeleteRecordsTopic(
            name="t", partitions=[DeleteRecords.DeleteRecordsPartition(partition_index=0, offset=2)])]), 2)
        assert response.topics[0].partitions[0].error_code == E.NONE
        # Reading from 0 is out of range: the share partition moves to the log's start, answering
        # nothing (the error is not the client's: an incremental response leaves the partition out)...
        assert (await fetch(env, "m1", 1)).responses == []
        assert spso(env) == 2
        # ... and the next fetch reads from there.
        partition = partition_of(await fetch(env, "m1", 2))
        assert acquired(partition) == [(2, 2, 1)] and fetched_values(partition) == [(2, b"c")]

    run(tmp_path, scenario)


def test_records_go_out_as_a_range_of_the_log_file_cut_to_the_acquired_batches(tmp_path):
    async def scenario(env):
        for values in ([b"a", b"b"], [b"c", b"d"], [b"e"]):
            await produce(env, values)
        tip = TopicIdPartition(env.topic_id, 0, "t")
        params = ShareFetchParams(max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20, max_records=3, batch_size=500,
                                  acquire_mode=1)
        result = await delayed_share_fetch(env.manager, GROUP_ID, "m1", params, [tip], 0, contextlib.nullcontext)
        data = result[tip]
        [(first, last, _)] = [tuple(a) for a in data.acquired_records]
        assert (first, last) == (0, 2)
        # A slice of the segment file (sent with sendfile), of the two batches holding offsets 0-2.
        assert isinstance(data.records, FileRecords)
        log_file = env.broker.services.replica_manager.get("t", 0).log.active_segment.log
        assert data.records.fd == log_file.fd and data.records.position == 0
        batches = [h for _, h in log_file.batch_headers_from(0)]
        assert data.records.size == batches[0].size + batches[1].size
        result = await delayed_share_fetch(env.manager, GROUP_ID, "m1", params, [tip], 1, contextlib.nullcontext)
        data = result[tip]
        assert {o for a in data.acquired_records for o in range(a.first_offset, a.last_offset + 1)} == {3, 4}
        assert data.records.position == batches[0].size and data.records.size == batches[1].size + batches[2].size

    run(tmp_path, scenario)


def test_a_member_leaving_its_group_releases_its_records_and_an_empty_group_leaves_memory(tmp_path):
    async def scenario(env):
        await produce(env, [b"a"])
        assert acquired(partition_of(await fetch(env, "m1", 0))) == [(0, 0, 1)]
        env.manager.on_member_leave(GROUP_ID, "m1")  # the share session cache's ShareGroupListener call
        assert env.manager.sessions.get(GROUP_ID, "m1") is None
        other = await Client.connect(env.port)
        assert acquired(partition_of(await fetch(env, "m2", 0, client=other))) == [(0, 0, 2)]
        env.manager.on_group_empty(GROUP_ID)
        assert env.manager.partitions == {}
        # Fetched again, the share partition reads the persisted state: the record, never
        # acknowledged, is delivered again (the persister saw the release's delivery count).
        partition = partition_of(await fetch(env, "m2", 1))
        assert [offsets[:2] for offsets in acquired(partition)] == [(0, 0)]

    run(tmp_path, scenario)


def test_members_of_a_share_group_fetch_what_they_are_assigned_and_a_leaving_member_acknowledges(tmp_path):
    """Through the group coordinator: ShareGroupHeartbeat makes the members and initializes the
    share partition through the persister; a group config sets where it starts. A member leaving
    the group keeps its share session, as in Kafka (the group coordinator does not touch it): a
    closing client (librdkafka's 0178) sends its leave heartbeat and its last acknowledgements, in
    a ShareAcknowledge closing the session, at once, and they must be taken in either order; what it
    did not acknowledge goes back as the session closes."""
    Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
    IncrementalAlterConfigs = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)
    m1, m2 = str(uuid.uuid4()), str(uuid.uuid4())

    async def scenario(env):
        env.broker.services.groups.persister = env.persister
        env.broker.services.group_configs.update_group_config(GROUP_ID, {})
        client = env.client
        alter = IncrementalAlterConfigs(resources=[IncrementalAlterConfigs.AlterConfigsResource(
            resource_type=32, resource_name=GROUP_ID, configs=[IncrementalAlterConfigs.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])], validate_only=False)
        assert (await client.call(alter, 1)).responses[0].error_code == E.NONE
        await produce(env, [b"a", b"b"])
        first = await client.call(Heartbeat(group_id=GROUP_ID, member_id=m1, member_epoch=0,
                                            subscribed_topic_names=["t"]), 1)
        epoch = first.member_epoch
        with trio.fail_after(10):
            while True:
                beat = await client.call(Heartbeat(group_id=GROUP_ID, member_id=m1, member_epoch=epoch), 1)
                epoch = beat.member_epoch
                if beat.assignment is not None and beat.assignment.topic_partitions:
                    break
                await trio.sleep(0.01)
        assert (GROUP_ID, env.topic_id, 0) in env.persister.states  # initialized by the group coordinator
        partition = partition_of(await fetch(env, m1, 0))
        assert acquired(partition) == [(0, 1, 1)] and fetched_values(partition) == [(0, b"a"), (1, b"b")]
        other = await Client.connect(env.port)
        await other.call(Heartbeat(group_id=GROUP_ID, member_id=m2, member_epoch=0, subscribed_topic_names=["t"]), 1)
        left = await client.call(Heartbeat(group_id=GROUP_ID, member_id=m1, member_epoch=-1), 1)
        assert left.error_code == E.NONE
        assert env.manager.sessions.get(GROUP_ID, m1) is not None
        closed = await client.call(share_acknowledge(GROUP_ID, m1, -1, env.topic_id, {0: [(0, 0, [ACCEPT])]}), V)
        assert closed.error_code == E.NONE
        assert [(p.partition_index, p.error_code) for t in closed.responses for p in t.partitions] == [(0, E.NONE)]
        assert env.manager.sessions.get(GROUP_ID, m1) is None
        assert acquired(partition_of(await fetch(env, m2, 0, client=other))) == [(1, 1, 2)]

    run(tmp_path, scenario, group_share_assignment_interval_ms=0)


# -- acquisitions are written: the delivery limit across a restart ---------------------------------


def states_of(state) -> list[tuple[int, int, int, int]]:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state.state_batches]


def test_acquired_records_go_out_once_their_delivery_count_is_written(tmp_path):
    async def scenario(env):
        await produce(env, [b"a", b"b"])
        env.persister.fail_writes_with = E.COORDINATOR_LOAD_IN_PROGRESS
        # The write failed: nothing delivered, and no error a client would take as fatal.
        partition = partition_of(await fetch(env, "m1", 0))
        assert (partition.error_code, acquired(partition), partition.records) == (E.NONE, [], b"")
        env.persister.fail_writes_with = None
        # Acquired again with the same delivery count: the failed one was not a delivery.
        partition = partition_of(await fetch(env, "m1", 1))
        assert acquired(partition) == [(0, 1, 1)] and fetched_values(partition) == [(0, b"a"), (1, b"b")]
        [(_, state)] = env.persister.writes
        assert states_of(state) == [(0, 1, RecordState.AVAILABLE, 1)]

    run(tmp_path, scenario)


def test_an_acknowledgement_and_an_acquisition_of_one_fetch_are_one_write(tmp_path):
    async def scenario(env):
        for value in (b"a", b"b", b"c"):
            await produce(env, [value])
        assert acquired(partition_of(await fetch(env, "m1", 0, max_records=1))) == [(0, 0, 1)]
        before = len(env.persister.writes)
        response = await fetch(env, "m1", 1, max_records=1, acks={0: [(0, 0, [ACCEPT])]})
        assert acquired(partition_of(response)) == [(1, 1, 1)]
        [(_, state)] = env.persister.writes[before:]
        assert states_of(state) == [(0, 0, RecordState.ACKNOWLEDGED, 1), (1, 1, RecordState.AVAILABLE, 1)]

    run(tmp_path, scenario)


class GatedPersister(MemoryPersister):
    """Writes wait for `gate` while it is set (a share coordinator slow to answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: trio.Event | None = None

    async def write_state(self, group_id, topic_id, partition, state) -> int:
        if self.gate is not None:
            await self.gate.wait()
        return await super().write_state(group_id, topic_id, partition, state)


def test_a_share_partitions_writes_reach_the_persister_in_the_order_made(tmp_path):
    async def scenario(env):
        persister = env.manager.persister = GatedPersister()
        await produce(env, [b"a"])
        await produce(env, [b"b"])
        await produce(env, [b"c"])
        clients = {m: await Client.connect(env.port) for m in ("m1", "m2", "m3")}
        assert acquired(partition_of(await fetch(env, "m1", 0, client=clients["m1"], max_records=1))) == [(0, 0, 1)]
        assert acquired(partition_of(await fetch(env, "m2", 0, client=clients["m2"], max_records=1))) == [(1, 1, 1)]
        persister.gate = gate = trio.Event()
        before = len(persister.writes)
        answers: dict[str, object] = {}

        async def call(member: str, request) -> None:
            answers[member] = await clients[member].call(request, V)

        async with trio.open_nursery() as nursery:
            # m1's acceptance is being written when m2 rejects and m3 acquires: those two go
            # together after it, and m3 gets its record only then.
            nursery.start_soon(call, "m1", share_acknowledge(GROUP_ID, "m1", 1, env.topic_id, {0: [(0, 0, [ACCEPT])]}))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call, "m2", share_acknowledge(GROUP_ID, "m2", 1, env.topic_id, {0: [(1, 1, [REJECT])]}))
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(call, "m3", share_fetch(GROUP_ID, "m3", 0, env.topic_id))
            await trio.testing.wait_all_tasks_blocked()
            assert answers == {}
            persister.gate = None
            gate.set()
        assert acquired(partition_of(answers["m3"])) == [(2, 2, 1)]
        assert [states_of(state) for _, state in persister.writes[before:]] == [
            [(0, 0, RecordState.ACKNOWLEDGED, 1)],
            [(1, 1, RecordState.ARCHIVED, 1), (2, 2, RecordState.AVAILABLE, 1)]]
        # Each with the start offset of when it was made: the second moves it at the next write.
        assert [state.start_offset for _, state in persister.writes[before:]] == [0, 0]

    run(tmp_path, scenario)


def test_a_restarted_broker_goes_on_counting_the_deliveries_it_made_before(tmp_path):
    """The share coordinator's own persister (__share_group_state): records acquired, the broker
    restarted before they are acknowledged, fetched again with their delivery count raised, and
    after one more restart archived at the limit (group.share.delivery.count.limit=2)."""
    config = broker_config(tmp_path, group_share_delivery_count_limit=2)
    answers = []

    async def share_fetch_once(broker, member: str, setup: bool = False):
        client = await Client.connect(broker.endpoints[0].port)
        if setup:
            broker.services.replica_manager.create_topic("t", 1, {}, 1)
        topic_id = broker.services.metadata_cache.topics["t"].topic_id
        if setup:
            assert await broker.services.persister.initialize_state(GROUP_ID, topic_id, 0, 0, 0) == E.NONE
            response = await client.call(produce_request("t", one_batch([b"a", b"b"])), 9)
            assert response.responses[0].partition_responses[0].error_code == E.NONE
        response = await client.call(share_fetch(GROUP_ID, member, 0, topic_id, max_wait_ms=500), V)
        answers.append(acquired(partition_of(response)))

    async def first(broker):
        await share_fetch_once(broker, "m1", setup=True)

    async def again(broker):
        await share_fetch_once(broker, "m2")

    run_with_broker(config, first)
    run_with_broker(config, again)
    run_with_broker(config, again)
    assert answers == [[(0, 1, 1)], [(0, 1, 2)], []]


def test_writes_sent_together_overlay_in_the_order_made():
    from samsa.coordinator.share_state import PersisterStateBatch as B
    from samsa.coordinator.share_state import SharePartitionState
    from samsa.server.share.share_partition_manager import overlay

    available, acknowledged, archived = RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
    first = SharePartitionState(1, 0, 3, [B(0, 9, available, 1)], 0)
    second = SharePartitionState(1, 0, 3, [B(2, 3, acknowledged, 1), B(9, 12, available, 2)], 2)
    third = SharePartitionState(1, 4, 3, [B(3, 3, archived, 1)], 3)
    state = overlay([first, second, third])
    assert (state.start_offset, state.delivery_complete_count) == (4, 3)
    assert states_of(state) == [(0, 1, available, 1), (2, 2, acknowledged, 1), (3, 3, archived, 1),
                                (4, 8, available, 1), (9, 12, available, 2)]
