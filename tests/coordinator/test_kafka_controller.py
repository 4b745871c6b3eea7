"""The pure controller (coordinator/controller/): ZooKeeper's contents and brokers' requests in,
ZooKeeper writes and broker requests out, as Kafka 3.9's KafkaController."""

from samsa.coordinator.controller.actions import (CreatePartitionStates, DeleteTopic, DeleteTopicDeletionMarker,
                                                  SendLeaderAndIsr, SendStopReplica, SendUpdateMetadata,
                                                  UpdatePartitionStates)
from samsa.coordinator.controller.context import LiveBroker
from samsa.coordinator.controller.kafka_controller import AlterPartitionItem, KafkaController
from samsa.wire.errors import ErrorCode
from samsa.wire.zk_data import (LEADER_RECOVERY_RECOVERING, BrokerRegistration, EndPoint, PartitionState,
                                ReplicaAssignment, TopicAssignment)


def broker(i: int, epoch: int | None = None) -> LiveBroker:
    return LiveBroker(BrokerRegistration(i, (EndPoint("PLAINTEXT", "127.0.0.1", 9090 + i, "PLAINTEXT"),)),
                      epoch if epoch is not None else 100 + i)


def brokers(*ids: int) -> dict[int, LiveBroker]:
    return {i: broker(i) for i in ids}


def topic(*assignments: tuple[int, ...], topic_id: str = "AAAAAAAAAAAAAAAAAAAAAQ") -> TopicAssignment:
    return TopicAssignment({p: ReplicaAssignment(r) for p, r in enumerate(assignments)}, topic_id)


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def elected_with(states=None, live=(1, 2, 3), topics=None, unclean=None, deleting=()):
    controller = KafkaController(1)
    actions = controller.elected(5, 4, brokers(*live), topics or {"t": topic((1, 2, 3), (2, 3, 1))},
                                 states or {}, unclean or {}, deleting)
    return controller, actions


def test_election_creates_the_missing_partition_states_and_tells_every_broker():
    controller, actions = elected_with()
    create = of(actions, CreatePartitionStates)
    assert len(create) == 1 and create[0].controller_epoch_zk_version == 4
    assert create[0].states[("t", 0)] == PartitionState(1, 0, (1, 2, 3), 5, zk_version=0)
    assert create[0].states[("t", 1)] == PartitionState(2, 0, (2, 3, 1), 5, zk_version=0)
    # The create comes before any request that names it.
    assert isinstance(actions[actions.index(create[0]) + 1], SendLeaderAndIsr)
    lai = [a for a in actions[actions.index(create[0]):] if isinstance(a, SendLeaderAndIsr)]
    assert sorted(a.broker_id for a in lai) == [1, 2, 3]
    assert all(p.is_new for a in lai for p in a.partitions)
    assert lai[0].broker_epoch == 101 and lai[0].controller_epoch == 5 and lai[0].controller_id == 1
    um = of(actions, SendUpdateMetadata)
    assert {a.broker_id for a in um} == {1, 2, 3}
    assert [b.broker_id for b in um[-1].live_brokers] == [1, 2, 3]


def test_election_with_states_sends_them_and_elects_for_offline_leaders():
    states = {("t", 0): PartitionState(1, 3, (1, 2, 3), 4, zk_version=7),
              ("t", 1): PartitionState(4, 2, (4, 3), 4, zk_version=2)}
    controller, actions = elected_with(states, topics={"t": topic((1, 2, 3), (4, 3, 1))})
    update = of(actions, UpdatePartitionStates)
    assert len(update) == 1
    assert update[0].states == {("t", 1): PartitionState(3, 3, (3,), 5, zk_version=3)}
    assert not of(actions, CreatePartitionStates)
    first_lai = of(actions, SendLeaderAndIsr)[0]
    assert first_lai.partitions[0].state.zk_version == 7


def test_leader_failure_elects_the_next_isr_replica_and_shrinks_the_isr():
    controller, _ = elected_with()
    actions = controller.broker_change(brokers(2, 3))
    update = of(actions, UpdatePartitionStates)
    # t-0 loses its leader: 2 leads with the live ISR, epoch bumped; t-1 loses a follower.
    assert update[0].states == {("t", 0): PartitionState(2, 1, (2, 3), 5, zk_version=1)}
    assert update[1].states == {("t", 1): PartitionState(2, 1, (2, 3), 5, zk_version=1)}
    lai = of(actions, SendLeaderAndIsr)
    assert {a.broker_id for a in lai} == {2, 3}
    assert all(a.broker_id != 1 for a in of(actions, SendUpdateMetadata))
    um = of(actions, SendUpdateMetadata)[-1]
    assert [b.broker_id for b in um.live_brokers] == [2, 3]


