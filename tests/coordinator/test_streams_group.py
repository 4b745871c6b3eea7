"""KIP-1071 streams groups in the group coordinator: the sticky task assignor, the topology's
configuration against the topics (missing source and internal topics, copartitioning), heartbeats
and their errors, reconciliation of tasks between members, records and reload, describe, timers."""

from __future__ import annotations

import uuid

import pytest
from group_harness import Harness

from samsa.coordinator.consumer_group import TopicInfo, TopicsImage
from samsa.coordinator.group import GroupError, RequestInfo
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.coordinator.streams_assignor import AssignorMember, StickyTaskAssignor, Subtopology, TasksTuple
from samsa.coordinator.streams_group import StreamsGroup, StreamsGroupState, StreamsSettings
from samsa.coordinator.streams_group_member import MemberState
from samsa.coordinator.streams_topology import Status, StreamsTopology, configure_topics
from samsa.coordinator.streams_topology_description import validate_update
from samsa.wire.coordinator_record import decode_record, encode_record, record_type
from samsa.wire.errors import ErrorCode
from samsa.wire.protocol import ApiKey, request_class

Heartbeat = request_class(ApiKey.STREAMS_GROUP_HEARTBEAT)
TopologyDescriptionUpdate = request_class(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
TxnOffsetCommit = request_class(ApiKey.TXN_OFFSET_COMMIT)
METADATA_RECORD_TYPE = 17  # StreamsGroupMetadata
A = StickyTaskAssignor()


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


# --- the assignor ---------------------------------------------------------------------------------

def test_assignor_balances_active_tasks_over_processes_and_members():
    members = {"m1": AssignorMember("p1"), "m2": AssignorMember("p1"), "m3": AssignorMember("p2")}
    result = A.assign(members, {"0": Subtopology(6, False)}, 0)
    counts = {m: len(t.active.get("0", ())) for m, t in result.items()}
    assert counts == {"m1": 2, "m2": 2, "m3": 2}
    assert set().union(*(t.active.get("0", set()) for t in result.values())) == set(range(6))
    assert result == A.assign(members, {"0": Subtopology(6, False)}, 0)  # deterministic


def test_assignor_is_sticky_and_moves_only_what_balance_needs():
    members = {"m1": AssignorMember("p1", active={"0": fs(0, 1, 2, 3)}), "m2": AssignorMember("p2")}
    result = A.assign(members, {"0": Subtopology(4, False)}, 0)
    assert len(result["m1"].active["0"]) == 2 and result["m1"].active["0"] <= fs(0, 1, 2, 3)
    assert len(result["m2"].active["0"]) == 2


def test_assignor_places_standbys_on_other_processes_preferring_previous_owners():
    members = {"m1": AssignorMember("p1", active={"0": fs(0, 1)}), "m2": AssignorMember("p2", standby={"0": fs(0, 1)}),
               "m3": AssignorMember("p3")}
    result = A.assign(members, {"0": Subtopology(2, True), "1": Subtopology(1, False)}, 1)
    for p in (0, 1):
        holders = [m for m, t in result.items() if p in t.active.get("0", ()) or p in t.standby.get("0", ())]
        assert len(holders) == 2  # one active, one standby, never on one process
    assert "1" not in {s for t in result.values() for s in t.standby}  # stateless: no standby
    # Not enough processes: the standby is left out rather than put beside its active task.
    single = A.assign({"m1": AssignorMember("p1")}, {"0": Subtopology(2, True)}, 1)
    assert single["m1"] == TasksTuple(active={"0": fs(0, 1)}, standby={})


def test_assignor_gives_an_active_task_to_the_member_with_its_state():
    members = {"m1": AssignorMember("p1"), "m2": AssignorMember("p2", standby={"0": fs(1)})}
    result = A.assign(members, {"0": Subtopology(2, True)}, 0)
    assert result["m2"].active == {"0": fs(1)} and result["m1"].active == {"0": fs(0)}


# --- the topology ---------------------------------------------------------------------------------

TopologyReq = Heartbeat.Topology
Sub = Heartbeat.Subtopology
TopicReq = Heartbeat.TopicInfo
IN = TopicInfo("in", uuid.UUID(int=1), 4)
OUT = TopicInfo("out", uuid.UUID(int=2), 1)
LEFT = TopicInfo("left", uuid.UUID(int=3), 2)


def stateful_topology(epoch: int = 0):
    """A count by key: subtopology 0 reads `in` and repartitions; 1 counts (a changelog) into `out`."""
    return TopologyReq(epoch=epoch, subtopologies=[
        Sub(subtopology_id="0", source_topics=["in"], repartition_sink_topics=["app-rep"]),
        Sub(subtopology_id="1", repartition_source_topics=[TopicReq(name="app-rep")],
            state_changelog_topics=[TopicReq(name="app-store-changelog")])])


def counts(*topics: TopicInfo):
    image = TopicsImage(topics)
    return lambda name: image.by_name[name].num_partitions if name in image.by_name else None


def test_configure_decides_internal_topic_partitions_and_reports_them_missing():
    topology = StreamsTopology.from_request(stateful_topology())
    configured = configure_topics(topology, counts(IN))
    assert configured.error is not None and configured.error.status == Status.MISSING_INTERNAL_TOPICS
    assert configured.error.message == "Internal topics are missing: app-rep, app-store-changelog"
    assert {n: t.partitions for n, t in configured.internal_topics_to_create.items()} == {
        "app-rep": 4, "app-store-changelog": 4}
    rep, changelog = TopicInfo("app-rep", uuid.UUID(int=8), 4), TopicInfo("app-store-changelog", uuid.UUID(int=9), 4)
    ready = configure_topics(topology, counts(IN, rep, changelog))
    assert ready.is_ready() and {s: c.num_tasks for s, c in ready.subtopologies.items()} == {"0": 4, "1": 4}
    wrong = configure_topics(topology, counts(IN, TopicInfo("app-rep", uuid.UUID(int=8), 2), changelog))
    assert wrong.error.status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert wrong.error.message == "Existing topic app-rep has different number of partitions: expected 4, found 2"


def test_configure_reports_missing_source_topics_and_copartitioning():
    topology = StreamsTopology.from_request(stateful_topology())
    missing = configure_topics(topology, counts())
    assert (missing.error.status, missing.error.message) == (Status.MISSING_SOURCE_TOPICS,
                                                             "Source topics in are missing.")
    join = StreamsTopology.from_request(TopologyReq(epoch=0, subtopologies=[
        Sub(subtopology_id="0", source_topics=["in", "left"],
            copartition_groups=[Heartbeat.CopartitionGroup(source_topics=[0, 1])])]))
    bad = configure_topics(join, counts(IN, LEFT))
    assert bad.error.status == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert bad.error.message == "Following topics do not have the same number of partitions: [{in=4, left=2}]"


# --- heartbeats -----------------------------------------------------------------------------------

M1, M2 = "member-1", "member-2"
SETTINGS = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0)
REP = TopicInfo("app-rep", uuid.UUID(int=8), 4)
CHANGELOG = TopicInfo("app-store-changelog", uuid.UUID(int=9), 4)


