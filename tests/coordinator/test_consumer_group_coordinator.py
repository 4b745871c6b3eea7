"""KIP-848 consumer groups inside the group coordinator: records in __consumer_offsets and reload,
answers after the append, timers, offsets with member epochs, and the id shared with classic groups."""

from __future__ import annotations

import uuid

import pytest
from group_harness import Harness

from samsa.coordinator.consumer_group import ConsumerGroup, TopicInfo, TopicsImage
from samsa.coordinator.consumer_group_member import MemberState
from samsa.coordinator.group import GroupType, RequestInfo
from samsa.coordinator.group_config import GroupConfigManager
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.wire.coordinator_record import GROUP_COORDINATOR, CoordinatorRecord, encode_record
from samsa.wire.coordinator_record import decode_record as decode_group_record
from samsa.wire.coordinator_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from samsa.wire.coordinator_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions,
)
from samsa.wire.coordinator_records.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from samsa.wire.coordinator_records.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from samsa.wire.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from samsa.wire.coordinator_records.consumer_group_metadata_value import ConsumerGroupMetadataValue
from samsa.wire.coordinator_records.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from samsa.wire.coordinator_records.consumer_group_partition_metadata_value import (
    ConsumerGroupPartitionMetadataValue, TopicMetadata,
)
from samsa.wire.coordinator_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from samsa.wire.coordinator_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue, TopicPartition,
)
from samsa.wire.coordinator_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from samsa.wire.coordinator_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Heartbeat = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
TxnOffsetCommit = request_class(ApiKey.TXN_OFFSET_COMMIT)
T = TopicInfo("t", uuid.UUID(int=7), 4)
TOPICS = TopicsImage([T])


def heartbeat(h: Harness, member_id: str, epoch: int = 0, *, owned=(), group="g", version=1, **fields):
    fields = {"rebalance_timeout_ms": 30_000, "subscribed_topic_names": ["t"], "topic_partitions": [
        Heartbeat.TopicPartitions(topic_id=T.topic_id, partitions=sorted(owned))] if owned else [], **fields}
    body = Heartbeat(group_id=group, member_id=member_id, member_epoch=epoch, **fields)
    return h.send(GroupCoordinator.consumer_group_heartbeat, body, version)


def partitions(response) -> set[int]:
    return {p for tp in response.assignment.topic_partitions for p in tp.partitions}


@pytest.fixture
def h():
    harness = Harness()
    harness.coordinator.consumer.topics = TOPICS
    return harness


# --- the record layouts ------------------------------------------------------------------------------

RECORDS = [
    CoordinatorRecord(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(5)),
    CoordinatorRecord(ConsumerGroupPartitionMetadataKey("g"), ConsumerGroupPartitionMetadataValue(
        [TopicMetadata(topic_id=T.topic_id, topic_name="t", num_partitions=4),
         TopicMetadata(topic_id=uuid.UUID(int=9), topic_name="u\u00fc", num_partitions=1)])),
    CoordinatorRecord(ConsumerGroupMemberMetadataKey("g", "m"), ConsumerGroupMemberMetadataValue(
        instance_id="i", rack_id=None, client_id="c", client_host="/127.0.0.1", subscribed_topic_names=["a", "t"],
        subscribed_topic_regex="t.*", rebalance_timeout_ms=30_000, server_assignor=None)),
    CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(5)),
    CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey("g", "m"),
                      ConsumerGroupTargetAssignmentMemberValue([TopicPartition(T.topic_id, [0, 3])])),
    CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=5, previous_member_epoch=4, state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions=[TopicPartitions(T.topic_id, [0])],
        partitions_pending_revocation=[TopicPartitions(T.topic_id, [1])])),
    CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey("g", "m"), None),
]


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    return decode_group_record(GROUP_COORDINATOR, key, value)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r.key).__name__ + ("" if r.value else "-tombstone"))
def test_records_round_trip(record):
    assert decode_record(*encode_record(record)) == record


