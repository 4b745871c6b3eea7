"""The share coordinator in a real broker: FindCoordinator's SHARE keys and `__share_group_state`
created on first need with Kafka's configs, the five share state RPCs over a socket (with Kafka's
answers and CLUSTER_ACTION), the state read back after a restart, the persister
asking its own broker directly or another over the network, and pruning."""

from __future__ import annotations

import uuid

import trio
from loopback import Client, broker_config, create_topic_request, run_with_broker

from samsa.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, SharePartitionKey, coordinator_key
from samsa.coordinator.share_coordinator_records import read_record
from samsa.coordinator.share_state import PersisterStateBatch as B
from samsa.coordinator.share_state import SharePartitionState
from samsa.server.clock import wall_clock_ms
from samsa.server.coordinators.runtime import log_batches
from samsa.server.coordinators.share_service import ShareService
from samsa.server.share.persister import (
    DefaultStatePersister,
    delete_request,
    initialize_request,
    read_request,
    summary_request,
    write_request,
)
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

FindCoordinator = request_class(ApiKey.FIND_COORDINATOR)
ApiVersions = request_class(ApiKey.API_VERSIONS)

SHARE_KEY_TYPE = 2
STATE_APIS = {ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE, ApiKey.WRITE_SHARE_GROUP_STATE,
              ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY}
ACKNOWLEDGED, ARCHIVED = 2, 4



async def create_topic(client: Client, broker, name: str = "t", partitions: int = 2) -> uuid.UUID:
    response = await client.call(create_topic_request(name, partitions), 4)
    assert response.topics[0].error_code == ErrorCode.NONE
    return broker.services.metadata.topics[name].topic_id


def initialize(topic_id, partition, state_epoch=0, start_offset=0, group="g"):
    return initialize_request(group, topic_id, partition, state_epoch, start_offset)


def read(topic_id, partition, leader_epoch=0, group="g"):
    return read_request(group, topic_id, partition, leader_epoch)


def write(topic_id, partition, batches, start_offset=0, leader_epoch=0, state_epoch=0, delivery_complete_count=-1,
          group="g"):
    return write_request(group, topic_id, partition, SharePartitionState(
        state_epoch=state_epoch, start_offset=start_offset, leader_epoch=leader_epoch,
        delivery_complete_count=delivery_complete_count, state_batches=list(batches)))


def summary(topic_id, partition, group="g"):
    return summary_request(group, topic_id, partition, 0)


def delete(topic_id, partitions, group="g"):
    return delete_request(group, topic_id, partitions)


def only(response):
    [topic] = response.results
    [partition] = topic.partitions
    return partition