@pytest.fixture
def h():
    harness = Harness(streams=SETTINGS)
    harness.coordinator.streams.topics = TopicsImage([IN, OUT, REP, CHANGELOG])
    return harness


def beat(h: Harness, member_id: str, epoch: int = 0, process: str = "p1", owned=None, **fields):
    if epoch == 0:
        fields.setdefault("topology", stateful_topology())
        fields.setdefault("rebalance_timeout_ms", 30_000)
        owned = owned or {}
    tasks = None if owned is None else [Heartbeat.TaskIds(subtopology_id=s, partitions=sorted(ps))
                                        for s, ps in owned.items()]
    body = Heartbeat(group_id="g", member_id=member_id, member_epoch=epoch, process_id=process,
                     active_tasks=tasks, standby_tasks=None if owned is None else [],
                     warmup_tasks=None if owned is None else [], **fields)
    response, to_create = h.call(GroupCoordinator.streams_group_heartbeat, body, 1)
    return response, to_create


def active(response) -> dict[str, set[int]]:
    return {t.subtopology_id: set(t.partitions) for t in response.active_tasks}


def test_first_member_gets_every_task(h):
    response, to_create = beat(h, M1)
    assert (response.error_code, response.member_epoch, response.status) == (ErrorCode.NONE, 2, [])
    assert active(response) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}
    assert to_create == {}
    group = h.group("g")
    assert isinstance(group, StreamsGroup) and group.state == StreamsGroupState.STABLE
    assert (response.heartbeat_interval_ms, response.task_offset_interval_ms) == (5000, 60000)