def test_record_bytes_follow_kafkas_layouts():
    key, value = encode_record(RECORDS[0])
    assert key == b"\x00\x03" + b"\x00\x01g"  # type 3, then GroupId as a short-length string
    assert value == b"\x00\x00" + (5).to_bytes(4, "big") + b"\x00"  # version 0, Epoch, no tagged fields
    key, value = encode_record(RECORDS[4])
    assert key == b"\x00\x07\x00\x01g\x00\x01m"
    # version 0; one topic (compact count 2): id, partitions [0, 3] (compact count 3); tags of each struct.
    assert value == (b"\x00\x00\x02" + T.topic_id.bytes + b"\x03" + (0).to_bytes(4, "big") + (3).to_bytes(4, "big")
                     + b"\x00\x00")
    # A tagged field of a newer Kafka than the schemas' (here tag 7) is skipped.
    newer = b"\x00\x00" + (5).to_bytes(4, "big") + b"\x01\x07\x08" + (42).to_bytes(8, "big")
    assert decode_record(encode_record(RECORDS[0])[0], newer) == RECORDS[0]
    # ConsumerGroupMetadataValue.MetadataHash (tag 0, Kafka 4.1) is read; the group does not use it.
    with_hash = b"\x00\x00" + (5).to_bytes(4, "big") + b"\x01\x00\x08" + (42).to_bytes(8, "big")
    assert decode_record(encode_record(RECORDS[0])[0], with_hash).value.epoch == 5


# --- heartbeats through the coordinator ---------------------------------------------------------------

def test_heartbeat_is_answered_once_its_records_are_appended_and_they_reload(h):
    response = h.answer(heartbeat(h, "a"))
    assert (response.error_code, response.member_epoch, partitions(response)) == (ErrorCode.NONE, 1, {0, 1, 2, 3})
    partition = h.coordinator.partition_for("g")
    assert len(h.log[partition]) == 6
    b = h.answer(heartbeat(h, "b"))
    assert b.member_epoch == 2 and partitions(b) == set()
    a = h.answer(heartbeat(h, "a", 1, owned={0, 1, 2, 3}))
    assert a.member_epoch == 1 and len(partitions(a)) == 2

    restarted = h.restart()
    restarted.coordinator.consumer.topics = TOPICS
    group = restarted.group("g")
    assert isinstance(group, ConsumerGroup)
    assert (group.group_epoch, group.assignment_epoch, sorted(group.members)) == (2, 2, ["a", "b"])
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    # The members carry on where they were, with the epochs they know.
    a2 = restarted.answer(heartbeat(restarted, "a", 1, owned=partitions(a)))
    assert (a2.error_code, a2.member_epoch) == (ErrorCode.NONE, 2)
    b2 = restarted.answer(heartbeat(restarted, "b", 2))
    assert partitions(b2) == {0, 1, 2, 3} - partitions(a)


def test_failed_append_answers_with_the_coordinator_error(h):
    h.fail_appends = ErrorCode.KAFKA_STORAGE_ERROR
    assert h.answer(heartbeat(h, "a")).error_code == ErrorCode.NOT_COORDINATOR
    h.fail_appends = ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.answer(heartbeat(h, "b")).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_session_timeout_fences_through_the_coordinator_timer(h):
    heartbeat(h, "a")
    heartbeat(h, "b")
    h.advance(44_000)
    assert h.answer(heartbeat(h, "a", 1, owned={0, 1, 2, 3})).error_code == ErrorCode.NONE
    h.advance(2_000)  # b's session (45 s) ran out
    assert sorted(h.group("g").members) == ["a"]
    restarted = h.restart()
    assert sorted(restarted.group("g").members) == ["a"]  # the fencing was written


def test_a_groups_own_configs_set_its_session_heartbeat_and_assignment_intervals():
    """Kafka's GroupMetadataManager reads consumer.session.timeout.ms, consumer.heartbeat.interval.ms
    and consumer.assignment.interval.ms from the group's configs (clamped to the broker's bounds),
    else the broker's group.consumer.* (dynamic changes to the latter included), at each use."""
    from samsa.server.config.kafka_config import KafkaConfig

    broker = KafkaConfig({"group.consumer.assignment.interval.ms": "0"})
    manager = GroupConfigManager(broker.get)
    manager.update_group_config("g", {"consumer.session.timeout.ms": "50000",
                                      "consumer.heartbeat.interval.ms": "99999",
                                      "consumer.assignment.interval.ms": "2000"})
    h = Harness()
    h.coordinator = GroupCoordinator(h.config, h.now, h.new_member_uuid, manager)
    h.coordinator.consumer.topics = TOPICS
    a = h.answer(heartbeat(h, "a"))
    assert (a.heartbeat_interval_ms, partitions(a)) == (15_000, {0, 1, 2, 3})  # clamped to the broker's maximum
    h.advance(1_000)
    b = h.answer(heartbeat(h, "b"))
    assert (b.member_epoch, partitions(b)) == (1, set())  # the group's 2 s since the last assignment: not yet
    h.advance(1_000)
    a = h.answer(heartbeat(h, "a", 1, owned={0, 1, 2, 3}))
    assert len(partitions(a)) == 2
    assert h.answer(heartbeat(h, "a", 1, owned=partitions(a))).member_epoch == 2  # revoked in time
    other = h.answer(heartbeat(h, "c", group="other"))
    assert other.heartbeat_interval_ms == 5_000  # the broker's
    h.advance(48_999)  # b's session (the group's 50 s) runs out 50 s after its heartbeat
    assert sorted(h.group("g").members) == ["a", "b"]
    h.advance(1)
    assert sorted(h.group("g").members) == ["a"]


