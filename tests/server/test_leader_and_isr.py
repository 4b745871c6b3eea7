"""LeaderAndIsr and StopReplica without a ZooKeeper (a broker made a cluster member by hand): Kafka's
fencing (broker epoch, one controller epoch shared with UpdateMetadata), the per-partition errors and
the response shapes by version, the log a new partition gets (its topic's overrides from
/config/topics, its topic id checked); and the AlterPartition requests the leader sends for ISR
changes. compat-tests/test_zookeeper_cluster.py has Kafka 3.9's controller send them."""

from __future__ import annotations

import threading
import uuid

from cluster_member import as_cluster_member as cluster_member
from loopback import Client, broker_config, one_batch, produce_request, run_with_broker

from samsa.coordinator.partition_leader import IsrChange
from samsa.server.replication.alter_partition_manager import AlterPartitionManager
from samsa.server.clock import wall_clock_ms
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class, response_class

LeaderAndIsr = request_class(ApiKey.LEADER_AND_ISR)
StopReplica = request_class(ApiKey.STOP_REPLICA)
UpdateMetadata = request_class(ApiKey.UPDATE_METADATA)
AlterPartitionResponse = response_class(ApiKey.ALTER_PARTITION)
TOPIC_ID = uuid.UUID("0b9a2e46-73a5-4b43-8d26-1f6f3c1e2a77")
OTHER_ID = uuid.UUID("5f0c9a1e-2222-4c5d-9e8f-0a1b2c3d4e5f")


class FakeZooKeeper:
    """What the handlers read of ZooKeeper: topic config overrides."""

    def __init__(self, topic_configs: dict[str, dict[str, str]]) -> None:
        self.topic_configs = topic_configs

    async def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        assert entity_type == "topics"
        return self.topic_configs.get(name, {})

    async def close(self) -> None:
        pass


def as_cluster_member(broker, broker_epoch: int, topic_configs=None) -> None:
    cluster_member(broker, FakeZooKeeper(topic_configs or {}), broker_epoch)


def state(index, leader, isr, replicas, leader_epoch=0, partition_epoch=0, topic="t"):
    return LeaderAndIsr.LeaderAndIsrPartitionState(
        topic_name=topic, partition_index=index, controller_epoch=1, leader=leader, leader_epoch=leader_epoch,
        isr=list(isr), partition_epoch=partition_epoch, replicas=list(replicas), is_new=True)


def leader_and_isr(states, controller_epoch=1, broker_epoch=-1, topic_id=TOPIC_ID):
    topics: dict[str, list] = {}
    for s in states:
        topics.setdefault(s.topic_name, []).append(s)
    return LeaderAndIsr(controller_id=7, controller_epoch=controller_epoch, broker_epoch=broker_epoch, type_=0,
                        topic_states=[LeaderAndIsr.LeaderAndIsrTopicState(topic_name=t, topic_id=topic_id,
                                                                          partition_states=ps)
                                      for t, ps in topics.items()])


def errors_v5(response) -> dict[tuple[uuid.UUID, int], int]:
    return {(t.topic_id, p.partition_index): p.error_code for t in response.topics for p in t.partition_errors}