def test_missing_internal_topics_are_reported_and_returned_to_create(h):
    h.coordinator.streams.topics = TopicsImage([IN])
    response, to_create = beat(h, M1)
    assert [(s.status_code, s.status_detail) for s in response.status] == [
        (Status.MISSING_INTERNAL_TOPICS, "Internal topics are missing: app-rep, app-store-changelog")]
    assert sorted(to_create) == ["app-rep", "app-store-changelog"] and response.active_tasks == []
    assert h.group("g").state == StreamsGroupState.NOT_READY
    # The topics appear: the next heartbeat configures the topology and assigns.
    h.coordinator.streams.update_topics(h.now, TopicsImage([IN, REP, CHANGELOG]))
    response, to_create = beat(h, M1, response.member_epoch, owned={})
    assert response.status == [] and to_create == {} and active(response) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}


def test_tasks_move_to_a_new_member_only_after_revocation(h):
    r1, _ = beat(h, M1)
    r2, _ = beat(h, M2, process="p2")
    assert r2.member_epoch == 3 and active(r2) == {}  # its tasks are still M1's
    group = h.group("g")
    assert group.members[M2].state == MemberState.UNRELEASED_TASKS
    # M1 heartbeats: half of its tasks are to be revoked; it stays at its epoch until it lets them go.
    r1, _ = beat(h, M1, 2, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    kept = active(r1)
    assert r1.member_epoch == 2 and sum(map(len, kept.values())) == 4
    assert group.members[M1].state == MemberState.UNREVOKED_TASKS
    r1, _ = beat(h, M1, 2, owned=kept)
    assert r1.member_epoch == 3 and group.members[M1].state == MemberState.STABLE
    r2, _ = beat(h, M2, 3, process="p2", owned={})
    assert sum(map(len, active(r2).values())) == 4 and group.state == StreamsGroupState.STABLE
    assert not (set(active(r2)["0"]) & set(kept.get("0", ())))


def test_the_assignor_starts_from_the_tasks_members_have_not_their_last_target(h):
    """Kafka's TargetAssignmentBuilder.createMemberMetadataAndState: the assignor is given each
    member's current tasks. M2's target has half the tasks but it runs none yet, M1 still runs them
    all: when M3 joins, M1 keeps its quota of them (the first by partition, then subtopology) and M2
    is not favoured for its old target."""
    beat(h, M1)
    beat(h, M2, process="p2")
    group = h.group("g")
    assert sum(map(len, group.target_assignment[M2].active.values())) == 4 and group.members[M2].assigned.is_empty()
    old_target = group.target_assignment[M2].active
    beat(h, "member-3", process="p3")
    assert group.target_assignment[M1].active == {"0": fs(0, 1), "1": fs(0)}
    # The rest by load, ties by process id: not 3 of M2's old target ({"0": {2, 3}, "1": {2}} if it were).
    assert old_target == {"0": fs(2, 3), "1": fs(2, 3)}
    assert group.target_assignment[M2].active == {"0": fs(2), "1": fs(1, 3)}


def test_a_streams_group_replaces_an_empty_classic_group(h):
    """Kafka's getOrCreateStreamsGroup: an application that committed offsets with the classic
    protocol, stopped and restarted with the streams protocol, keeps them; a classic group with
    members is not replaced."""
    assert h.commit("g", {("in", 0): 5}) == {("in", 0): ErrorCode.NONE}  # an empty classic group
    assert h.group("g").type == "classic"
    response, _ = beat(h, M1, epoch=1)
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group g is not a streams group.")
    response, _ = beat(h, M1)
    assert response.error_code == ErrorCode.NONE and isinstance(h.group("g"), StreamsGroup)
    assert h.fetch("g") == {("in", 0): 5}
    fresh = h.restart()
    assert isinstance(fresh.group("g"), StreamsGroup) and fresh.fetch("g") == {("in", 0): 5}
    busy = Harness(streams=SETTINGS)
    busy.coordinator.streams.topics = TopicsImage([IN, OUT, REP, CHANGELOG])
    busy.stable_group("c", 1)
    response, _ = busy.call(GroupCoordinator.streams_group_heartbeat, Heartbeat(
        group_id="c", member_id=M1, member_epoch=0, process_id="p1", topology=stateful_topology(),
        rebalance_timeout_ms=30_000, active_tasks=[], standby_tasks=[], warmup_tasks=[]), 1)
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Group c is not a streams group.")


def test_heartbeat_errors(h):
    response, _ = beat(h, M1, 1)
    assert (response.error_code, response.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                             "Streams group g not found.")
    response, _ = beat(h, M1, topology=None)
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST,
                                                             "Topology must be non-null when (re-)joining.")
    response, _ = beat(h, M1, rebalance_timeout_ms=-1)
    assert response.error_message == "RebalanceTimeoutMs must be provided in first request."
    beat(h, M1)
    response, _ = beat(h, M1, 5, owned={})
    assert response.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    response, _ = beat(h, M2, 1)
    assert (response.error_code, response.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                             "Member member-2 is not a member of group g.")
    bad = stateful_topology()
    bad.subtopologies[1].state_changelog_topics[0].partitions = 3
    response, _ = beat(h, M2, topology=bad)
    assert response.error_code == ErrorCode.STREAMS_INVALID_TOPOLOGY
    # A refused heartbeat changes nothing, even where the member's metadata would have changed.
    appended, epoch = sum(map(len, h.log.values())), h.group("g").group_epoch
    response, _ = beat(h, M1, 2, owned={"9": {0}}, process="p9")
    assert (response.error_code, response.error_message) == (ErrorCode.INVALID_REQUEST,
                                                             "Subtopology 9 does not exist in the topology.")
    assert sum(map(len, h.log.values())) == appended and h.group("g").group_epoch == epoch
    assert h.group("g").members[M1].process_id == "p1"


