"""The KIP-848 consumer group state machine, driven by heartbeats on an explicit clock."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.coordinator.consumer_group import (
    ConsumerGroup, ConsumerGroupConfig, ConsumerGroupState, TopicInfo, TopicsImage, validate_heartbeat_request,
)
from samsa.coordinator.consumer_group_member import MemberState
from samsa.coordinator.group import GroupError, RequestInfo
from samsa.wire.coordinator_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from samsa.wire.coordinator_records.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from samsa.wire.coordinator_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from samsa.wire.coordinator_records.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from samsa.wire.coordinator_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from samsa.wire.coordinator_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from samsa.wire.errors import ErrorCode
from samsa.wire.messages.consumer_group_heartbeat_request import ConsumerGroupHeartbeatRequest, TopicPartitions

from group_harness import counting_uuids

FOO = TopicInfo("foo", uuid.UUID(int=1), 6)
BAR = TopicInfo("bar", uuid.UUID(int=2), 3)
SESSION = 45_000
REBALANCE = 30_000
# A new target assignment at every group epoch: the tests not about the assignment interval.
EVERY_EPOCH = ConsumerGroupConfig(assignment_interval_ms=0)


def image(*topics):
    return TopicsImage(topics)


class Consumer:
    """A well-behaved client: it owns what the last assignment said, and reports it every time."""

    def __init__(self, group, member_id, topics=("foo",), instance_id=None, regex=None, assignor=None):
        self.group = group
        self.member_id = member_id
        self.epoch = 0
        self.subscription = list(topics)
        self.instance_id = instance_id
        self.regex = regex
        self.assignor = assignor
        self.owned: dict[uuid.UUID, set[int]] = {}
        self.last = None
        self.describable = None  # the topics its sender may DESCRIBE (None: no authorizer)

    def request(self, **overrides):
        fields = dict(group_id="g", member_id=self.member_id, member_epoch=self.epoch,
                      instance_id=self.instance_id, rebalance_timeout_ms=REBALANCE,
                      subscribed_topic_names=self.subscription, subscribed_topic_regex=self.regex,
                      server_assignor=self.assignor,
                      topic_partitions=[TopicPartitions(topic_id=t, partitions=sorted(ps))
                                        for t, ps in sorted(self.owned.items())])
        fields.update(overrides)
        return ConsumerGroupHeartbeatRequest(**fields)

    def heartbeat(self, now, topics, **overrides):
        request = self.request(**overrides)
        validate_heartbeat_request(request, 1, self.group.config.assignors)
        response, records = self.group.heartbeat(request, client_id="c", client_host="/127.0.0.1", now_ms=now,
                                                 topics=topics, new_member_uuid=counting_uuids(),
                                                 describable=self.describable)
        self.last = response
        if response.error_code == ErrorCode.NONE and request.member_epoch >= 0:
            self.member_id, self.epoch = response.member_id, response.member_epoch
            if response.assignment is not None:
                self.owned = {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}
        return response, records

    def partitions(self, topic=FOO):
        return self.owned.get(topic.topic_id, set())


def assert_owned_at_most_once(consumers):
    seen = {}
    for c in consumers:
        for t, ps in c.owned.items():
            for p in ps:
                assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {c.member_id}"
                seen[(t, p)] = c.member_id
    return seen


def settle(consumers, now, topics, rounds=6):
    for _ in range(rounds):
        for c in consumers:
            response, _ = c.heartbeat(now, topics)
            assert response.error_code == ErrorCode.NONE, response
            assert_owned_at_most_once(consumers)


@pytest.fixture
def group():
    return ConsumerGroup("g", EVERY_EPOCH)


def test_first_member_joins_and_gets_every_partition(group):
    topics = image(FOO)
    a = Consumer(group, "a")
    response, records = a.heartbeat(0, topics)
    assert response.error_code == ErrorCode.NONE
    assert (response.member_id, response.member_epoch, response.heartbeat_interval_ms) == ("a", 1, 5000)
    assert a.partitions() == set(range(6))
    assert [type(r.key) for r in records] == [
        ConsumerGroupMemberMetadataKey, ConsumerGroupPartitionMetadataKey, ConsumerGroupMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupCurrentMemberAssignmentKey]
    assert group.state == ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)


def test_v0_member_without_id_gets_one_from_the_coordinator(group):
    request = Consumer(group, "").request()
    validate_heartbeat_request(request, 0, group.config.assignors)
    response, _ = group.heartbeat(request, client_id="c", client_host="h", now_ms=0, topics=image(FOO),
                                  new_member_uuid=counting_uuids())
    assert response.error_code == ErrorCode.NONE
    assert uuid.UUID(response.member_id) and response.member_id in group.members
    assert response.member_id == "00000000-0000-0000-0000-000000000001"
    with pytest.raises(GroupError) as e:
        validate_heartbeat_request(request, 1, group.config.assignors)  # v1: the client makes the id
    assert (e.value.code, e.value.message) == (ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")


def test_quiet_heartbeat_carries_no_assignment_and_writes_nothing(group):
    topics = image(FOO)
    a = Consumer(group, "a")
    a.heartbeat(0, topics)
    response, records = a.heartbeat(1000, topics, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                                    topic_partitions=None)
    assert response.error_code == ErrorCode.NONE and response.member_epoch == 1
    assert response.assignment is None and records == []
    # A full request (everything set, as after an error) gets the assignment again.
    response, records = a.heartbeat(2000, topics)
    assert response.assignment is not None and records == []


def test_partitions_move_only_after_their_owner_revoked_them(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    a.heartbeat(0, topics)
    response, _ = b.heartbeat(100, topics)
    # b is at the new epoch but everything it should get is still a's.
    assert response.member_epoch == 2 and b.owned == {}
    assert group.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    assert group.state == ConsumerGroupState.RECONCILING
    # a learns it must give up half; it stays at epoch 1 until it confirms.
    response, _ = a.heartbeat(200, topics)
    assert response.member_epoch == 1 and len(a.partitions()) == 3
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    given_away = set(range(6)) - a.partitions()
    # b still gets nothing: a has not reported the revocation yet.
    b.heartbeat(300, topics)
    assert b.owned == {}
    a.heartbeat(400, topics)  # reports owning three: revocation done
    assert a.epoch == 2 and group.members["a"].state == MemberState.STABLE
    b.heartbeat(500, topics)
    assert b.partitions() == given_away and b.epoch == 2
    assert group.state == ConsumerGroupState.STABLE
    assert_owned_at_most_once([a, b])


def test_leave_gives_the_partitions_to_the_others(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    settle([a, b], 0, topics)
    epoch = group.group_epoch
    response, records = b.heartbeat(1000, topics, member_epoch=-1)
    assert (response.error_code, response.member_id, response.member_epoch) == (ErrorCode.NONE, "b", -1)
    assert "b" not in group.members and group.group_epoch == epoch + 1
    assert [r.value for r in records[:3]] == [None, None, None]  # the member's tombstones
    a.heartbeat(2000, topics)
    assert a.partitions() == set(range(6))


def test_unknown_member_and_leave_of_unknown_member(group):
    topics = image(FOO)
    response, records = Consumer(group, "ghost").heartbeat(0, topics, member_epoch=3)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID and records == []
    assert response.error_message == "Member ghost is not a member of group g."
    response, _ = Consumer(group, "ghost").heartbeat(0, topics, member_epoch=-1)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_session_timeout_fences_a_silent_member(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    settle([a, b], 0, topics)
    a.heartbeat(10_000, topics)
    assert group.next_deadline() == SESSION  # b's last heartbeat was at 0
    assert group.poll(SESSION - 1, topics) == []
    records = group.poll(SESSION, topics)
    assert records and "b" not in group.members and "a" in group.members
    response, _ = b.heartbeat(SESSION + 1, topics)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert group.next_deadline() == 10_000 + SESSION


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    a.heartbeat(0, topics)
    b.heartbeat(100, topics)
    a.heartbeat(200, topics)  # told to revoke: the rebalance timeout starts
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    kept = a.owned
    # a keeps heartbeating but keeps reporting all six partitions: it never revokes.
    for now in (5_000, 10_000, 20_000):
        response, _ = a.heartbeat(now, topics, topic_partitions=[
            TopicPartitions(topic_id=FOO.topic_id, partitions=list(range(6)))])
        assert response.error_code == ErrorCode.NONE
    assert kept == a.owned
    assert group.poll(200 + REBALANCE - 1, topics) == []
    assert group.poll(200 + REBALANCE, topics) and "a" not in group.members
    b.heartbeat(200 + REBALANCE + 1, topics)
    assert b.partitions() == set(range(6))


def test_rebalance_timeout_is_dropped_once_the_member_revoked(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    a.heartbeat(0, topics)
    b.heartbeat(100, topics)
    a.heartbeat(200, topics)
    a.heartbeat(300, topics)  # revoked
    assert group.poll(200 + REBALANCE, topics) == []
    assert "a" in group.members


def test_member_epoch_fencing(group):
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    a.heartbeat(0, topics)
    b.heartbeat(0, topics)
    a.heartbeat(0, topics)
    a.heartbeat(0, topics)  # a: epoch 2, previous 1, owns 3 partitions
    assert (group.members["a"].member_epoch, group.members["a"].previous_member_epoch) == (2, 1)
    response, records = a.heartbeat(0, topics, member_epoch=3)
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH and records == []
    assert response.error_message.startswith("The consumer group member has a greater member epoch (3)")
    # The previous epoch is fine with a subset of the assignment (the epoch bump was lost) ...
    response, _ = a.heartbeat(0, topics, member_epoch=1)
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, 2)
    # ... but not when claiming partitions that are not its own.
    response, _ = a.heartbeat(0, topics, member_epoch=1, topic_partitions=[
        TopicPartitions(topic_id=FOO.topic_id, partitions=list(range(6)))])
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    # A fenced member rejoins with epoch 0 and the same id (KAFKA-19233).
    response, _ = a.heartbeat(0, topics, member_epoch=0, topic_partitions=[])
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, 2)


def test_static_member_leaves_and_comes_back_without_a_rebalance(group):
    topics = image(FOO)
    a = Consumer(group, "a1", instance_id="host-a")
    b = Consumer(group, "b", instance_id="host-b")
    settle([a, b], 0, topics)
    mine, epoch = a.partitions(), group.group_epoch
    response, records = a.heartbeat(1000, topics, member_epoch=-2)
    assert (response.error_code, response.member_id, response.member_epoch) == (ErrorCode.NONE, "a1", -2)
    assert group.members["a1"].member_epoch == -2 and group.group_epoch == epoch
    # The same instance with a new member id while the old one is still away is not released ...
    impostor = Consumer(group, "a2", instance_id="host-b")
    response, _ = impostor.heartbeat(2000, topics)
    assert response.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert response.error_message == ("Static member a2 with instance id host-b cannot join the group because "
                                      "the instance id is owned by b member.")
    # ... but host-a, which left, is: it gets its partitions back at once, and nobody rebalances.
    back = Consumer(group, "a2", instance_id="host-a")
    response, _ = back.heartbeat(3000, topics)
    assert response.error_code == ErrorCode.NONE
    assert back.partitions() == mine and group.group_epoch == epoch
    assert "a1" not in group.members and group.static_members["host-a"] == "a2"
    assert group.state == ConsumerGroupState.STABLE
    # The old member id is fenced by the new one.
    response, _ = a.heartbeat(4000, topics, member_epoch=epoch)
    assert response.error_code == ErrorCode.FENCED_INSTANCE_ID
    response, _ = Consumer(group, "x", instance_id="nobody").heartbeat(4000, topics, member_epoch=1)
    assert (response.error_code, response.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                             "Instance id nobody is unknown.")


def test_static_member_away_too_long_is_fenced_by_its_session(group):
    topics = image(FOO)
    a = Consumer(group, "a", instance_id="host-a")
    b = Consumer(group, "b")
    settle([a, b], 0, topics)
    a.heartbeat(100, topics, member_epoch=-2)
    b.heartbeat(SESSION, topics)
    group.poll(SESSION + 100, topics)
    assert "a" not in group.members and "host-a" not in group.static_members
    settle([b], SESSION + 200, topics)
    assert b.partitions() == set(range(6))


def test_static_member_leaving_for_good(group):
    topics = image(FOO)
    a = Consumer(group, "a", instance_id="host-a")
    a.heartbeat(0, topics)
    response, _ = a.heartbeat(10, topics, member_epoch=-1)
    assert response.error_code == ErrorCode.NONE and group.is_empty()
    assert group.state == ConsumerGroupState.EMPTY


def test_group_max_size(group):
    small = ConsumerGroup("g", ConsumerGroupConfig(max_size=1))
    topics = image(FOO)
    Consumer(small, "a").heartbeat(0, topics)
    response, records = Consumer(small, "b").heartbeat(0, topics)
    assert (response.error_code, response.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of 1 members.")
    assert records == [] and list(small.members) == ["a"]


@pytest.mark.parametrize("version, overrides, code, message", [
    (1, dict(group_id=" "), ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    (1, dict(member_id=""), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    (0, dict(member_id="", member_epoch=3), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    (0, dict(member_id="", member_epoch=-1), ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
    (1, dict(instance_id=""), ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
    (1, dict(rack_id=" "), ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    (1, dict(rebalance_timeout_ms=-1), ErrorCode.INVALID_REQUEST,
     "RebalanceTimeoutMs must be provided in first request."),
    (1, dict(topic_partitions=None), ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
    (1, dict(topic_partitions=[TopicPartitions(topic_id=FOO.topic_id, partitions=[0])]), ErrorCode.INVALID_REQUEST,
     "TopicPartitions must be empty when (re-)joining."),
    (1, dict(subscribed_topic_names=None), ErrorCode.INVALID_REQUEST,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (1, dict(member_epoch=-2), ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
    (1, dict(member_epoch=-3), ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
    (1, dict(server_assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR,
     "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    (1, dict(subscribed_topic_regex="foo("), ErrorCode.INVALID_REGULAR_EXPRESSION, None),
    (1, dict(subscribed_topic_regex="(?!internal).*"), ErrorCode.INVALID_REGULAR_EXPRESSION, None),  # RE2/J: no lookahead
])
def test_request_validation(group, version, overrides, code, message):
    request = Consumer(group, "a").request(**overrides)
    with pytest.raises(GroupError) as e:
        validate_heartbeat_request(request, version, group.config.assignors)
    assert e.value.code == code
    if message is not None:
        assert e.value.message == message
    else:
        regex = overrides["subscribed_topic_regex"]
        assert e.value.message.startswith(f"SubscribedTopicRegex `{regex}` is not a valid regular expression")


def test_server_assignor_chosen_by_the_members(group):
    topics = image(FOO, BAR)
    a = Consumer(group, "a", topics=("foo", "bar"), assignor="range")
    b = Consumer(group, "b", topics=("foo", "bar"), assignor="range")
    settle([a, b], 0, topics)
    assert group.preferred_assignor() == "range"
    # range: the same partition numbers of both topics go to the same member where it can.
    assert a.partitions(FOO) == {0, 1, 2} and a.partitions(BAR) == {0, 1}
    assert ConsumerGroup("h").preferred_assignor() == "uniform"


def test_subscription_change_revokes_the_topics_dropped(group):
    topics = image(FOO, BAR)
    a = Consumer(group, "a", topics=("foo", "bar"))
    settle([a], 0, topics)
    assert a.partitions(BAR) == {0, 1, 2}
    epoch = group.group_epoch
    a.subscription = ["foo"]
    a.heartbeat(100, topics)
    assert group.group_epoch == epoch + 1
    assert a.partitions(BAR) == set() and a.partitions(FOO) == set(range(6))
    settle([a], 200, topics)
    assert group.state == ConsumerGroupState.STABLE


def test_topic_changes_bump_the_group_epoch(group):
    a = Consumer(group, "a", topics=("foo", "bar"))
    settle([a], 0, image(FOO))
    assert a.partitions(BAR) == set()
    epoch = group.group_epoch
    created = image(FOO, BAR)
    assert group.on_topics_changed(created) and group.group_epoch == epoch + 1
    assert group.state == ConsumerGroupState.ASSIGNING
    assert group.on_topics_changed(created) == []  # nothing new
    settle([a], 100, created)
    assert a.partitions(BAR) == {0, 1, 2}
    grown = image(FOO, TopicInfo("bar", BAR.topic_id, 5))
    group.on_topics_changed(grown)
    settle([a], 200, grown)
    assert a.partitions(BAR) == set(range(5))
    deleted = image(FOO)
    group.on_topics_changed(deleted)
    settle([a], 300, deleted)
    assert a.owned == {FOO.topic_id: set(range(6))}
    # Recreated with a new id: a new topic for the group.
    recreated = image(FOO, TopicInfo("bar", uuid.UUID(int=99), 1))
    assert group.on_topics_changed(recreated)
    settle([a], 400, recreated)
    assert a.owned[uuid.UUID(int=99)] == {0}
    # A topic nobody subscribes to changes nothing.
    assert group.on_topics_changed(image(FOO, TopicInfo("bar", uuid.UUID(int=99), 1),
                                         TopicInfo("other", uuid.UUID(int=5), 1))) == []


def test_regex_subscription_follows_the_topics(group):
    a = Consumer(group, "a", topics=(), regex="ba.*")
    first = image(FOO, BAR)
    settle([a], 0, first)
    assert a.owned == {BAR.topic_id: {0, 1, 2}}
    baz = TopicInfo("baz", uuid.UUID(int=3), 2)
    internal = TopicInfo("bax", uuid.UUID(int=4), 1, internal=True)
    second = image(FOO, BAR, baz, internal)
    assert group.on_topics_changed(second)
    settle([a], 100, second)
    # Internal topics match too, as in Kafka (franz-go's Test848RegexBrokerResolves subscribes to
    # __consumer_offsets by a regex).
    assert a.owned == {BAR.topic_id: {0, 1, 2}, baz.topic_id: {0, 1}, internal.topic_id: {0}}
    assert group.describe(second).members[0].subscribed_topic_regex == "ba.*"


def test_a_regex_matches_only_topics_its_member_may_describe(group):
    a = Consumer(group, "a", topics=(), regex="ba.*")
    baz = TopicInfo("baz", uuid.UUID(int=3), 2)
    topics = image(FOO, BAR, baz)
    settle([a], 0, topics)  # no authorizer: every match
    assert a.owned == {BAR.topic_id: {0, 1, 2}, baz.topic_id: {0, 1}}
    # An authorizer now (or a group loaded before its first heartbeat): resolved again at once.
    a.describable = lambda names: {n for n in names if n != "baz"}
    settle([a], 100, topics)
    assert a.owned == {BAR.topic_id: {0, 1, 2}}
    # Allowed later: the regex resolves with the sender's rights again when the topics change.
    a.describable = set
    settle([a], 200, topics)
    assert a.owned == {BAR.topic_id: {0, 1, 2}}
    changed = image(FOO, BAR, baz, TopicInfo("other", uuid.UUID(int=5), 1))
    assert group.on_topics_changed(changed)
    settle([a], 300, changed)
    assert a.owned == {BAR.topic_id: {0, 1, 2}, baz.topic_id: {0, 1}}


def test_replaying_the_records_rebuilds_the_group(group):
    topics = image(FOO, BAR)
    consumers = [Consumer(group, m, topics=("foo", "bar")) for m in ("a", "b", "c")]
    consumers.append(Consumer(group, "d", topics=("bar",), instance_id="host-d"))
    log = []
    for now in range(0, 2000, 100):
        for c in consumers:
            log += c.heartbeat(now, topics)[1]
        if now == 500:
            log += consumers[1].heartbeat(now, topics, member_epoch=-1)[1]
            consumers.pop(1)
    log += consumers[-1].heartbeat(2000, topics, member_epoch=-2)[1]
    reloaded = ConsumerGroup("g", EVERY_EPOCH)
    for record in log:
        reloaded.replay(record)
    for attr in ("group_epoch", "assignment_epoch", "assignment_timestamp", "members", "static_members",
                 "target_assignment", "subscription_metadata"):
        assert getattr(reloaded, attr) == getattr(group, attr), attr
    assert reloaded._partition_owner == group._partition_owner
    reloaded.on_loaded(50_000)
    assert reloaded.next_deadline() == 50_000 + SESSION


def test_a_new_target_assignment_waits_for_the_assignment_interval():
    """Kafka 4.4's canComputeNextTargetAssignment: the first assignment at once, the next not before
    consumer.assignment.interval.ms after the last; heartbeats meanwhile keep the last target (the
    group is Assigning), and the time of the last is kept in its record for a reload."""
    group = ConsumerGroup("g", ConsumerGroupConfig(assignment_interval_ms=1_000))
    topics = image(FOO)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    records = a.heartbeat(10_000, topics)[1]
    assert (a.epoch, a.partitions(), group.assignment_timestamp) == (1, set(range(6)), 10_000)
    records += b.heartbeat(10_100, topics)[1]
    assert (group.group_epoch, group.assignment_epoch, group.state_name) == (2, 1, "Assigning")
    assert (b.epoch, b.partitions()) == (1, set())
    records += a.heartbeat(10_999, topics)[1]
    assert (a.epoch, a.partitions(), group.assignment_epoch) == (1, set(range(6)), 1)
    reloaded = ConsumerGroup("g", ConsumerGroupConfig(assignment_interval_ms=1_000))
    for record in records:
        reloaded.replay(record)
    assert (reloaded.assignment_epoch, reloaded.assignment_timestamp) == (1, 10_000)

    records = a.heartbeat(11_000, topics)[1]  # the interval is over: a gives up half
    assert (group.assignment_epoch, group.assignment_timestamp, len(a.partitions())) == (2, 11_000, 3)
    for record in records:
        reloaded.replay(record)
    assert (reloaded.assignment_epoch, reloaded.assignment_timestamp) == (2, 11_000)
    settle([a, b], 11_100, topics)
    assert (a.partitions() | b.partitions(), len(b.partitions()), group.state_name) == (set(range(6)), 3, "Stable")


def test_describe(group):
    topics = image(FOO)
    a = Consumer(group, "a", instance_id="host-a")
    a.heartbeat(0, topics, rack_id="r1")
    described = group.describe(topics)
    assert (described.group_id, described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == ("g", "Stable", 1, 1, "uniform")
    (member,) = described.members
    assert (member.member_id, member.instance_id, member.rack_id, member.member_epoch, member.client_id,
            member.client_host, member.subscribed_topic_names) == ("a", "host-a", "r1", 1, "c", "/127.0.0.1",
                                                                  ["foo"])
    (tp,) = member.assignment.topic_partitions
    assert (tp.topic_id, tp.topic_name, tp.partitions) == (FOO.topic_id, "foo", list(range(6)))
    assert member.target_assignment == member.assignment


def test_offset_commit_and_fetch_validation(group):
    topics = image(FOO)
    v9, v8 = RequestInfo(9), RequestInfo(8)
    group.validate_offset_commit("", None, -1, v9)  # empty group: anyone may commit
    a = Consumer(group, "a")
    a.heartbeat(0, topics)
    group.validate_offset_commit("a", None, 1, v9)
    group.validate_offset_fetch("a", 1, v9)
    group.validate_offset_fetch(None, -1, v9)
    cases = [
        (lambda: group.validate_offset_commit("", None, -1, v9), ErrorCode.UNKNOWN_MEMBER_ID),
        (lambda: group.validate_offset_commit("a", None, 2, v9), ErrorCode.STALE_MEMBER_EPOCH),
        (lambda: group.validate_offset_commit("a", None, 1, v8), ErrorCode.UNSUPPORTED_VERSION),
        (lambda: group.validate_offset_fetch("a", 2, v9), ErrorCode.STALE_MEMBER_EPOCH),
        (lambda: group.validate_offset_fetch("b", 1, v9), ErrorCode.UNKNOWN_MEMBER_ID),
    ]
    for call, code in cases:
        with pytest.raises(GroupError) as e:
            call()
        assert e.value.code == code
    group.validate_offset_commit("a", None, 1, v8, transactional=True)


def test_delete_only_when_empty_and_offsets_expire_from_their_commit(group):
    topics = image(FOO)
    a = Consumer(group, "a")
    a.heartbeat(0, topics)
    assert group.is_subscribed_to_topic("foo") and not group.is_subscribed_to_topic("bar")
    with pytest.raises(GroupError) as e:
        group.validate_delete_group()
    assert e.value.code == ErrorCode.NON_EMPTY_GROUP
    a.heartbeat(1, topics, member_epoch=-1)
    group.validate_delete_group()
    assert [value for _, value in group.tombstones()] == [None, None, None]
    assert group.offset_expiration_condition().base(type("Offset", (), {"commit_timestamp": 7})) == 7


# --- many members, joins, leaves and crashes: never a partition owned twice -----------------------

@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["join", "leave", "crash", "beat", "beat", "beat"]),
                          st.integers(0, 5)), min_size=1, max_size=60),
       st.sampled_from(["uniform", "range"]))
def test_no_partition_is_ever_owned_twice_and_the_group_settles(steps, assignor):
    topics = image(FOO, BAR)
    group = ConsumerGroup("g", EVERY_EPOCH)
    consumers: dict[str, Consumer] = {}
    crashed: list[Consumer] = []
    now = 0
    for step, (action, n) in enumerate(steps):
        now += 1000
        name = f"m{n}"
        if action == "join" and name not in consumers:
            # Each process has a member id of its own (librdkafka and Java make a fresh uuid).
            consumers[name] = Consumer(group, f"{name}.{step}", topics=("foo", "bar"), assignor=assignor)
            consumers[name].heartbeat(now, topics)
        elif action == "leave" and name in consumers:
            consumers.pop(name).heartbeat(now, topics, member_epoch=-1)
        elif action == "crash" and name in consumers:
            crashed.append(consumers.pop(name))  # silent: keeps what it owned until fenced
        elif consumers:
            c = consumers[sorted(consumers)[n % len(consumers)]]
            response, _ = c.heartbeat(now, topics)
            if response.error_code != ErrorCode.NONE:  # fenced: drop everything and rejoin
                assert response.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH)
                c.owned, c.epoch = {}, 0
                c.heartbeat(now, topics)
        group.poll(now, topics)
        # A crashed member's partitions are free only once it has been fenced.
        crashed = [c for c in crashed if c.member_id in group.members]
        assert_owned_at_most_once(list(consumers.values()) + crashed)
    now += SESSION + REBALANCE
    group.poll(now, topics)
    assert not any(c.member_id in group.members for c in crashed)
    for c in consumers.values():
        if c.member_id not in group.members:
            c.owned, c.epoch = {}, 0
    settle(list(consumers.values()), now, topics, rounds=8)
    if consumers:
        assert group.state == ConsumerGroupState.STABLE
        owned = assert_owned_at_most_once(list(consumers.values()))
        assert len(owned) == FOO.num_partitions + BAR.num_partitions


# --- offset commits at an older epoch: checked partition by partition -----------------------------

def commit_error(group, member_id, epoch, partitions, topics=("foo",)):
    """What the group says to a commit of `partitions` (of every topic in `topics`): None when allowed,
    else (error code, message) of the first partition refused, as the coordinator runs the validator."""
    try:
        validate = group.validate_offset_commit(member_id, None, epoch, RequestInfo(9))
        if validate is not None:
            for topic in topics:
                for p in partitions:
                    validate(topic, p)
    except GroupError as e:
        return e.code, e.message
    return None


def epochs_of(group, member_id, topic=FOO):
    return dict(group.members[member_id].assignment_epochs.get(topic.topic_id, {}))


def test_partitions_keep_the_epoch_they_were_assigned_at():
    """Kafka's CurrentAssignmentBuilder: a partition the member keeps keeps its epoch, one it revokes
    keeps it until revoked, a new one gets the target assignment's epoch."""
    topics = image(FOO)
    group = ConsumerGroup("g", EVERY_EPOCH, cluster_topics=lambda: topics)
    a, b = Consumer(group, "a"), Consumer(group, "b")
    a.heartbeat(0, topics)
    assert epochs_of(group, "a") == dict.fromkeys(range(6), 1)
    b.heartbeat(100, topics)  # epoch 2: half of a's partitions go to b, once a lets them go
    a.heartbeat(200, topics, topic_partitions=[TopicPartitions(topic_id=FOO.topic_id, partitions=list(range(6)))])
    member = group.members["a"]
    assert (member.state, member.member_epoch) == (MemberState.UNREVOKED_PARTITIONS, 1)
    kept, revoking = member.assigned_partitions[FOO.topic_id], member.partitions_pending_revocation[FOO.topic_id]
    assert epochs_of(group, "a") == dict.fromkeys(range(6), 1)
    assert {member.pending_revocation_epoch(FOO.topic_id, p) for p in revoking} == {1}
    assert {member.assignment_epoch(FOO.topic_id, p) for p in revoking} == {None}
    a.owned = {FOO.topic_id: set(kept)}
    a.heartbeat(300, topics)
    assert (group.members["a"].member_epoch, epochs_of(group, "a")) == (2, dict.fromkeys(kept, 1))
    b.heartbeat(400, topics)
    assert (group.members["b"].member_epoch, epochs_of(group, "b")) == (2, dict.fromkeys(revoking, 2))
    # The record carries them (tagged AssignmentEpochs, in the order of Partitions).
    value = group.members["b"].assignment_value()
    assert [(tp.partitions, tp.assignment_epochs) for tp in value.assigned_partitions] == [
        (sorted(revoking), [2] * len(revoking))]


