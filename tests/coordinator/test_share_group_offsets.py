"""The group coordinator's side of AlterShareGroupOffsets and DeleteShareGroupOffsets (KIP-932), as
Kafka 4.4's GroupMetadataManager answers them: which share partitions go to the persister, how the
ShareGroupStatePartitionMetadata record moves them (initializing, initialized, deleting), the
errors and their messages, and a group created by an alter surviving a reload."""

from __future__ import annotations

import uuid

import pytest
from group_harness import Harness

from samsa.coordinator.consumer_group import TopicInfo, TopicsImage
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.share_group import ShareGroup, ShareInitRequest
from samsa.coordinator.share_group_manager import ShareGroupCoordinatorConfig
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class, response_class

Alter = request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
Delete = request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
DeleteResponse = response_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
T = TopicInfo("t", uuid.UUID(int=7), 3)
U = TopicInfo("u", uuid.UUID(int=9), 2)
TOPICS = TopicsImage([T, U])
M1 = str(uuid.UUID(int=100))


@pytest.fixture
def h():
    harness = Harness(share=ShareGroupCoordinatorConfig())
    harness.coordinator.share.topics = TOPICS
    return harness


def alter(h: Harness, topics: dict[str, dict[int, int]], group: str = "g"):
    body = Alter(group_id=group, topics=[Alter.AlterShareGroupOffsetsRequestTopic(topic_name=name, partitions=[
        Alter.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in offsets.items()])
        for name, offsets in topics.items()])
    return h.call(lambda c, *args: c.share.alter_offsets(*args), body, 0)


def delete(h: Harness, *topics: str, group: str = "g"):
    body = Delete(group_id=group, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics])
    return h.call(lambda c, *args: c.share.delete_offsets(*args), body, 0)


def deleted(h: Harness, group: str, topics: dict[uuid.UUID, str], errors=()):
    return h.call(lambda c, *args: c.share.offsets_deleted(*args), (group, topics, list(errors)), 0)


def initialize(h: Harness, init: ShareInitRequest) -> int:
    return h.call(lambda c, *args: c.share.initialize_state(*args), init, 0)


def results(response) -> dict[str, dict[int, tuple[int, str | None]]]:
    return {t.topic_name: {p.partition_index: (p.error_code, p.error_message) for p in t.partitions}
            for t in response.responses}


def join(h: Harness, member_id: str = M1):
    body = Heartbeat(group_id="g", member_id=member_id, member_epoch=0, subscribed_topic_names=["t"])
    response, init = h.call(GroupCoordinator.share_group_heartbeat, body, 1)
    assert response.error_code == ErrorCode.NONE
    return response, init


def test_alter_creates_the_group_and_asks_for_its_partitions_to_be_initialized(h):
    response, init = alter(h, {"t": {0: 5, 2: 7, 3: 1}, "nope": {0: 1}})
    unknown = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    assert response.error_code == ErrorCode.NONE
    assert results(response) == {"t": {0: (0, None), 2: (0, None), 3: unknown}, "nope": {0: unknown}}
    assert [t.topic_id for t in response.responses] == [T.topic_id, uuid.UUID(int=0)]
    # At the new group's epoch (Kafka's groups start at 1), at the offsets asked for.
    assert init == ShareInitRequest("g", 1, {T.topic_id: {0: 5, 2: 7}})
    group = h.group("g")
    assert isinstance(group, ShareGroup) and group.state_name == "Empty"
    assert {t: v.partitions for t, v in group.initializing.items()} == {T.topic_id: frozenset({0, 2})}
    assert initialize(h, init) == ErrorCode.NONE
    assert not group.initializing and {t: v.partitions for t, v in group.initialized.items()} == {
        T.topic_id: frozenset({0, 2})}
    # The state record alone brings the group back, as Kafka's replay creates it.
    fresh = h.restart()
    assert set(fresh.group("g").initialized) == {T.topic_id}