def test_leave_session_timeout_and_reload(h):
    beat(h, M1)
    beat(h, M2, process="p2")
    response, _ = beat(h, M2, -1)
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, -1)
    assert set(h.group("g").members) == {M1}
    fresh = h.restart()
    group = fresh.group("g")
    assert isinstance(group, StreamsGroup) and set(group.members) == {M1}
    assert group.topology is not None and group.group_epoch == h.group("g").group_epoch
    assert group.members[M1].assigned == h.group("g").members[M1].assigned
    fresh.advance(45_000)
    assert not group.members and group.state == StreamsGroupState.EMPTY


def test_static_member_rejoins_with_its_tasks(h):
    """Kafka's getOrMaybeCreateStaticStreamsGroupMember: a static member that left with epoch -2
    and comes back under a new member id takes over its predecessor's metadata, target and tasks
    without a new group epoch; the instance id is refused while its owner is still in the group."""
    beat(h, M1, instance_id="i1")
    beat(h, M2, process="p2", instance_id="i2")
    r1, _ = beat(h, M1, 2, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}, instance_id="i1")
    r1, _ = beat(h, M1, 2, owned=active(r1), instance_id="i1")
    r2, _ = beat(h, M2, 3, process="p2", owned={}, instance_id="i2")
    group = h.group("g")
    assert group.state == StreamsGroupState.STABLE and group.group_epoch == 3
    m2_tasks = group.members[M2].assigned.active_tasks()
    assert sum(map(len, m2_tasks.values())) == 4
    # The instance id is still owned: another member cannot take it.
    response, _ = beat(h, "member-3", process="p2", instance_id="i2")
    assert (response.error_code, response.error_message) == (
        ErrorCode.UNRELEASED_INSTANCE_ID, "Static member member-3 with instance id i2 cannot join the group because "
        "the instance id is owned by member-2 member.")
    # M2 leaves for a while: it keeps its tasks (their epochs reset), the group waits for it.
    response, _ = beat(h, M2, -2, process="p2", instance_id="i2")
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, -2)
    assert group.members[M2].member_epoch == -2 and group.state == StreamsGroupState.RECONCILING
    assert all(e == 0 for ps in group.members[M2].assigned.active.values() for e in ps.values())
    # A heartbeat of the old member id, or of an unknown instance, is refused.
    response, _ = beat(h, "member-9", 3, process="p2", owned={}, instance_id="i9")
    assert (response.error_code, response.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")
    response, _ = beat(h, "member-9", 3, process="p2", owned={}, instance_id="i2")
    assert (response.error_code, response.error_message) == (
        ErrorCode.FENCED_INSTANCE_ID, "Static member member-9 with instance id i2 was fenced by member member-2.")
    # It comes back as member-3: M2's tasks at once, at the group's epoch, no rebalance.
    appended = len(h.log[h.coordinator.partition_for("g")])
    response, _ = beat(h, "member-3", process="p2", instance_id="i2")
    assert (response.error_code, response.member_epoch) == (ErrorCode.NONE, 3)
    assert active(response) == {s: set(ps) for s, ps in m2_tasks.items()}
    assert set(group.members) == {M1, "member-3"} and group.group_epoch == 3
    assert group.state == StreamsGroupState.STABLE and group.members["member-3"].process_id == "p2"
    assert group.target_assignment["member-3"].active == m2_tasks and M2 not in group.target_assignment
    written = [record_type(k) for k, _ in h.log[h.coordinator.partition_for("g")][appended:]]
    assert written == [22, 21, 19, 19, 21, 22, 22]  # M2 deleted; member-3's metadata, target, tasks
    # The old member id is gone; a reload gives the same group.
    response, _ = beat(h, M2, 3, process="p2", owned={}, instance_id="i2")
    assert response.error_code == ErrorCode.FENCED_INSTANCE_ID
    fresh = h.restart().group("g")
    assert set(fresh.members) == {M1, "member-3"} and fresh.members["member-3"].assigned == \
        group.members["member-3"].assigned


def test_static_member_gone_for_good_is_fenced_when_its_session_expires(h):
    beat(h, M1, instance_id="i1")
    beat(h, M2, process="p2", instance_id="i2")
    beat(h, M2, -2, process="p2", instance_id="i2")
    h.advance(30_000)
    assert h.group("g").members[M2].member_epoch == -2  # still waited for
    response, _ = beat(h, M1, 2, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}, instance_id="i1")
    assert response.error_code == ErrorCode.NONE
    h.advance(15_000)
    assert set(h.group("g").members) == {M1}


