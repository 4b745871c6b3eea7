"""KIP-932 share groups in the group coordinator: heartbeats and their errors as Kafka 4.4 answers
them, the simple assignor's sharing, initialization of share partitions before they are assigned,
the assignment interval, session timeouts on the explicit clock, records and reload, describe,
list, delete, and the refusals of offset APIs."""

from __future__ import annotations

import uuid

import pytest
from group_harness import Harness

from samsa.coordinator.assignors import MemberSpec, SimpleAssignor
from samsa.coordinator.consumer_group import TopicInfo, TopicsImage
from samsa.coordinator.group import RequestInfo
from samsa.coordinator.group_config import GroupConfigManager
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.share_group import ShareGroup, ShareInitRequest
from samsa.coordinator.share_group_manager import (
    MemberLeft, ShareGroupCoordinatorConfig, ShareGroupEmpty, ShareGroupRebalanced,
)
from samsa.wire.coordinator_record import GROUP_COORDINATOR, decode_record
from samsa.wire.coordinator_records.share_group_state_partition_metadata_key import (
    ShareGroupStatePartitionMetadataKey,
)
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Heartbeat = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)
T = TopicInfo("t", uuid.UUID(int=7), 3)
U = TopicInfo("u", uuid.UUID(int=9), 2)
TOPICS = TopicsImage([T, U])
M1, M2, M3 = (str(uuid.UUID(int=100 + i)) for i in range(3))


@pytest.fixture
def h():
    harness = Harness(share=ShareGroupCoordinatorConfig(max_size=3))
    harness.coordinator.share.topics = TOPICS
    return harness


def heartbeat(h: Harness, member_id: str, epoch: int = 0, topics=("t",), group="g", **fields):
    if epoch != 0 and "subscribed_topic_names" not in fields:
        topics = None
    body = Heartbeat(group_id=group, member_id=member_id, member_epoch=epoch,
                     subscribed_topic_names=None if topics is None else list(topics), **fields)
    return h.call(GroupCoordinator.share_group_heartbeat, body, 1)


def initialize(h: Harness, init: ShareInitRequest) -> int:
    return h.call(lambda c, *args: c.share.initialize_state(*args), init, 0)


def assigned(response) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


def join_initialized(h: Harness, member_id: str, topics=("t",)):
    """Join, initialize what the join asks for, heartbeat past the assignment interval."""
    response, init = heartbeat(h, member_id, 0, topics)
    assert response.error_code == ErrorCode.NONE, response
    if init is not None:
        assert initialize(h, init) == ErrorCode.NONE
    h.advance(1000)
    response, init = heartbeat(h, member_id, response.member_epoch)
    assert init is None
    return response


# --- heartbeats ---------------------------------------------------------------------------------------

def test_join_gets_no_partition_before_their_state_is_initialized(h):
    response, init = heartbeat(h, M1)
    assert (response.error_code, response.member_id, response.member_epoch) == (ErrorCode.NONE, M1, 2)
    assert response.heartbeat_interval_ms == 5000
    assert assigned(response) == {}
    # New topic: -1 (the share partition resolves share.auto.offset.reset), at the group epoch.
    assert init == ShareInitRequest("g", 2, {T.topic_id: {0: -1, 1: -1, 2: -1}})
    group = h.group("g")
    assert set(group.initializing[T.topic_id].partitions) == {0, 1, 2}
    # Not asked for twice while it is initializing.
    response, init = heartbeat(h, M1, 2)
    assert init is None and response.assignment is None
    assert initialize(h, ShareInitRequest("g", 2, {T.topic_id: {0: -1, 1: -1, 2: -1}})) == ErrorCode.NONE
    assert group.initialized[T.topic_id].partitions == {0, 1, 2} and not group.initializing
    # Initialized partitions the target lacks bump the epoch; the assignment waits for the interval.
    response, _ = heartbeat(h, M1, 2)
    assert (response.member_epoch, group.group_epoch, response.assignment) == (2, 3, None)
    h.advance(1000)
    response, _ = heartbeat(h, M1, 2)
    assert response.member_epoch == 3 and assigned(response) == {T.topic_id: [0, 1, 2]}