def test_offset_commits_at_an_older_epoch_are_checked_partition_by_partition():
    """Kafka's ConsumerGroup.validateOffsetCommit and createAssignmentEpochValidator."""
    topics = image(FOO, BAR)
    group = ConsumerGroup("g", EVERY_EPOCH, cluster_topics=lambda: topics)
    a, b, c = Consumer(group, "a"), Consumer(group, "b"), Consumer(group, "c")
    a.heartbeat(0, topics)  # a: every partition at epoch 1
    settle([a, b], 100, topics)  # epoch 2: b gets half of them, at epoch 2
    kept, given = sorted(a.partitions()), sorted(b.partitions())
    assert (a.epoch, b.epoch) == (2, 2)
    assert commit_error(group, "a", 2, range(6)) is None  # its own epoch: anything goes
    assert commit_error(group, "a", 1, kept) is None
    assert commit_error(group, "a", 0, kept) == (
        ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch 0 is older than assignment epoch 1 for partition foo-{kept[0]}.")
    assert commit_error(group, "a", 1, [kept[0], given[0]]) == (
        ErrorCode.STALE_MEMBER_EPOCH, f"Partition foo-{given[0]} is not assigned or pending revocation for member.")
    assert commit_error(group, "b", 1, given) == (
        ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch 1 is older than assignment epoch 2 for partition foo-{given[0]}.")
    assert commit_error(group, "a", 3, kept) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Received member epoch 3 is newer than current member epoch 2.")
    assert commit_error(group, "a", 1, [0], topics=("bar",)) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Partition bar-0 is not assigned or pending revocation for member.")
    assert commit_error(group, "a", 1, [0], topics=("nowhere",)) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Partition nowhere-0 is not assigned or pending revocation for member.")
    # Epoch 3: c joins; a, at epoch 2, is revoking some of what it got at epoch 1: those it may still commit.
    c.heartbeat(200, topics)
    a.heartbeat(300, topics)
    revoking = sorted(group.members["a"].partitions_pending_revocation[FOO.topic_id])
    assert group.members["a"].state == MemberState.UNREVOKED_PARTITIONS and revoking
    assert commit_error(group, "a", 1, revoking) is None
    assert commit_error(group, "x", 1, kept) == (ErrorCode.UNKNOWN_MEMBER_ID, "Member x is not a member of group g.")
    v8 = RequestInfo(8)
    with pytest.raises(GroupError) as e:
        group.validate_offset_commit("a", None, 1, v8)
    assert e.value.code == ErrorCode.UNSUPPORTED_VERSION
    # TxnOffsetCommit: any version, and a producer outside the group commits anything.
    assert group.validate_offset_commit("a", None, 2, v8, transactional=True) is None
    assert group.validate_offset_commit("", None, -1, v8, transactional=True) is None


def test_a_static_member_leaving_has_its_assignment_epochs_reset():
    """Kafka's resetAssignedPartitionsEpochsToZero: a static member back after a temporary leave
    commits at any epoch the partitions it kept."""
    topics = image(FOO)
    group = ConsumerGroup("g", EVERY_EPOCH, cluster_topics=lambda: topics)
    a, b = Consumer(group, "a", instance_id="i-a"), Consumer(group, "b")
    settle([a, b], 0, topics)
    assert set(epochs_of(group, "a").values()) == {1}
    a.heartbeat(100, topics, member_epoch=-2)
    assert epochs_of(group, "a") == dict.fromkeys(a.partitions(), 0)
    assert group.members["a"].assignment_value().assigned_partitions[0].assignment_epochs == [0] * 3


def test_assignment_epochs_replayed_from_the_record():
    """Kafka's Utils.assignmentFromTopicPartitions: the epochs written, else the record's member
    epoch (0 if negative) for a record without them or with a list of another length."""
    from samsa.coordinator.consumer_group_member import ConsumerGroupMember
    from samsa.wire import coordinator_record
    from samsa.wire.coordinator_records.consumer_group_current_member_assignment_value import (
        ConsumerGroupCurrentMemberAssignmentValue as Value,
    )
    from samsa.wire.coordinator_records.consumer_group_current_member_assignment_value import (
        TopicPartitions as RecordPartitions,
    )
    foo, bar = FOO.topic_id, BAR.topic_id
    value = Value(member_epoch=5, previous_member_epoch=4, state=1,
                  assigned_partitions=[RecordPartitions(foo, [0, 2], [3, 5]), RecordPartitions(bar, [1])],
                  partitions_pending_revocation=[RecordPartitions(foo, [1], [2]), RecordPartitions(bar, [0], [1, 1])])
    key = ConsumerGroupCurrentMemberAssignmentKey("g", "a")
    decoded = coordinator_record.decode_record(
        coordinator_record.GROUP_COORDINATOR, *coordinator_record.encode_record(coordinator_record.CoordinatorRecord(
            key, value)))
    member = ConsumerGroupMember("a").with_assignment(decoded.value)
    assert member.assignment_epochs == {foo: {0: 3, 2: 5, 1: 2}, bar: {1: 5, 0: 5}}
    assert (member.assignment_epoch(foo, 2), member.pending_revocation_epoch(foo, 1),
            member.assignment_epoch(foo, 1), member.pending_revocation_epoch(bar, 0)) == (5, 2, None, 5)
    again = member.assignment_value()
    assert [(tp.partitions, tp.assignment_epochs) for tp in again.assigned_partitions] == [([0, 2], [3, 5]), ([1], [5])]
    assert [(tp.partitions, tp.assignment_epochs) for tp in again.partitions_pending_revocation] == [
        ([1], [2]), ([0], [5])]
    leaving = ConsumerGroupMember("a").with_assignment(Value(member_epoch=-2, assigned_partitions=[
        RecordPartitions(foo, [0])]))
    assert leaving.assignment_epochs == {foo: {0: 0}}


def test_a_partition_given_back_while_being_revoked_is_assigned_anew():
    """Kafka's CurrentAssignmentBuilder.computeNextAssignment: a partition the member was revoking
    that the target gives back to it is a new assignment, at the target epoch."""
    from samsa.coordinator.consumer_group_member import ConsumerGroupMember, reconcile
    foo = FOO.topic_id
    member = ConsumerGroupMember("a", member_epoch=2, previous_member_epoch=1, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned_partitions={foo: frozenset({0})},
                                 partitions_pending_revocation={foo: frozenset({1})},
                                 assignment_epochs={foo: {0: 1, 1: 1}})
    assert (member.assignment_epoch(foo, 0), member.pending_revocation_epoch(foo, 1)) == (1, 1)
    moved = reconcile(member, 3, {foo: frozenset({0, 1, 2})}, frozenset({foo}), lambda t, p: -1, {foo: frozenset({0})})
    assert (moved.member_epoch, moved.state, moved.assignment_epochs) == (3, MemberState.STABLE, {foo: {0: 1, 1: 3, 2: 3}})
