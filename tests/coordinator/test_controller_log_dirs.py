"""The pure controller and failed log dirs (Kafka 3.9's onBrokerLogDirFailure and
processLeaderAndIsrResponseReceived): a broker's /log_dir_event_notification brings LeaderAndIsr
for its replicas; those answering KAFKA_STORAGE_ERROR go offline, their leaderships move to the
online replicas of the ISR and they leave the ISRs."""

from test_kafka_controller import broker, brokers, elected_with, of, topic

from samsa.coordinator.controller.actions import (SendLeaderAndIsr, SendStopReplica, SendUpdateMetadata,
                                                  UpdatePartitionStates)
from samsa.wire.errors import ErrorCode
from samsa.wire.zk_data import PartitionState

STORAGE = ErrorCode.KAFKA_STORAGE_ERROR
# t-0 led by 1, t-1 led by 2 with 1 following, t-2 led by 3 with 1 following
TOPICS = {"t": topic((1, 2, 3), (2, 3, 1), (3, 1, 2))}


def cluster():
    controller, _ = elected_with(topics=TOPICS)
    return controller


def states_written(actions) -> dict:
    return {tp: s for a in of(actions, UpdatePartitionStates) for tp, s in a.states.items()}


def test_a_log_dir_event_asks_the_broker_about_each_of_its_replicas_and_changes_nothing():
    controller = cluster()
    before = dict(controller.ctx.states)
    actions = controller.log_dir_failure([1, 1])
    lai = of(actions, SendLeaderAndIsr)
    assert [a.broker_id for a in lai] == [1]
    assert sorted((p.topic, p.partition) for p in lai[0].partitions) == [("t", 0), ("t", 1), ("t", 2)]
    assert {(p.topic, p.partition): p.state for p in lai[0].partitions} == before  # the epochs unchanged
    assert not of(actions, UpdatePartitionStates) and controller.ctx.states == before
    assert controller.log_dir_failure([7]) == []  # not a live broker


def test_replicas_answering_storage_error_lose_their_leaderships_and_leave_the_isrs():
    controller = cluster()
    actions = controller.leader_and_isr_answered(1, {("t", 0): STORAGE, ("t", 1): STORAGE,
                                                     ("t", 2): ErrorCode.STALE_CONTROLLER_EPOCH})
    written = states_written(actions)
    # t-0: the next online replica of the ISR leads, the leader epoch bumped, 1 out of the ISR.
    assert written[("t", 0)] == PartitionState(2, 1, (2, 3), 5, zk_version=1)
    # t-1: its follower 1 leaves the ISR, the leader epoch bumped.
    assert written[("t", 1)] == PartitionState(2, 1, (2, 3), 5, zk_version=1)
    assert ("t", 2) not in written  # its replica on 1 answered otherwise: online
    # The new states go to the online replicas only; the offline ones are stopped (not deleted).
    told = {(a.broker_id, p.topic, p.partition) for a in of(actions, SendLeaderAndIsr) for p in a.partitions}
    assert told == {(2, "t", 0), (3, "t", 0), (2, "t", 1), (3, "t", 1)}
    stops = of(actions, SendStopReplica)
    assert [s.broker_id for s in stops] == [1]
    assert sorted((p.topic, p.partition, p.delete) for p in stops[0].partitions) == [("t", 0, False),
                                                                                     ("t", 1, False)]
    # Every broker learns that 1's replicas of t-0 and t-1 are offline.
    offline = {p.partition: p.offline_replicas for um in of(actions, SendUpdateMetadata) for p in um.partitions}
    assert offline == {0: (1,), 1: (1,)}
    assert {a.broker_id for a in of(actions, SendUpdateMetadata)} == {1, 2, 3}
    # The same answer again changes nothing.
    assert controller.leader_and_isr_answered(1, {("t", 0): STORAGE, ("t", 1): STORAGE}) == []


def test_an_offline_replica_is_not_elected_until_its_broker_registers_again():
    controller = cluster()
    controller.leader_and_isr_answered(2, {("t", 0): STORAGE})
    assert controller.ctx.states[("t", 0)].isr == (1, 3)
    # Its leader dies: 3 leads, not 2 (whose broker lives but whose replica is offline).
    actions = controller.broker_change(brokers(2, 3))
    assert states_written(actions)[("t", 0)] == PartitionState(3, 2, (3,), 5, zk_version=2)
    # 2 registers again (a restart: a new broker epoch): its log dirs are online again.
    controller.broker_change({2: broker(2, epoch=300), 3: broker(3)})
    assert controller.ctx.replicas_on_offline_dirs == {}
    assert controller.ctx.is_replica_online(2, tp=("t", 0))


def test_a_replica_answering_none_is_online_again():
    controller = cluster()
    controller.leader_and_isr_answered(3, {("t", 2): STORAGE})
    assert controller.ctx.replicas_on_offline_dirs[3] == {("t", 2)}
    controller.leader_and_isr_answered(3, {("t", 2): ErrorCode.NONE})
    assert controller.ctx.replicas_on_offline_dirs[3] == set()


def test_the_last_isr_member_going_offline_leaves_the_partition_leaderless():
    controller, _ = elected_with(topics={"t": topic((1, 2))},
                                 states={("t", 0): PartitionState(1, 4, (1,), 5, zk_version=3)}, live=(1, 2))
    actions = controller.leader_and_isr_answered(1, {("t", 0): STORAGE})
    assert states_written(actions) == {("t", 0): PartitionState(-1, 5, (1,), 5, zk_version=4)}


def test_answers_from_a_broker_not_alive_are_ignored():
    controller = cluster()
    controller.broker_change(brokers(2, 3))
    assert controller.leader_and_isr_answered(1, {("t", 1): STORAGE}) == []
    assert controller.ctx.replicas_on_offline_dirs == {}