def test_members_share_partitions_when_more_members_than_partitions(h):
    join_initialized(h, M1)
    response, _ = heartbeat(h, M2)
    h.advance(1000)
    heartbeat(h, M2, response.member_epoch)
    response, _ = heartbeat(h, M3)
    h.advance(1000)
    r3, _ = heartbeat(h, M3, response.member_epoch)
    group = h.group("g")
    r1, _ = heartbeat(h, M1, group.members[M1].member_epoch)
    r2, _ = heartbeat(h, M2, group.members[M2].member_epoch)
    by_member = {m: group.members[m].assigned_partitions.get(T.topic_id, frozenset()) for m in (M1, M2, M3)}
    assert sorted(len(ps) for ps in by_member.values()) == [1, 1, 1]
    assert set().union(*by_member.values()) == {0, 1, 2}


def test_simple_assignor_shares_each_partition_among_several_members():
    members = {f"m{i}": MemberSpec(frozenset({T.topic_id})) for i in range(5)}
    result = SimpleAssignor().assign(members, {T.topic_id: 2}, {T.topic_id: frozenset({0, 1})})
    # Each partition shared by ceil(5 / 2) = 3 members; members' counts ceil(1.2 (i + 1)) - ceil(1.2 i).
    counts = {0: 0, 1: 0}
    for assignment in result.values():
        for p in assignment[T.topic_id]:
            counts[p] += 1
    assert counts == {0: 3, 1: 3}
    assert [len(result[f"m{i}"][T.topic_id]) for i in range(5)] == [2, 1, 1, 1, 1]
    # Sticky: the same input gives the same output, and members keep what they had.
    again = SimpleAssignor().assign({m: MemberSpec(frozenset({T.topic_id}), result[m]) for m in members},
                                    {T.topic_id: 2}, {T.topic_id: frozenset({0, 1})})
    assert again == result
    # Uninitialized partitions go to nobody.
    result = SimpleAssignor().assign({"a": MemberSpec(frozenset({T.topic_id}))}, {T.topic_id: 3},
                                     {T.topic_id: frozenset({1})})
    assert result == {"a": {T.topic_id: frozenset({1})}}


def test_simple_assignor_heterogeneous_subscriptions():
    members = {"a": MemberSpec(frozenset({T.topic_id})), "b": MemberSpec(frozenset({T.topic_id, U.topic_id}))}
    result = SimpleAssignor().assign(members, {T.topic_id: 3, U.topic_id: 2},
                                     {T.topic_id: frozenset({0, 1, 2}), U.topic_id: frozenset({0, 1})})
    assert result["b"][U.topic_id] == {0, 1}
    assert result["a"][T.topic_id] | result["b"][T.topic_id] == {0, 1, 2}
    assert U.topic_id not in result["a"]


@pytest.mark.parametrize("fields, message", [
    ({"member_id": ""}, None),
    ({"member_id": " "}, "MemberId can't be empty."),
    ({"rack_id": ""}, "RackId can't be empty."),
    ({"subscribed_topic_names": None}, "SubscribedTopicNames must be set in first request."),
    ({"subscribed_topic_names": []}, "SubscribedTopicNames must be set in first request."),
    ({"member_epoch": -2}, "MemberEpoch is invalid."),
])
def test_invalid_requests(h, fields, message):
    body = Heartbeat(**{"group_id": "g", "member_id": M1, "member_epoch": 0, "subscribed_topic_names": ["t"],
                        **fields})
    response, init = h.call(GroupCoordinator.share_group_heartbeat, body, 1)
    assert (response.error_code, response.error_message, init) == (ErrorCode.INVALID_REQUEST, message, None)


def test_epoch_and_member_errors(h):
    response, _ = heartbeat(h, M1, 1, group="nosuch")
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Share group nosuch not found.")
    join_initialized(h, M1)
    response, _ = heartbeat(h, M1, 7)
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert response.error_message.startswith("The share group member has a greater member epoch (7) than the one "
                                             "known by the group coordinator (3).")
    response, _ = heartbeat(h, M1, 1)
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "and it does not match the previous member epoch (2)" in response.error_message
    assert heartbeat(h, M1, 2)[0].error_code == ErrorCode.NONE  # the previous epoch is accepted
    response, _ = heartbeat(h, M2, 3)
    assert (response.error_code, response.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                             f"Member {M2} is not a member of group g.")