def test_last_isr_member_dead_leaves_the_partition_leaderless_until_it_returns():
    controller, _ = elected_with(topics={"t": topic((1, 2))}, states={("t", 0): PartitionState(1, 0, (1,), 5, zk_version=0)},
                                 live=(1, 2))
    actions = controller.broker_change(brokers(2))
    assert of(actions, UpdatePartitionStates)[0].states == {("t", 0): PartitionState(-1, 1, (1,), 5, zk_version=1)}
    actions = controller.broker_change({2: broker(2), 1: broker(1, epoch=200)})
    assert of(actions, UpdatePartitionStates)[0].states == {("t", 0): PartitionState(1, 2, (1,), 5, zk_version=2)}
    assert {a.broker_id for a in of(actions, SendLeaderAndIsr)} == {1, 2}


def test_unclean_election_when_enabled_for_the_topic():
    states = {("t", 0): PartitionState(1, 0, (1,), 5, zk_version=0)}
    controller, _ = elected_with(states, topics={"t": topic((1, 2))}, live=(1, 2), unclean={"t": True})
    actions = controller.broker_change(brokers(2))
    assert of(actions, UpdatePartitionStates)[0].states[("t", 0)] == PartitionState(
        2, 1, (2,), 5, LEADER_RECOVERY_RECOVERING, zk_version=1)


def test_bounced_broker_fails_then_starts():
    controller, _ = elected_with()
    actions = controller.broker_change({1: broker(1, epoch=999), 2: broker(2), 3: broker(3)})
    states = [s for a in of(actions, UpdatePartitionStates) for s in a.states.items()]
    assert states[0] == (("t", 0), PartitionState(2, 1, (2, 3), 5, zk_version=1))
    assert controller.ctx.live_brokers[1].epoch == 999
    lai_to_1 = [a for a in of(actions, SendLeaderAndIsr) if a.broker_id == 1]
    assert lai_to_1 and lai_to_1[0].broker_epoch == 999


def test_a_controller_elected_after_a_bounce_keeps_the_registered_leader_and_tells_it():
    """Broker 1, controller and leader of t-0, was killed and registered again (epoch 201) before
    this controller read /brokers/ids: as Kafka 3.9's onControllerFailover it is alive, so t-0
    keeps it as leader (no election: nothing written) and it gets the partition's state for its new
    registration, as every live broker gets the metadata. Its next bounce is a failure then a
    startup: t-0 moves to the next replica of the ISR, and broker 1 is told its new role."""
    states = {("t", 0): PartitionState(1, 4, (1, 2, 3), 4, zk_version=9),
              ("t", 1): PartitionState(2, 3, (2, 3, 1), 4, zk_version=5)}
    live = {1: broker(1, epoch=201), 2: broker(2), 3: broker(3)}
    controller = KafkaController(2)
    actions = controller.elected(6, 5, live, {"t": topic((1, 2, 3), (2, 3, 1))}, states, {}, ())
    assert not of(actions, UpdatePartitionStates) and not of(actions, CreatePartitionStates)
    to_1 = [a for a in of(actions, SendLeaderAndIsr) if a.broker_id == 1]
    assert len(to_1) == 1 and to_1[0].broker_epoch == 201 and to_1[0].controller_epoch == 6
    assert {(p.topic, p.partition): p.state for p in to_1[0].partitions} == states
    assert {a.broker_id for a in of(actions, SendUpdateMetadata)} == {1, 2, 3}
    assert not controller.broker_change(live)  # the same registrations: no change
    actions = controller.broker_change({**live, 1: broker(1, epoch=300)})
    written = {tp: s for a in of(actions, UpdatePartitionStates) for tp, s in a.states.items()}
    assert written[("t", 0)] == PartitionState(2, 5, (2, 3), 6, zk_version=10)
    told_1 = {(p.topic, p.partition): p.state.leader for a in of(actions, SendLeaderAndIsr) if a.broker_id == 1
              for p in a.partitions}
    assert told_1 == {("t", 0): 2, ("t", 1): 2} and controller.ctx.live_brokers[1].epoch == 300