def batches(result) -> list[B]:
    return [B(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches]


def test_the_five_rpcs_over_a_socket_and_the_state_after_a_restart(tmp_path):
    config = broker_config(tmp_path)
    topic_ids = []

    async def first(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker)
        topic_ids.append(topic_id)
        # FindCoordinator v6 with a share key: this broker, and the topic created with Kafka's layout.
        key = coordinator_key(SharePartitionKey("g", topic_id, 0))
        response = await client.call(FindCoordinator(key_type=SHARE_KEY_TYPE, coordinator_keys=[key, "bad-key"]), 6)
        good, bad = response.coordinators
        assert (good.key, good.error_code, good.node_id, good.port) == (key, ErrorCode.NONE, broker.node_id,
                                                                        broker.endpoints[0].port)
        assert (bad.error_code, bad.node_id) == (ErrorCode.INVALID_REQUEST, -1)
        response = await client.call(FindCoordinator(key_type=SHARE_KEY_TYPE, coordinator_keys=[key]), 5)
        assert response.coordinators[0].error_code == ErrorCode.INVALID_REQUEST  # share keys need v6
        state_topic = broker.services.metadata.topics[SHARE_GROUP_STATE_TOPIC]
        assert state_topic.num_partitions == 50 and state_topic.is_internal
        assert state_topic.configs == {"cleanup.policy": "delete", "compression.type": "producer",
                                       "segment.bytes": "104857600", "min.insync.replicas": "2", "retention.ms": "-1"}

        assert only(await client.call(write(topic_id, 0, []), 1)).error_code == ErrorCode.INVALID_REQUEST
        result = only(await client.call(initialize(topic_id, 0, state_epoch=1, start_offset=5), 0))
        assert (result.partition, result.error_code, result.error_message) == (0, ErrorCode.NONE, None)
        result = only(await client.call(read(topic_id, 0, leader_epoch=3), 0))
        assert (result.error_code, result.state_epoch, result.start_offset, batches(result)) == (ErrorCode.NONE, 1,
                                                                                                 5, [])
        written = [B(5, 9, ACKNOWLEDGED, 1), B(10, 14, ARCHIVED, 5)]
        result = only(await client.call(write(topic_id, 0, written, start_offset=5, leader_epoch=3, state_epoch=1,
                                              delivery_complete_count=10), 1))
        assert result.error_code == ErrorCode.NONE
        result = only(await client.call(write(topic_id, 0, [], leader_epoch=2, state_epoch=1), 1))
        assert result.error_code == ErrorCode.FENCED_LEADER_EPOCH
        result = only(await client.call(summary(topic_id, 0), 1))
        assert (result.error_code, result.start_offset, result.leader_epoch, result.state_epoch,
                result.delivery_complete_count) == (ErrorCode.NONE, 5, 3, 1, 10)
        # Two partitions in one request, one of them never initialized.
        response = await client.call(delete(topic_id, [1, 0]), 0)
        assert [(p.partition, p.error_code) for p in response.results[0].partitions] == [(0, 0), (1, 0)]
        result = only(await client.call(read(topic_id, 0, leader_epoch=3), 0))
        assert result.error_code == ErrorCode.INVALID_REQUEST  # deleted
        assert only(await client.call(initialize(topic_id, 1, start_offset=-1), 0)).error_code == ErrorCode.NONE
        result = only(await client.call(write(topic_id, 1, written[:1], start_offset=-1), 1))
        assert result.error_code == ErrorCode.NONE
        # An unknown topic, and an empty group id (Kafka answers an empty response).
        assert only(await client.call(initialize(uuid.uuid4(), 0), 0)).error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (await client.call(read(topic_id, 0, group=""), 0)).results == []

    async def after_restart(broker):
        client = await Client.connect(broker.endpoints[0].port)
        [topic_id] = topic_ids
        result = only(await client.call(read(topic_id, 1, leader_epoch=0), 0))
        assert (result.error_code, result.start_offset, batches(result)) == (ErrorCode.NONE, -1,
                                                                             [B(5, 9, ACKNOWLEDGED, 1)])
        assert only(await client.call(read(topic_id, 0), 0)).error_code == ErrorCode.INVALID_REQUEST

    run_with_broker(config, first)
    run_with_broker(config, after_restart)




def test_cluster_action_is_required(tmp_path):
    config = broker_config(tmp_path, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          super_users="User:nobody")

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = uuid.uuid4()
        keys = [coordinator_key(SharePartitionKey("g", topic_id, p)) for p in (0, 1)]
        response = await client.call(FindCoordinator(key_type=SHARE_KEY_TYPE, coordinator_keys=keys), 6)
        assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
            (k, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, -1) for k in keys]
        response = await client.call(delete(topic_id, [0, 1]), 0)
        assert [(p.partition, p.error_code, p.error_message) for p in response.results[0].partitions] == [
            (p, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED.message) for p in (0, 1)]
        assert SHARE_GROUP_STATE_TOPIC not in broker.services.metadata.topics

    run_with_broker(config, scenario)


def test_the_persister_asks_its_own_broker_directly_and_another_over_the_network(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker, partitions=3)
        local = broker.services.persister
        # The persister's first call finds the coordinator, creating __share_group_state.
        assert await local.initialize_state("g", topic_id, 0, 1, 100) == ErrorCode.NONE
        state = SharePartitionState(state_epoch=1, start_offset=100, leader_epoch=0,
                                    state_batches=[B(100, 104, ACKNOWLEDGED, 1)], delivery_complete_count=5)
        assert await local.write_state("g", topic_id, 0, state) == ErrorCode.NONE
        # Another broker's persister reaches this one over the network (node id 99 is not this broker).
        node = broker.services.broker_info(broker.config.inter_broker_listener_name)

        async def coordinator_of(partition):
            return ErrorCode.NONE, node

        remote = DefaultStatePersister(99, broker.services.share_coordinator, coordinator_of)
        async with trio.open_nursery() as nursery:
            await nursery.start(remote.run)
            error, read_back = await remote.read_state("g", topic_id, 0, leader_epoch=2)
            assert error == ErrorCode.NONE and read_back == SharePartitionState(
                state_epoch=1, start_offset=100, leader_epoch=2, state_batches=[B(100, 104, ACKNOWLEDGED, 1)])
            assert await remote.write_state("g", topic_id, 0, SharePartitionState(
                1, 105, 2, [B(105, 109, ARCHIVED, 5)], 10)) == ErrorCode.NONE
            error, summary_ = await remote.read_summary("g", topic_id, 0, leader_epoch=2)
            assert error == ErrorCode.NONE and summary_ == SharePartitionState(1, 105, 2, [], 10)
            assert await remote.write_state("g", topic_id, 0, state) == ErrorCode.FENCED_LEADER_EPOCH
            assert await remote.initialize_state("g", topic_id, 1, 0, -1) == ErrorCode.NONE
            assert await remote.delete_state("g", topic_id, [0, 1, 2]) == {0: 0, 1: 0, 2: 0}
            assert await local.read_state("g", topic_id, 0, 2) == (ErrorCode.INVALID_REQUEST, None)
            assert await remote.write_state("", topic_id, 0, state) == ErrorCode.INVALID_REQUEST  # refused unsent
            nursery.cancel_scope.cancel()

    run_with_broker(broker_config(tmp_path), scenario)