def test_leader_and_isr_fencing_errors_and_new_logs(tmp_path):
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=100, topic_configs={"t": {"retention.ms": "60000"}})
        port = samsa.endpoints[0].port
        client = await Client.connect(port)
        api_versions = await client.call(request_class(ApiKey.API_VERSIONS)(), 0)
        assert {k.api_key: (k.min_version, k.max_version) for k in api_versions.api_keys
                if k.api_key in (4, 5)} == {4: (0, 7), 5: (0, 4)}

        become = leader_and_isr([state(0, 0, [0], [0]), state(1, 0, [0, 1], [0, 1]), state(2, 1, [1], [1])],
                                controller_epoch=2, broker_epoch=99)
        refused = await client.call(become, 7)
        assert refused.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert errors_v5(refused) == {(TOPIC_ID, i): ErrorCode.STALE_BROKER_EPOCH for i in range(3)}
        assert samsa.services.replica_manager.get("t", 0) is None

        become.broker_epoch = 100
        answer = await client.call(become, 7)
        assert answer.error_code == ErrorCode.NONE
        # Partition 2 is not this broker's: Kafka's UNKNOWN_TOPIC_OR_PARTITION, and no log.
        assert errors_v5(answer) == {(TOPIC_ID, 0): ErrorCode.NONE, (TOPIC_ID, 1): ErrorCode.NONE,
                                     (TOPIC_ID, 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert samsa.services.replica_manager.get("t", 2) is None
        partition = samsa.services.replica_manager.get("t", 0)
        assert partition.is_leader and partition.log.config.retention_ms == 60000
        assert (partition.log.dir / "partition.metadata").exists()
        produced = await client.call(produce_request("t", one_batch([b"a"]), acks=-1), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert samsa.services.replica_manager.get("t", 1).isr == (0, 1)  # led here, follower 1 in its ISR

        # The same leader epoch again: ignored, STALE_CONTROLLER_EPOCH; a newer one is taken.
        again = leader_and_isr([state(0, 0, [0], [0]), state(1, 0, [0, 1], [0, 1], leader_epoch=1)],
                               controller_epoch=2)
        assert errors_v5(await client.call(again, 7)) == {(TOPIC_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH,
                                                          (TOPIC_ID, 1): ErrorCode.NONE}
        assert samsa.services.replica_manager.get("t", 1).leader_epoch == 1
        # Another topic id for the same name: INCONSISTENT_TOPIC_ID.
        other = leader_and_isr([state(0, 0, [0], [0], leader_epoch=5)], controller_epoch=2, topic_id=OTHER_ID)
        assert errors_v5(await client.call(other, 7)) == {(OTHER_ID, 0): ErrorCode.INCONSISTENT_TOPIC_ID}

        # v4 and older answer by topic name; an older controller is refused for every partition.
        old = leader_and_isr([state(0, 0, [0], [0], leader_epoch=6)], controller_epoch=1)
        answer = await client.call(old, 4)
        assert answer.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert [(p.topic_name, p.partition_index, p.error_code) for p in answer.partition_errors] == [
            ("t", 0, ErrorCode.STALE_CONTROLLER_EPOCH)]
        # The controller epoch is one with UpdateMetadata's: LeaderAndIsr at 3, then UpdateMetadata at 2.
        newer = leader_and_isr([state(0, 0, [0], [0], leader_epoch=6)], controller_epoch=3)
        assert errors_v5(await client.call(newer, 7)) == {(TOPIC_ID, 0): ErrorCode.NONE}
        update = UpdateMetadata(controller_id=7, controller_epoch=2, broker_epoch=-1, topic_states=[], live_brokers=[])
        assert (await client.call(update, 8)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH

    run_with_broker(broker_config(tmp_path), scenario)


def test_new_partitions_logs_are_created_off_the_event_loop(tmp_path):
    """Creating a log fsyncs its directory and files: LeaderAndIsr creates those of the partitions
    new to the broker in a worker thread (ReplicaManager.create_missing_logs), where the event loop
    serving produces and fetches does not wait for the disk; become_leader_or_follower takes them."""
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=1)
        logs = samsa.services.log_manager
        created_by: dict[tuple[str, int], str] = {}
        create_log = logs.create_log

        def recording_create_log(topic, partition, *args, **kwargs):
            created_by.setdefault((topic, partition), threading.current_thread().name)
            return create_log(topic, partition, *args, **kwargs)

        logs.create_log = recording_create_log
        client = await Client.connect(samsa.endpoints[0].port)
        answer = await client.call(leader_and_isr([state(0, 0, [0], [0]), state(1, 0, [0, 1], [0, 1]),
                                                   state(2, 1, [1], [1])]), 7)
        assert errors_v5(answer) == {(TOPIC_ID, 0): ErrorCode.NONE, (TOPIC_ID, 1): ErrorCode.NONE,
                                     (TOPIC_ID, 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        main = threading.main_thread().name
        assert set(created_by) == {("t", 0), ("t", 1)} and main not in created_by.values()
        assert not logs.has_log("t", 2)  # not this broker's
        for index in (0, 1):
            assert samsa.services.replica_manager.get("t", index).log is logs.get_log("t", index)

    run_with_broker(broker_config(tmp_path), scenario)


def test_a_log_of_another_topic_id_on_disk_is_inconsistent(tmp_path):
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=1)
        samsa.services.log_manager.create_log("t", 0, None, OTHER_ID)  # left by a deleted topic of the same name
        client = await Client.connect(samsa.endpoints[0].port)
        answer = await client.call(leader_and_isr([state(0, 0, [0], [0])]), 7)
        assert errors_v5(answer) == {(TOPIC_ID, 0): ErrorCode.INCONSISTENT_TOPIC_ID}
        assert samsa.services.replica_manager.get("t", 0) is None

    run_with_broker(broker_config(tmp_path), scenario)


def test_stop_replica_fencing_epochs_and_deletion(tmp_path):
    def stop(partitions, controller_epoch=1, broker_epoch=-1):
        """partitions: (index, leader epoch, delete)."""
        return StopReplica(controller_id=7, controller_epoch=controller_epoch, broker_epoch=broker_epoch,
                           topic_states=[StopReplica.StopReplicaTopicState(topic_name="t", partition_states=[
                               StopReplica.StopReplicaPartitionState(partition_index=i, leader_epoch=e,
                                                                     delete_partition=d) for i, e, d in partitions])])

    def errors(response) -> dict[int, int]:
        return {p.partition_index: p.error_code for p in response.partition_errors}

    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=10)
        client = await Client.connect(samsa.endpoints[0].port)
        become = leader_and_isr([state(0, 0, [0], [0], leader_epoch=3), state(1, 0, [0], [0], leader_epoch=3)],
                                controller_epoch=2)
        assert set(errors_v5(await client.call(become, 7)).values()) == {ErrorCode.NONE}
        log_dir = samsa.services.replica_manager.get("t", 1).log.dir

        refused = await client.call(stop([(0, 3, False)], broker_epoch=9), 4)
        assert (refused.error_code, refused.partition_errors) == (ErrorCode.STALE_BROKER_EPOCH, [])
        refused = await client.call(stop([(0, 3, False)], controller_epoch=1), 4)
        assert (refused.error_code, refused.partition_errors) == (ErrorCode.STALE_CONTROLLER_EPOCH, [])

        answer = await client.call(stop([(0, 2, False), (1, -2, True), (5, 0, True)], controller_epoch=2), 4)
        assert answer.error_code == ErrorCode.NONE
        # An older leader epoch: fenced; a deletion (-2) and a partition not hosted: done.
        assert errors(answer) == {0: ErrorCode.FENCED_LEADER_EPOCH, 1: ErrorCode.NONE, 5: ErrorCode.NONE}
        assert samsa.services.replica_manager.get("t", 1) is None
        assert not log_dir.exists()
        assert samsa.services.replica_manager.get("t", 0).is_leader

        # v0-2 carry no epochs: not fenced; without delete the partition stays, led by no one.
        v1 = StopReplica(controller_id=7, controller_epoch=2, broker_epoch=10, delete_partitions=False,
                         topics=[StopReplica.StopReplicaTopicV1(name="t", partition_indexes=[0])])
        assert errors(await client.call(v1, 1)) == {0: ErrorCode.NONE}
        partition = samsa.services.replica_manager.get("t", 0)
        assert partition is not None and not partition.is_leader
        produced = await client.call(produce_request("t", one_batch([b"a"])), 9)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run_with_broker(broker_config(tmp_path), scenario)


def test_isr_changes_become_alter_partition_requests(tmp_path):
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=42)
        client = await Client.connect(samsa.endpoints[0].port)
        become = leader_and_isr([state(0, 0, [0, 1], [0, 1], leader_epoch=4, partition_epoch=9)])
        assert errors_v5(await client.call(become, 7)) == {(TOPIC_ID, 0): ErrorCode.NONE}
        partition = samsa.services.replica_manager.get("t", 0)
        manager = AlterPartitionManager(samsa.zookeeper, samsa.services.metadata_cache, samsa.config)

        # Follower 1 never fetched: out of sync. The shrink is pending until the controller answers.
        change = partition.maybe_shrink_isr(now_ms=wall_clock_ms() + 1, lag_time_max_ms=0)
        assert change == IsrChange((0,), removed=(1,), committed=(0, 1)) and partition.isr == (0, 1)
        manager.submit(partition, change)
        request, sent = manager._request()
        assert (request.broker_id, request.broker_epoch) == (0, 42)
        (topic,) = request.topics
        (data,) = topic.partitions
        assert (topic.topic_id, data.partition_index, data.leader_epoch, data.new_isr, data.partition_epoch,
                data.leader_recovery_state) == (TOPIC_ID, 0, 4, [0], 9, 0)

        def answer(error_code=ErrorCode.NONE, partition_epoch=10, leader_epoch=4):
            return AlterPartitionResponse(topics=[AlterPartitionResponse.TopicData(topic_id=TOPIC_ID, partitions=[
                AlterPartitionResponse.PartitionData(partition_index=0, error_code=error_code, leader_id=0,
                                                     leader_epoch=leader_epoch, isr=[0],
                                                     partition_epoch=partition_epoch)])])

        # An answer for another leader epoch, or an older partition epoch, is ignored: still pending.
        assert manager.handle_response(answer(leader_epoch=3), sent)
        assert manager.handle_response(answer(partition_epoch=8), sent)
        assert partition.isr == (0, 1) and partition.leader_state.pending is change
        # Taken: the ISR and the answer's partition epoch are committed.
        manager.submit(partition, change)
        request, sent = manager._request()
        assert manager.handle_response(answer(), sent)
        assert (partition.isr, partition.partition_epoch, manager.pending) == ((0,), 10, 0)
        assert partition.leader_state.pending is None
        # A refusal only a new LeaderAndIsr resolves is not retried, and the change stays pending.
        expand = partition.leader_state._propose((0, 1), added=(1,))
        manager.submit(partition, expand)
        request, sent = manager._request()
        assert manager.handle_response(answer(ErrorCode.INVALID_UPDATE_VERSION), sent)
        assert manager.pending == 0 and partition.partition_epoch == 10 and partition.leader_state.pending is expand
        # INELIGIBLE_REPLICA: not applied, rolled back to the committed ISR.
        manager.submit(partition, expand)
        request, sent = manager._request()
        assert manager.handle_response(answer(ErrorCode.INELIGIBLE_REPLICA), sent)
        assert partition.leader_state.pending is None and partition.isr == (0,)
        # Another error: sent again after a backoff; a refused request too.
        expand = partition.leader_state._propose((0, 1), added=(1,))
        manager.submit(partition, expand)
        request, sent = manager._request()
        assert not manager.handle_response(answer(ErrorCode.UNKNOWN_SERVER_ERROR), sent)
        assert manager.pending == 1
        request, sent = manager._request()
        assert not manager.handle_response(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), sent)
        assert manager.pending == 1

    run_with_broker(broker_config(tmp_path), scenario)


def test_leader_recovery_state_and_a_kraft_controllers_same_epoch(tmp_path):
    """Kafka 3.9's makeLeader: a leader elected uncleanly (RECOVERING) marks itself RECOVERED (its
    AlterPartition says so); a follower keeps what the controller said. A KRaft controller's request
    (v7) may repeat the known leader epoch; a ZooKeeper controller's may not."""
    async def scenario(samsa):
        as_cluster_member(samsa, broker_epoch=1)
        client = await Client.connect(samsa.endpoints[0].port)
        unclean = state(0, 0, [0], [0, 1], leader_epoch=3)
        unclean.leader_recovery_state = 1
        followed = state(1, 1, [1], [0, 1], leader_epoch=3)
        followed.leader_recovery_state = 1
        assert errors_v5(await client.call(leader_and_isr([unclean, followed]), 7)) == {
            (TOPIC_ID, 0): ErrorCode.NONE, (TOPIC_ID, 1): ErrorCode.NONE}
        assert samsa.services.replica_manager.get("t", 0).leader_recovery_state == 0
        assert samsa.services.replica_manager.get("t", 1).leader_recovery_state == 1
        again = leader_and_isr([state(0, 0, [0, 1], [0, 1], leader_epoch=3)])
        assert errors_v5(await client.call(again, 7)) == {(TOPIC_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH}
        again.is_k_raft_controller = True
        assert errors_v5(await client.call(again, 7)) == {(TOPIC_ID, 0): ErrorCode.NONE}
        assert samsa.services.replica_manager.get("t", 0).isr == (0, 1)

    run_with_broker(broker_config(tmp_path), scenario)