def test_unknown_group_and_inactive_coordinator(h):
    response = h.answer(heartbeat(h, "a", 3))
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Consumer group g not found.")
    assert "g" not in h.coordinator.groups
    response = h.answer(heartbeat(h, "a", rebalance_timeout_ms=-1))
    assert response.error_code == ErrorCode.INVALID_REQUEST and "g" not in h.coordinator.groups
    h.apply(h.coordinator.unload(h.now))
    assert h.answer(heartbeat(h, "a")).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_topic_changes_bump_subscribed_groups(h):
    heartbeat(h, "a")
    partition = h.coordinator.partition_for("g")
    written = len(h.log[partition])
    h.apply(h.coordinator.consumer.update_topics(h.now, TopicsImage([TopicInfo("t", T.topic_id, 6)])))
    assert h.group("g").group_epoch == 2 and len(h.log[partition]) == written + 2
    a = h.answer(heartbeat(h, "a", 1, owned={0, 1, 2, 3}))
    assert (a.member_epoch, partitions(a)) == (2, set(range(6)))


# --- the shared APIs ----------------------------------------------------------------------------------

def test_offsets_of_a_consumer_group_are_committed_with_the_member_epoch(h):
    heartbeat(h, "a")
    assert h.commit("g", {("t", 0): 5}, member_id="a", generation=1) == {("t", 0): ErrorCode.NONE}
    assert h.commit("g", {("t", 0): 6}, member_id="a", generation=0) == {("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert h.commit("g", {("t", 0): 6}, member_id="x", generation=1) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {("t", 0): 6}, member_id="a", generation=1, version=8) == {
        ("t", 0): ErrorCode.UNSUPPORTED_VERSION}
    assert h.fetch("g") == {("t", 0): 5}
    stale = h.coordinator.fetch_offsets(RequestInfo(9), "g", [("t", [0])], member_id="a", member_epoch=7)
    assert stale.error_code == ErrorCode.STALE_MEMBER_EPOCH
    assert h.restart().fetch("g") == {("t", 0): 5}


def test_offset_commits_at_an_older_epoch_are_checked_partition_by_partition_and_survive_a_reload(h):
    """Kafka's ConsumerGroup.createAssignmentEpochValidator run over every partition of the commit:
    one refused refuses them all. The assignment epochs come back from __consumer_offsets."""
    heartbeat(h, "a")  # a: every partition at epoch 1
    heartbeat(h, "b")  # epoch 2
    revoking = h.answer(heartbeat(h, "a", 1, owned={0, 1, 2, 3}))
    kept = partitions(revoking)
    [gone, *_] = sorted({0, 1, 2, 3} - kept)
    assert h.answer(heartbeat(h, "a", 1, owned=kept)).member_epoch == 2
    b = h.answer(heartbeat(h, "b", 2))
    assert gone in partitions(b)
    k = min(kept)
    for harness in (h, h.restart()):
        harness.coordinator.consumer.topics = TOPICS
        assert harness.commit("g", {("t", k): 5}, member_id="a", generation=1) == {("t", k): ErrorCode.NONE}
        assert harness.commit("g", {("t", k): 6, ("t", gone): 6}, member_id="a", generation=1) == {
            ("t", k): ErrorCode.STALE_MEMBER_EPOCH, ("t", gone): ErrorCode.STALE_MEMBER_EPOCH}
        assert harness.commit("g", {("t", gone): 6}, member_id="b", generation=1) == {
            ("t", gone): ErrorCode.STALE_MEMBER_EPOCH}  # b got it at epoch 2
        assert harness.commit("g", {("t", gone): 7}, member_id="b", generation=2) == {("t", gone): ErrorCode.NONE}
        assert harness.fetch("g") == {("t", k): 5, ("t", gone): 7}
        assert txn_commit(harness, {("t", gone): 8}, "a", 1) == {("t", gone): ErrorCode.ILLEGAL_GENERATION}
        assert txn_commit(harness, {("t", k): 8}, "a", 1) == {("t", k): ErrorCode.NONE}


def txn_commit(h: Harness, offsets: dict[tuple[str, int], int], member_id: str, epoch: int, version: int = 5):
    """TxnOffsetCommit before v6 says ILLEGAL_GENERATION for a stale member epoch, as Kafka's."""
    body = TxnOffsetCommit(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
                           generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
                               TxnOffsetCommit.TxnOffsetCommitRequestTopic(name=t, partitions=[
                                   TxnOffsetCommit.TxnOffsetCommitRequestPartition(
                                       partition_index=p, committed_offset=o, committed_metadata="")])
                               for (t, p), o in offsets.items()])
    response = h.call(GroupCoordinator.txn_offset_commit, body, version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_list_and_delete_consumer_groups(h):
    heartbeat(h, "a")
    code, listed = h.coordinator.list_groups([], ["consumer"])
    assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed] == [
        ("g", "Stable", "consumer", "consumer")]
    assert h.delete_groups("g") == {"g": ErrorCode.NON_EMPTY_GROUP}
    heartbeat(h, "a", -1)
    assert h.coordinator.list_groups(["empty"], [])[1][0].group_id == "g"
    assert h.delete_groups("g") == {"g": ErrorCode.NONE}
    assert "g" not in h.coordinator.groups and "g" not in h.restart().coordinator.groups