def test_a_brokers_share_partitions_asked_meanwhile_go_in_one_request(tmp_path):
    """Writes of several share partitions to another broker at once: one WriteShareGroupState."""
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker, partitions=4)
        for partition in range(4):
            assert await broker.services.persister.initialize_state("g", topic_id, partition, 1, 0) == ErrorCode.NONE
        node = broker.services.broker_info(broker.config.inter_broker_listener_name)

        async def coordinator_of(partition):
            return ErrorCode.NONE, node

        def writes() -> int:
            return sum(c.count for c in broker.request_metrics.requests.values() if c.name == "WriteShareGroupState")

        remote = DefaultStatePersister(99, broker.services.share_coordinator, coordinator_of)
        errors: dict[int, int] = {}

        async def write_one(partition: int, leader_epoch: int) -> None:
            errors[partition] = await remote.write_state("g", topic_id, partition, SharePartitionState(
                1, 0, leader_epoch, [B(0, partition, ACKNOWLEDGED, 1)], partition + 1))

        async with trio.open_nursery() as nursery:
            await nursery.start(remote.run)
            before = writes()
            async with trio.open_nursery() as together:
                for partition in range(4):
                    together.start_soon(write_one, partition, 0)
            assert errors == dict.fromkeys(range(4), ErrorCode.NONE) and writes() == before + 1
            # Each partition its own answer (the fenced one alone), from one request again.
            await broker.services.persister.read_state("g", topic_id, 3, 5)
            async with trio.open_nursery() as together:
                for partition in range(4):
                    together.start_soon(write_one, partition, 1)
            assert errors == {0: ErrorCode.NONE, 1: ErrorCode.NONE, 2: ErrorCode.NONE,
                              3: ErrorCode.FENCED_LEADER_EPOCH} and writes() == before + 2
            for partition in range(3):
                error, state = await broker.services.persister.read_state("g", topic_id, partition, 1)
                assert error == ErrorCode.NONE and state.state_batches == [B(0, partition, ACKNOWLEDGED, 1)]
            nursery.cancel_scope.cancel()

    run_with_broker(broker_config(tmp_path), scenario)


def test_the_persister_retries_until_the_coordinator_is_found(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker)
        services = broker.services
        lookups = []
        unavailable = [2]  # the coordinator is not available for the first two lookups

        async def coordinator_of(partition):
            lookups.append(partition)
            if unavailable[0]:
                unavailable[0] -= 1
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            return await services.admin.coordinator(services, SHARE_GROUP_STATE_TOPIC, partition,
                                                    broker.config.inter_broker_listener_name)

        persister = DefaultStatePersister(broker.node_id, services.share_coordinator, coordinator_of, backoff_ms=1,
                                          backoff_max_ms=2)
        assert await persister.initialize_state("g", topic_id, 1, 0, 0) == ErrorCode.NONE
        assert len(lookups) == 3
        # A retriable answer from the coordinator (an unknown topic partition) five times: given up.
        lookups.clear()
        assert await persister.initialize_state("g", topic_id, 7, 0, 0) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert len(lookups) == 5
        # One that is not retriable: answered at once.
        lookups.clear()
        assert await persister.write_state("g", topic_id, 0, SharePartitionState(0, 0)) == ErrorCode.INVALID_REQUEST
        assert len(lookups) == 1

    run_with_broker(broker_config(tmp_path), scenario)


def test_pruning_keeps_only_what_the_state_needs(tmp_path):
    config = broker_config(tmp_path, share_coordinator_snapshot_update_records_per_snapshot="2")
    located = []

    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker, partitions=1)
        persister, service = broker.services.persister, broker.services.share_coordinator
        assert await persister.initialize_state("g", topic_id, 0, 0, 0) == ErrorCode.NONE
        for offset in range(6):
            state = SharePartitionState(0, 0, 0, [B(offset, offset, ACKNOWLEDGED, 1)])
            assert await persister.write_state("g", topic_id, 0, state) == ErrorCode.NONE
        index = service.partition_for(SharePartitionKey("g", topic_id, 0))
        log_ = broker.services.replica_manager.get(SHARE_GROUP_STATE_TOPIC, index).log
        kinds = ["S" if read_record(bytes(r.key), bytes(r.value)).snapshot else "U"
                 for _, records in log_batches(log_) for r in records]
        assert kinds == list("SUUSUUS")
        await service.prune()  # Kafka's prune job: up to the share partition's last snapshot
        assert log_.log_start_offset == 6
        located.append(topic_id)

    async def after_restart(broker):
        [topic_id] = located
        error, state = await broker.services.persister.read_state("g", topic_id, 0, 0)
        assert error == ErrorCode.NONE and state.state_batches == [B(0, 5, ACKNOWLEDGED, 1)]

    run_with_broker(config, scenario)
    run_with_broker(config, after_restart)