def test_alter_partition_validation():
    controller, _ = elected_with()
    item = AlterPartitionItem("t", 0, 0, (1, 2), 0, 0)
    error, results, actions = controller.alter_partition(1, 100, [item], 2)
    assert error == ErrorCode.STALE_BROKER_EPOCH
    error, results, actions = controller.alter_partition(1, 101, [item], 2)
    assert error == ErrorCode.NONE and results[("t", 0)] == PartitionState(1, 0, (1, 2), 5, zk_version=1)
    assert of(actions, UpdatePartitionStates)[0].states == {("t", 0): results[("t", 0)]}
    assert {a.broker_id for a in of(actions, SendUpdateMetadata)} == {1, 2, 3}
    # The same again with a stale partition epoch: already so.
    _, results, actions = controller.alter_partition(1, 101, [item], 2)
    assert results[("t", 0)].zk_version == 1 and not of(actions, UpdatePartitionStates)
    _, results, _ = controller.alter_partition(1, 101, [AlterPartitionItem("t", 0, 0, (1,), 0, 0)], 2)
    assert results[("t", 0)] == ErrorCode.INVALID_UPDATE_VERSION
    _, results, _ = controller.alter_partition(1, 101, [AlterPartitionItem("t", 0, 1, (1,), 0, 1)], 2)
    assert results[("t", 0)] == ErrorCode.NOT_CONTROLLER
    _, results, _ = controller.alter_partition(1, 101, [AlterPartitionItem("t", 0, 0, (1, 7), 0, 1)], 2)
    assert results[("t", 0)] == ErrorCode.INELIGIBLE_REPLICA
    _, results, _ = controller.alter_partition(1, 101, [AlterPartitionItem("u", 0, 0, (1,), 0, 1)], 2)
    assert results[("u", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_alter_partition_fenced_leader_epoch():
    controller, _ = elected_with()
    controller.broker_change(brokers(2, 3))  # t-0 now at leader epoch 1
    _, results, _ = controller.alter_partition(2, 102, [AlterPartitionItem("t", 0, 0, (2,), 0, 1)], 2)
    assert results[("t", 0)] == ErrorCode.FENCED_LEADER_EPOCH


def test_controlled_shutdown_moves_leaders_and_stops_followers():
    controller, _ = elected_with()
    error, remaining, actions = controller.controlled_shutdown(1, 101)
    assert error == ErrorCode.NONE and remaining == []
    updates = [a.states for a in of(actions, UpdatePartitionStates)]
    assert updates[0] == {("t", 0): PartitionState(2, 1, (2, 3), 5, zk_version=1)}
    assert updates[1] == {("t", 1): PartitionState(2, 1, (2, 3), 5, zk_version=1)}
    stops = of(actions, SendStopReplica)
    assert [(s.broker_id, [(p.topic, p.partition, p.delete) for p in s.partitions]) for s in stops] == [
        (1, [("t", 1, False)])]
    # The broker shutting down still hears of the leadership it lost.
    assert 1 in {a.broker_id for a in of(actions, SendLeaderAndIsr)}
    assert controller.controlled_shutdown(1, 50)[0] == ErrorCode.STALE_BROKER_EPOCH
    assert controller.controlled_shutdown(9, -1)[0] == ErrorCode.BROKER_NOT_AVAILABLE


def test_controlled_shutdown_keeps_a_single_replica_partition():
    controller, _ = elected_with(topics={"t": topic((1,))})
    error, remaining, actions = controller.controlled_shutdown(1, 101)
    assert remaining == [("t", 0)]


def test_new_topic_and_new_partition():
    controller, _ = elected_with()
    actions = controller.topics_changed({"t": topic((1, 2, 3), (2, 3, 1), (3, 1, 2)), "u": topic((3, 1))})
    created = of(actions, CreatePartitionStates)[0].states
    assert set(created) == {("t", 2), ("u", 0)}
    assert created[("u", 0)] == PartitionState(3, 0, (3, 1), 5, zk_version=0)
    assert not controller.topics_changed({"t": topic((1, 2, 3), (2, 3, 1), (3, 1, 2)), "u": topic((3, 1))})


def test_new_partition_without_live_replica_waits_for_one():
    controller, _ = elected_with()
    assert not controller.topics_changed({"t": topic((1, 2, 3), (2, 3, 1)), "u": topic((4,))})
    actions = controller.broker_change(brokers(1, 2, 3, 4))
    assert of(actions, CreatePartitionStates)[0].states == {("u", 0): PartitionState(4, 0, (4,), 5, zk_version=0)}


def test_topic_deletion_waits_for_every_replica():
    controller, _ = elected_with(live=(1, 2))
    actions = controller.topic_deletion({"t", "gone"})
    assert of(actions, DeleteTopicDeletionMarker) == [DeleteTopicDeletionMarker("gone", 4)]
    um = of(actions, SendUpdateMetadata)
    assert {p.state.leader for a in um for p in a.partitions} == {-2}
    stops = of(actions, SendStopReplica)
    assert {s.broker_id for s in stops} == {1, 2}
    assert all(p.delete and p.leader_epoch == -2 for s in stops for p in s.partitions)
    assert not controller.stop_replica_answered(1, {("t", 0): 0, ("t", 1): 0})
    assert not controller.stop_replica_answered(2, {("t", 0): 0, ("t", 1): 0})
    # Broker 3 was down: it gets its StopReplica when it comes back.
    actions = controller.broker_change(brokers(1, 2, 3))
    assert [s.broker_id for s in of(actions, SendStopReplica)] == [3]
    assert not of(actions, SendLeaderAndIsr)
    actions = controller.stop_replica_answered(3, {("t", 0): 0, ("t", 1): 0})
    assert actions == [DeleteTopic("t", 4)]
    assert "t" not in controller.ctx.topic_ids and not controller.ctx.assignments


def test_preferred_election_and_imbalance():
    controller, _ = elected_with()
    controller.broker_change(brokers(2, 3))
    controller.broker_change({**brokers(2, 3), 1: broker(1, 300)})
    assert controller.ctx.states[("t", 0)].leader == 2
    # Broker 1 is back but out of the ISR: not eligible yet.
    assert controller.imbalanced_partitions(10) == []
    controller.alter_partition(2, 102, [AlterPartitionItem("t", 0, controller.ctx.states[("t", 0)].leader_epoch,
                                                           (2, 3, 1), 0, controller.ctx.states[("t", 0)].zk_version)], 2)
    assert controller.imbalanced_partitions(10) == [("t", 0)]
    results, actions = controller.elect_leaders([("t", 0), ("t", 1), ("x", 0)])
    assert results == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                       ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert of(actions, UpdatePartitionStates)[0].states[("t", 0)].leader == 1


def test_a_new_controller_takes_dead_replicas_out_of_the_isrs():
    states = {("t", 0): PartitionState(3, 4, (3, 2), 4, zk_version=6)}
    controller, actions = elected_with(states, topics={"t": topic((3, 2))}, live=(1, 3))
    assert of(actions, UpdatePartitionStates)[0].states == {("t", 0): PartitionState(3, 5, (3,), 5, zk_version=7)}


def test_a_controller_alone_after_zookeeper_returns_shrinks_the_isr_below_min_insync_then_it_heals():
    """ZooKeeper back after every broker's session expired, the first broker to register again
    becomes controller alone: the partition another broker led goes to it with the ISR the live part
    of the old one, [1], below min.insync.replicas (Kafka 3.9's Election.leaderForOffline filters the
    ISR by liveness alone; min.insync.replicas only refuses acks=all writes). The others register
    again, are told the partition (LeaderAndIsr) and follow; the leader's AlterPartition takes them
    back into the ISR."""
    states = {("t", 0): PartitionState(2, 2, (2, 1, 3), 4, zk_version=2)}
    controller, actions = elected_with(states, topics={"t": topic((2, 1, 3))}, live=(1,))
    alone = PartitionState(1, 3, (1,), 5, zk_version=3)
    assert of(actions, UpdatePartitionStates)[0].states == {("t", 0): alone}
    actions = controller.broker_change(brokers(1, 2, 3))
    assert not of(actions, UpdatePartitionStates)
    told = {a.broker_id: a.partitions[0].state for a in of(actions, SendLeaderAndIsr)}
    assert set(told) == {2, 3} and all(s.leader == 1 and s.leader_epoch == 3 for s in told.values())
    item = AlterPartitionItem("t", 0, 3, (1, 2, 3), 0, 3)
    error, results, _ = controller.alter_partition(1, 101, [item], 2)
    assert error == ErrorCode.NONE and results[("t", 0)] == PartitionState(1, 3, (1, 2, 3), 5, zk_version=4)


def test_unclean_election_on_request():
    states = {("t", 0): PartitionState(1, 0, (1,), 5, zk_version=0)}
    controller, _ = elected_with(states, topics={"t": topic((1, 2)), "u": topic((2,))}, live=(1, 2))
    controller.broker_change(brokers(2))
    results, actions = controller.elect_leaders([("t", 0), ("u", 0)], unclean=True)
    assert results == {("t", 0): ErrorCode.NONE, ("u", 0): ErrorCode.ELECTION_NOT_NEEDED}
    assert of(actions, UpdatePartitionStates)[0].states[("t", 0)].leader == 2
    controller.broker_change({})
    assert controller.elect_leaders([("u", 0)], unclean=True)[0] == {("u", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


def test_reassignment_adds_then_removes_replicas():
    from samsa.coordinator.controller.actions import RemoveZkReassignments, WriteTopicAssignment
    controller, _ = elected_with(topics={"t": topic((1, 2))}, live=(1, 2, 3))
    results, actions = controller.reassign({("t", 0): (3, 2), ("t", 5): (1,)})
    assert results[("t", 0)] == (ErrorCode.NONE, None)
    assert results[("t", 5)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    write = of(actions, WriteTopicAssignment)[0]
    assert write.assignment.partitions[0] == ReplicaAssignment((3, 2, 1), (3,), (1,))
    assert of(actions, UpdatePartitionStates)[0].states[("t", 0)] == PartitionState(1, 1, (1, 2), 5, zk_version=1)
    new_to_3 = [p for a in of(actions, SendLeaderAndIsr) if a.broker_id == 3 for p in a.partitions]
    assert new_to_3[0].is_new and new_to_3[0].adding_replicas == (3,)
    assert controller.list_reassignments(None) == ({("t", 0): ReplicaAssignment((3, 2, 1), (3,), (1,))}, [])
    assert controller.list_reassignments([("t", 0), ("t", 9)]) == controller.list_reassignments(None)
    # 3 caught up: the leader's AlterPartition completes the reassignment.
    _, _, actions = controller.alter_partition(1, 101, [AlterPartitionItem("t", 0, 1, (1, 2, 3), 0, 1)], 2)
    states = [a.states[("t", 0)] for a in of(actions, UpdatePartitionStates)]
    assert states[1].leader == 3  # the leader was not a target: elected among them
    assert states[-1].isr == (2, 3)
    assert of(actions, WriteTopicAssignment)[-1].assignment.partitions[0] == ReplicaAssignment((3, 2))
    stops = of(actions, SendStopReplica)
    assert [(s.broker_id, s.partitions[0].delete) for s in stops] == [(1, True)]
    assert of(actions, RemoveZkReassignments)
    assert controller.list_reassignments(None) == ({}, [])
    assert controller.reassign({("t", 0): None})[0][("t", 0)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert controller.reassign({("t", 0): (3, 9)})[0][("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_reassignment_that_may_not_change_the_replication_factor():
    """AlterPartitionReassignments v1 (KIP-860) with AllowReplicationFactorChange false: a target of
    another size is refused with Kafka 4's message; while a reassignment runs, the size compared is
    its target's."""
    controller, _ = elected_with(topics={"t": topic((1, 2))}, live=(1, 2, 3))
    results, actions = controller.reassign({("t", 0): (1, 2, 3)}, False)
    assert results[("t", 0)] == (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3")
    assert not actions
    assert controller.reassign({("t", 0): (3, 2)}, False)[0][("t", 0)] == (ErrorCode.NONE, None)
    # Being reassigned from (1, 2) to (3, 2): replicas (3, 2, 1), of which the target is 2.
    results, _ = controller.reassign({("t", 0): (3,)}, False)
    assert results[("t", 0)] == (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 1")
    assert controller.reassign({("t", 0): (3,)}, True)[0][("t", 0)] == (ErrorCode.NONE, None)