def test_rack_aware_assignment_tags(h):
    """Kafka's streamsGroupAssignmentConfigs and the MISSING_CLIENT_TAGS status (v1): the tags are an
    assignment config (a change is a new group epoch, kept in the metadata record); a member without
    every tag is told so; the assignment does not depend on them (nor does Kafka 4.4's)."""
    KV = Heartbeat.KeyValue
    response, _ = beat(h, M1, client_tags=[KV(key="zone", value="a")])
    assert response.status == [] and h.group("g").group_epoch == 2
    plain = h.group("g").target_assignment[M1]
    h.coordinator.streams.defaults = StreamsSettings(initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                                                     rack_aware_assignment_tags=("zone", "rack", "host"))
    response, _ = beat(h, M1, 2, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    assert [(s.status_code, s.status_detail) for s in response.status] == [(
        Status.MISSING_CLIENT_TAGS, "Missing required client tags for rack-aware standby assignment: [rack, host]. "
        "Configure them via 'client.tag.<tagKey>' in your Streams config.")]
    group = h.group("g")
    assert response.member_epoch == 3 and group.group_epoch == 3 and group.target_assignment[M1] == plain
    assert group.last_assignment_configs == {"num.standby.replicas": "0",
                                             "rack.aware.assignment.tags": "zone,rack,host"}
    assert h.restart().group("g").last_assignment_configs == group.last_assignment_configs
    response, _ = beat(h, M1, 3, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}, client_tags=[
        KV(key="zone", value="a"), KV(key="rack", value="r"), KV(key="host", value="h")])
    assert response.status == [] and group.group_epoch == 4  # the member's tags changed
    # v0 has no such status.
    body = Heartbeat(group_id="g", member_id=M2, member_epoch=0, process_id="p2", topology=stateful_topology(),
                     rebalance_timeout_ms=30_000, active_tasks=[], standby_tasks=[], warmup_tasks=[])
    response, _ = h.call(GroupCoordinator.streams_group_heartbeat, body, 0)
    assert response.error_code == ErrorCode.NONE and response.status == []