def test_in_a_cluster_partitions_are_coordinated_while_led_here(tmp_path):
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker)
        services = broker.services
        # Without a FindCoordinator first there is no __share_group_state: no coordinator (Kafka's answer).
        result = only(await client.call(initialize(topic_id, 0, start_offset=3), 0))
        assert result.error_code == ErrorCode.NOT_COORDINATOR
        assert await services.persister.initialize_state("g", topic_id, 0, 0, 3) == ErrorCode.NONE  # creates it
        index = services.share_coordinator.partition_for(SharePartitionKey("g", topic_id, 0))
        # The same log, coordinated as a broker of a ZooKeeper cluster coordinates it (the topics as
        # the image has them, standing in for the controller's metadata).
        service = ShareService(broker.config, services.metadata, services.replica_manager, trio.CapacityLimiter(1),
                               wall_clock_ms, True, cluster=services.metadata)
        async with trio.open_nursery() as nursery:
            await nursery.start(service.run)
            assert only(await service.read_state(read(topic_id, 0))).error_code == ErrorCode.NOT_COORDINATOR
            service.on_leadership_change([(index, 0)], [])
            assert service.partitions.loading == {index}
            while index not in service.partitions.owned:
                await trio.sleep(0.01)
            result = only(await service.read_state(read(topic_id, 0)))
            assert (result.error_code, result.start_offset) == (ErrorCode.NONE, 3)
            result = only(await service.write_state(write(topic_id, 0, [B(3, 4, ACKNOWLEDGED, 1)], start_offset=3)))
            assert result.error_code == ErrorCode.NONE
            # Led here again at a newer epoch than the log's leader: its writes are refused as Kafka's are.
            service.on_leadership_change([(index, 1)], [])
            result = only(await service.write_state(write(topic_id, 0, [], start_offset=3)))
            assert (result.error_code, result.error_message) == (
                ErrorCode.NOT_COORDINATOR,
                "Unable to write share group state: " + ErrorCode.NOT_LEADER_OR_FOLLOWER.message)
            service.on_leadership_change([], [(index, 1)])
            result = only(await service.read_state(read(topic_id, 0)))
            assert (result.error_code, result.error_message) == (
                ErrorCode.NOT_COORDINATOR, "Unable to read share group state: " + ErrorCode.NOT_COORDINATOR.message)
            nursery.cancel_scope.cancel()
        # What the cluster's coordinator wrote is in the log the broker's own shard replays.
        shard, _ = services.share_coordinator._load_partition(index, 0)
        assert shard.state_of(SharePartitionKey("g", topic_id, 0)).state_batches == (B(3, 4, ACKNOWLEDGED, 1),)

    run_with_broker(broker_config(tmp_path), scenario)


UpdateFeatures = request_class(ApiKey.UPDATE_FEATURES)


def share_version(level: int):
    return UpdateFeatures(feature_updates=[UpdateFeatures.FeatureUpdateKey(
        feature="share.version", max_version_level=level, upgrade_type=1 if level else 2)])


def test_at_share_version_0_the_rpcs_are_answered_and_the_periodic_jobs_stop(tmp_path):
    """As Kafka 4.4's broker: the state RPCs answer whatever share.version's level; the periodic
    jobs (cold snapshots, pruning) run only while it is finalized, anew when it comes back."""
    async def scenario(broker):
        client = await Client.connect(broker.endpoints[0].port)
        topic_id = await create_topic(client, broker)
        service = broker.services.share_coordinator
        assert service.periodic_jobs_running
        assert await broker.services.persister.initialize_state("g", topic_id, 0, 0, 4) == ErrorCode.NONE
        assert (await client.call(share_version(0), 1)).results[0].error_code == ErrorCode.NONE
        assert not service.periodic_jobs_running
        result = only(await client.call(read(topic_id, 0), 0))
        assert (result.error_code, result.start_offset) == (ErrorCode.NONE, 4)
        assert only(await client.call(write(topic_id, 0, [], start_offset=5), 1)).error_code == ErrorCode.NONE
        assert only(await client.call(summary(topic_id, 0), 1)).start_offset == 5
        assert (await client.call(share_version(1), 1)).results[0].error_code == ErrorCode.NONE
        assert service.periodic_jobs_running

    run_with_broker(broker_config(tmp_path), scenario)