def test_group_max_size(h):
    for m in (M1, M2, M3):
        assert heartbeat(h, m)[0].error_code == ErrorCode.NONE
    response, _ = heartbeat(h, str(uuid.uuid4()))
    assert (response.error_code, response.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 3 members.")


def test_a_group_of_another_type_keeps_its_id(h):
    h.commit("classic", {("t", 0): 5})
    response, _ = heartbeat(h, M1, group="classic")
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group classic is not a share group.")
    described = h.coordinator.share.describe(["classic", "nosuch", ""])
    assert [(d.error_code, d.error_message) for d in described] == [
        (ErrorCode.GROUP_ID_NOT_FOUND, "Group classic is not a share group."),
        (ErrorCode.GROUP_ID_NOT_FOUND, "Group nosuch not found."), (ErrorCode.INVALID_GROUP_ID, None)]


def test_heartbeats_that_bump_the_group_epoch_are_rebalances(h):
    response, _ = heartbeat(h, M1)
    assert h.coordinator.share.take_events() == [ShareGroupRebalanced("g")]
    heartbeat(h, M1, response.member_epoch)
    assert h.coordinator.share.take_events() == []  # nothing changed
    heartbeat(h, M2)
    h.call(GroupCoordinator.share_group_heartbeat, Heartbeat(group_id="g", member_id=M1, member_epoch=response.member_epoch,
                                                             subscribed_topic_names=["t", "u"]), 1)
    assert h.coordinator.share.take_events() == [ShareGroupRebalanced("g")] * 2


def test_leave_and_session_timeout_report_to_the_listener(h):
    r1 = join_initialized(h, M1)
    r2, _ = heartbeat(h, M2)
    h.coordinator.share.take_events()
    response, _ = heartbeat(h, M1, -1)
    assert (response.error_code, response.member_id, response.member_epoch) == (ErrorCode.NONE, M1, -1)
    assert h.coordinator.share.take_events() == [MemberLeft("g", M1)]
    assert r1.member_epoch < h.group("g").group_epoch
    # M2's session (45 s by default) runs out on the explicit clock.
    h.advance(44_999)
    assert M2 in h.group("g").members
    h.advance(1)
    assert not h.group("g").members
    assert h.coordinator.share.take_events() == [MemberLeft("g", M2), ShareGroupEmpty("g")]
    group = h.group("g")
    assert (group.state_name, group.assignment_epoch) == ("Empty", group.group_epoch)
    assert heartbeat(h, M2, r2.member_epoch)[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_describe_and_list(h):
    join_initialized(h, M1, ("t", "missing"))
    [described] = h.coordinator.share.describe(["g"])
    assert (described.error_code, described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == (ErrorCode.NONE, "Stable", 3, 3, "simple")
    [member] = described.members
    assert (member.member_id, member.member_epoch, member.client_id, member.client_host,
            member.subscribed_topic_names) == (M1, 3, "client", "/127.0.0.1", ["missing", "t"])
    assert [(tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [("t", [0, 1, 2])]
    code, listed = h.coordinator.list_groups([], ["share"])
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
        ("g", "share", "Stable", "share")]
    assert h.coordinator.list_groups([], ["consumer"])[1] == []


def test_offset_apis_refuse_share_groups(h):
    join_initialized(h, M1)
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    fetched = h.coordinator.fetch_offsets(RequestInfo(9), "g", None)
    assert fetched.error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_records_reload(h):
    join_initialized(h, M1)
    heartbeat(h, M2)
    before = h.group("g")
    fresh = h.restart()
    fresh.coordinator.share.topics = TOPICS
    group = fresh.group("g")
    assert isinstance(group, ShareGroup)
    assert (group.group_epoch, group.assignment_epoch, group.metadata_hash) == (
        before.group_epoch, before.assignment_epoch, before.metadata_hash)
    assert group.members == before.members and group.target_assignment == before.target_assignment
    assert group.initialized == {t: v for t, v in group.initialized.items()}
    assert set(group.initialized) == {T.topic_id}
    # Loaded members get a fresh session.
    fresh.advance(45_000)
    assert not fresh.group("g").members


def test_delete_share_group_moves_state_to_deleting_then_tombstones(h):
    join_initialized(h, M1)
    ticket = h.send(lambda c, *args: c.share.prepare_delete(*args), ["g", "other"], 0)
    assert h.answer(ticket) == {"g": (ErrorCode.NON_EMPTY_GROUP, {})}
    assert heartbeat(h, M1, -1)[0].error_code == ErrorCode.NONE
    ticket = h.send(lambda c, *args: c.share.prepare_delete(*args), ["g"], 0)
    assert h.answer(ticket) == {"g": (ErrorCode.NONE, {T.topic_id: [0, 1, 2]})}
    assert h.group("g").deleting == {T.topic_id: "t"}
    assert h.delete_groups("g") == {"g": ErrorCode.NONE}
    assert h.group("g") is None
    tombstones = [decode_record(GROUP_COORDINATOR, k, v) for k, v in h.log[h.coordinator.partition_for("g")][-3:]]
    assert [type(r.key).__name__ for r in tombstones] == [
        "ShareGroupTargetAssignmentMetadataKey", "ShareGroupStatePartitionMetadataKey", "ShareGroupMetadataKey"]
    assert all(r.value is None for r in tombstones)
    assert h.restart().group("g") is None


def test_failed_initialization_is_asked_again(h):
    _, init = heartbeat(h, M1)
    assert h.call(lambda c, *args: c.share.uninitialize_state(*args), init, 0) == ErrorCode.NONE
    assert not h.group("g").initializing
    _, again = heartbeat(h, M1, 2)
    assert again == init
    # An initialization left unanswered is retried after group.share.initialize.retry.interval.ms,
    # at start offset 0 as Kafka asks for it (the topic is known to the group by then).
    assert heartbeat(h, M1, 2)[1] is None
    h.now += 30_000
    assert heartbeat(h, M1, 2)[1] == ShareInitRequest("g", 2, {T.topic_id: {0: 0, 1: 0, 2: 0}})


def test_partitions_added_to_a_known_topic_start_at_offset_zero(h):
    join_initialized(h, M1)
    h.coordinator.share.update_topics(h.now, TopicsImage([TopicInfo("t", T.topic_id, 4), U]))
    _, init = heartbeat(h, M1, 3)
    assert init == ShareInitRequest("g", 4, {T.topic_id: {3: 0}})


def test_deleted_topic_leaves_the_state_metadata(h):
    join_initialized(h, M1)
    h.apply(h.coordinator.share.update_topics(h.now, TopicsImage([U])))
    group = h.group("g")
    assert group.initialized == {}
    key, value = h.log[h.coordinator.partition_for("g")][-1]
    assert isinstance(decode_record(GROUP_COORDINATOR, key, value).key, ShareGroupStatePartitionMetadataKey)


def test_group_configs_set_session_and_heartbeat():
    configs = {"group.share.session.timeout.ms": 45000, "group.share.heartbeat.interval.ms": 5000,
               "group.share.min.session.timeout.ms": 45000, "group.share.max.session.timeout.ms": 60000,
               "group.share.min.heartbeat.interval.ms": 5000, "group.share.max.heartbeat.interval.ms": 15000,
               "group.share.record.lock.duration.ms": 30000, "group.share.delivery.count.limit": 5,
               "group.share.partition.max.record.locks": 2000, "group.share.assignment.interval.ms": 1000,
               "group.share.min.assignment.interval.ms": 0, "group.share.max.assignment.interval.ms": 15000,
               "group.share.min.delivery.count.limit": 2, "group.share.max.delivery.count.limit": 10}
    manager = GroupConfigManager(configs.__getitem__)
    manager.update_group_config("g", {"share.session.timeout.ms": "60000", "share.heartbeat.interval.ms": "99999",
                                      "share.auto.offset.reset": "earliest"})
    h = Harness()
    h.coordinator = GroupCoordinator(h.config, h.now, h.new_member_uuid, manager)
    h.coordinator.share.topics = TOPICS
    response, _ = heartbeat(h, M1)
    assert response.heartbeat_interval_ms == 15000  # clamped to the broker's maximum
    h.advance(59_999)
    assert M1 in h.group("g").members
    h.advance(1)
    assert not h.group("g").members
    config = manager.share_config("g")
    assert (config.auto_offset_reset, config.delivery_count_limit, config.isolation_level) == (
        "earliest", 5, "read_uncommitted")