def test_a_classic_group_and_a_consumer_group_cannot_share_an_id(h):
    h.stable_group("classic", 1)
    response = h.answer(heartbeat(h, "a", group="classic"))
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group classic is not a consumer group.")
    heartbeat(h, "a")
    joined = h.answer(h.join("g"))
    assert joined.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    described = h.coordinator.consumer.describe(["g", "classic", "nope", ""])
    assert [(d.group_id, d.error_code, d.error_message) for d in described] == [
        ("g", ErrorCode.NONE, None),
        ("classic", ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a consumer group."),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found."),
        ("", ErrorCode.INVALID_GROUP_ID, None)]


def test_a_consumer_group_record_of_an_id_a_live_classic_group_holds_is_skipped_at_load(h):
    """A group id is one group: replayed, a consumer group's record does not replace a classic group
    with members (Kafka's getOrMaybeCreatePersistedConsumerGroup refuses it; only a group of
    offsets only gives way)."""
    h.stable_group("classic", 1)
    partition = h.coordinator.partition_for("classic")
    h.log[partition].append(encode_record(CoordinatorRecord(ConsumerGroupMetadataKey("classic"),
                                                            ConsumerGroupMetadataValue(epoch=1))))
    restarted = h.restart()
    assert restarted.group("classic").type == GroupType.CLASSIC


def test_an_empty_classic_group_becomes_a_consumer_group_and_keeps_its_offsets(h):
    assert h.commit("simple", {("t", 1): 9}) == {("t", 1): ErrorCode.NONE}  # a simple (classic) group
    response = h.answer(heartbeat(h, "a", group="simple"))
    assert response.error_code == ErrorCode.NONE
    assert isinstance(h.group("simple"), ConsumerGroup) and h.fetch("simple") == {("t", 1): 9}
    restarted = h.restart()
    assert isinstance(restarted.group("simple"), ConsumerGroup) and restarted.fetch("simple") == {("t", 1): 9}


def test_an_empty_consumer_group_gives_way_to_a_classic_one(h):
    heartbeat(h, "a")
    heartbeat(h, "a", -1)
    assert h.commit("g", {("t", 0): 3}) == {("t", 0): ErrorCode.NONE}
    h.stable_group("g", 1)
    assert h.group("g").type == "classic" and h.fetch("g") == {("t", 0): 3}
    restarted = h.restart()
    assert restarted.group("g").type == "classic" and restarted.fetch("g") == {("t", 0): 3}