def test_initial_rebalance_delay(h):
    h = Harness(streams=StreamsSettings(initial_rebalance_delay_ms=3000))
    h.coordinator.streams.topics = TopicsImage([IN, OUT, REP, CHANGELOG])
    response, _ = beat(h, M1)
    assert [(s.status_code, s.status_detail) for s in response.status] == [
        (Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay.")]
    assert response.active_tasks == [] and response.member_epoch == 1  # the initial assignment epoch
    h.advance(3000)
    response, _ = beat(h, M1, 1, owned={})
    assert response.member_epoch == 2 and active(response) == {"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}}


def test_describe(h):
    beat(h, M1)
    [described] = h.coordinator.streams.describe(["g"])
    assert (described.group_state, described.group_epoch, described.assignment_epoch,
            described.assignor_name) == ("Stable", 2, 2, "sticky")
    assert [s.subtopology_id for s in described.topology.subtopologies] == ["0", "1"]
    assert described.topology.subtopologies[1].state_changelog_topics[0].partitions == 4
    [member] = described.members
    assert member.member_id == M1 and member.process_id == "p1"
    assert [(t.subtopology_id, t.partitions) for t in member.assignment.active_tasks] == [
        ("0", [0, 1, 2, 3]), ("1", [0, 1, 2, 3])]
    [missing] = h.coordinator.streams.describe(["nope"])
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_offset_commits_of_members(h):
    beat(h, M1)
    assert h.commit("g", {("in", 0): 5}, M1, 2, version=9) == {("in", 0): ErrorCode.NONE}
    assert h.fetch("g") == {("in", 0): 5}
    assert h.commit("g", {("in", 0): 6}, M1, 3, version=9) == {("in", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert h.commit("g", {("in", 0): 6}, "nobody", 2, version=9) == {("in", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {("in", 0): 6}, M1, 2, version=8) == {("in", 0): ErrorCode.UNSUPPORTED_VERSION}
    assert h.group("g").is_subscribed_to_topic("in") and not h.group("g").is_subscribed_to_topic("out")


def txn_commit(h: Harness, offsets: dict[tuple[str, int], int], member_id: str, epoch: int, version: int = 5):
    T = TxnOffsetCommit
    body = T(transactional_id="tx", group_id="g", producer_id=7, producer_epoch=0,
             generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
                 T.TxnOffsetCommitRequestTopic(name=t, partitions=[T.TxnOffsetCommitRequestPartition(
                     partition_index=p, committed_offset=o, committed_metadata="")]) for (t, p), o in offsets.items()])
    response = h.answer(h.send(GroupCoordinator.txn_offset_commit, body, version=version))
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def test_offset_commits_at_an_older_epoch_are_checked_task_by_task(h):
    """Kafka's StreamsGroup.createAssignmentEpochValidator: at an epoch older than the member's, each
    partition must be the input of an active task the member got at that epoch or before (assigned,
    or still being revoked); one refused partition refuses the whole commit."""
    beat(h, M1)  # every task at epoch 2
    beat(h, M2, process="p2")  # epoch 3: half of them move to M2
    r1, _ = beat(h, M1, 2, owned={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    kept, revoking = active(r1), h.group("g").members[M1].pending_revocation.active
    r1, _ = beat(h, M1, 2, owned=kept)
    assert r1.member_epoch == 3
    k, gone = min(kept["0"]), min(revoking["0"])
    assert h.commit("g", {("in", k): 1}, M1, 2, version=9) == {("in", k): ErrorCode.NONE}
    # A task it gave up, a topic outside the topology, the changelog topic: none is an input.
    assert h.commit("g", {("in", k): 1, ("in", gone): 1}, M1, 2, version=9) == {
        ("in", k): ErrorCode.STALE_MEMBER_EPOCH, ("in", gone): ErrorCode.STALE_MEMBER_EPOCH}
    assert h.commit("g", {("out", 0): 1}, M1, 2, version=9) == {("out", 0): ErrorCode.STALE_MEMBER_EPOCH}
    k1 = min(kept["1"])
    assert h.commit("g", {("app-rep", k1): 1}, M1, 2, version=9) == {("app-rep", k1): ErrorCode.NONE}  # subtopology 1
    group = h.group("g")
    validate = group.validate_offset_commit(M1, None, 2, RequestInfo(9))
    with pytest.raises(GroupError) as refused:
        validate("in", gone)
    assert refused.value.message == f"Task 0-{gone} is not assigned or pending revocation for member."
    with pytest.raises(GroupError) as refused:
        validate("out", 0)
    assert refused.value.message == "Topic out is not in the topology."
    assert group.validate_offset_commit(M1, None, 3, RequestInfo(9)) is None  # its epoch: anything
    # M2 got its tasks at epoch 3: a commit at epoch 2 is older than their assignment epoch.
    r2, _ = beat(h, M2, 3, process="p2", owned={})
    mine = min(active(r2)["0"])
    with pytest.raises(GroupError) as refused:
        group.validate_offset_commit(M2, None, 2, RequestInfo(9))("in", mine)
    assert refused.value.message == f"Received member epoch 2 is older than assignment epoch 3 for task 0-{mine}."
    # TxnOffsetCommit the same; before v6 a stale epoch is ILLEGAL_GENERATION.
    assert txn_commit(h, {("in", k): 1}, M1, 2) == {("in", k): ErrorCode.NONE}
    assert txn_commit(h, {("in", gone): 1}, M1, 2, version=5) == {("in", gone): ErrorCode.ILLEGAL_GENERATION}
    assert txn_commit(h, {("in", gone): 1}, M1, 2, version=6) == {("in", gone): ErrorCode.STALE_MEMBER_EPOCH}
    assert txn_commit(h, {("in", k): 1}, M1, 4, version=6) == {("in", k): ErrorCode.STALE_MEMBER_EPOCH}
    assert txn_commit(h, {("in", k): 1}, "nobody", 3, version=6) == {("in", k): ErrorCode.UNKNOWN_MEMBER_ID}
    assert txn_commit(h, {("in", k): 1}, "", -1) == {("in", k): ErrorCode.NONE}  # a producer outside the group


# --- topology descriptions (KIP-1331) -------------------------------------------------------------

def test_topology_description_update_is_refused_without_a_plugin():
    description = TopologyDescriptionUpdate.TopologyDescription()
    assert validate_update("g", "m", description) == (
        ErrorCode.UNSUPPORTED_VERSION, "The broker has no streams group topology description plugin configured.")
    # The plugin is checked first: without one, a malformed update is refused the same way.
    assert validate_update("", "", None)[0] == ErrorCode.UNSUPPORTED_VERSION
    # With one, Kafka's request checks, in its order.
    assert validate_update("g", "", description, plugin_configured=True) == (
        ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    assert validate_update("", "m", description, plugin_configured=True) == (
        ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    assert validate_update("g", "m", None, plugin_configured=True) == (
        ErrorCode.INVALID_REQUEST, "TopologyDescription can't be null.")
    assert validate_update("g", "m", description, plugin_configured=True) is None


def test_heartbeat_v1_never_asks_for_the_topology_description(h):
    response, _ = beat(h, M1)
    assert response.error_code == ErrorCode.NONE and response.topology_description_required is False
    response, _ = beat(h, M1, response.member_epoch, owned={})
    assert response.topology_description_required is False


def test_stored_and_failed_description_epochs_survive_new_group_epochs_and_reload(h):
    """Kafka's plugin path writes them into StreamsGroupMetadata; a group epoch Samsa writes later
    must carry them on, or a log moved back to Kafka would forget what its plugin holds."""
    beat(h, M1)
    partition = next(p for p, records in h.log.items()
                     if any(record_type(k) == METADATA_RECORD_TYPE for k, _ in records))
    key, value = [(k, v) for k, v in h.log[partition] if record_type(k) == METADATA_RECORD_TYPE][-1]
    record = decode_record("group", key, value)
    record.value.stored_description_topology_epoch = 0
    record.value.failed_description_topology_epoch = 5
    h.log[partition].append(encode_record(record))
    fresh = h.restart()
    group = fresh.group("g")
    assert (group.stored_description_topology_epoch, group.failed_description_topology_epoch) == (0, 5)
    beat(fresh, M2, process="p2")  # a new member: a new group epoch, a new StreamsGroupMetadata record
    key, value = [(k, v) for k, v in fresh.log[partition] if record_type(k) == METADATA_RECORD_TYPE][-1]
    latest = decode_record("group", key, value).value
    assert latest.epoch == group.group_epoch > record.value.epoch
    assert (latest.stored_description_topology_epoch, latest.failed_description_topology_epoch) == (0, 5)