def test_alter_of_unknown_topics_only_creates_no_group(h):
    response, init = alter(h, {"nope": {0: 1}})
    assert init is None and results(response) == {"nope": {0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                               "This server does not host this topic-partition.")}}
    assert h.group("g") is None


def test_alter_refuses_a_group_with_members_or_of_another_type(h):
    join(h)
    response, init = alter(h, {"t": {0: 1}})
    assert (response.error_code, response.error_message, init) == (ErrorCode.NON_EMPTY_GROUP,
                                                                    "The group is not empty.", None)
    h.commit("classic", {("t", 0): 1})
    response, _ = alter(h, {"t": {0: 1}}, group="classic")
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group classic is not a share group.")
    response, _ = alter(h, {"t": {0: 1}}, group="")
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_GROUP_ID, "The group id is invalid.")


def test_alter_takes_a_deleting_topic_back(h):
    _, init = alter(h, {"t": {0: 1, 1: 1, 2: 1}})
    initialize(h, init)
    errors, to_delete = delete(h, "t")
    assert (errors, to_delete) == ([], {T.topic_id: [0, 1, 2]})
    assert h.group("g").deleting == {T.topic_id: "t"}
    _, init = alter(h, {"t": {1: 0}})
    group = h.group("g")
    assert group.deleting == {} and set(group.initializing) == {T.topic_id}


def test_delete_offsets_errors(h):
    refused = delete(h, "t")
    assert (refused.error_code, refused.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")
    h.commit("classic", {("t", 0): 1})
    refused = delete(h, "t", group="classic")
    assert (refused.error_code, refused.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group classic is not a share group.")
    join(h)
    refused = delete(h, "t")
    assert (refused.error_code, refused.error_message) == (ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")


def test_delete_offsets_of_initialized_topics_then_completed(h):
    _, init = alter(h, {"t": {0: 1, 1: 1}, "u": {0: 3}})
    initialize(h, init)
    errors, to_delete = delete(h, "t", "nope")
    assert to_delete == {T.topic_id: [0, 1]}
    assert [(e.topic_name, e.error_code, e.error_message) for e in errors] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    group = h.group("g")
    assert set(group.initialized) == {U.topic_id} and group.deleting == {T.topic_id: "t"}
    response = deleted(h, "g", {T.topic_id: "t"}, errors)
    assert [(t.topic_name, t.topic_id, t.error_code) for t in response.responses] == [
        ("t", T.topic_id, ErrorCode.NONE), ("nope", uuid.UUID(int=0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert group.deleting == {}
    # Deleted: nothing left to delete for t, which was never initialized again.
    errors, to_delete = delete(h, "t")
    assert to_delete == {}
    assert [(e.topic_name, e.error_message) for e in errors] == [("t", "There is no offset information to delete.")]
    # Reloaded as it was left.
    fresh = h.restart()
    assert set(fresh.group("g").initialized) == {U.topic_id} and fresh.group("g").deleting == {}


def test_delete_offsets_of_a_group_without_share_state_deletes_nothing(h):
    join(h)
    h.call(GroupCoordinator.share_group_heartbeat,
           Heartbeat(group_id="g", member_id=M1, member_epoch=-1), 1)
    # The join asked for t's partitions: initializing, not initialized, so nothing to delete.
    errors, to_delete = delete(h, "t")
    assert to_delete == {} and [e.error_message for e in errors] == ["There is no offset information to delete."]
    fresh = Harness(share=ShareGroupCoordinatorConfig())
    fresh.coordinator.share.topics = TOPICS
    fresh.coordinator.add_group(ShareGroup("g"))
    assert delete(fresh, "t") == ([], {})


def test_a_failed_write_answers_the_runtime_error(h):
    h.fail_appends = ErrorCode.NOT_LEADER_OR_FOLLOWER
    response, init = alter(h, {"t": {0: 1}})
    assert (response.error_code, response.error_message, init) == (
        ErrorCode.NOT_COORDINATOR, "This is not the correct coordinator.", None)
