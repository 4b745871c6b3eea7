"""Offsets and the group-wide APIs: OffsetCommit checks, OffsetFetch, retention, DeleteGroups,
OffsetDelete, ListGroups, and reloading everything from the appended records."""

from group_harness import Harness, OffsetDelete, subscription
from samsa.coordinator.classic_group import EMPTY, STABLE
from samsa.coordinator.group import RequestInfo
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.wire.coordinator_record import decode_value
from samsa.wire.coordinator_record import record_type as key_type
from samsa.wire.coordinator_records.offset_commit_value import OffsetCommitValue
from samsa.wire.errors import ErrorCode

E = ErrorCode
DAY = 24 * 3600 * 1000


# --- OffsetCommit and OffsetFetch -----------------------------------------------------------------

def test_a_simple_commit_creates_an_empty_group_and_fetch_reads_it_back():
    h = Harness()
    assert h.commit("simple", {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}) == {
        ("t", 0): E.NONE, ("t", 1): E.NONE, ("u", 0): E.NONE}
    group = h.group("simple")
    assert group.state is EMPTY and group.protocol_type == ""
    assert h.fetch("simple", {"t": [0, 1, 2]}) == {("t", 0): 10, ("t", 1): 20, ("t", 2): -1}
    assert h.fetch("simple") == {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}
    assert h.fetch("unknown", {"t": [0]}) == {("t", 0): -1}
    assert h.fetch("unknown") == {}


def test_commits_are_checked_against_the_generation_and_member():
    h = Harness()
    leader, follower = h.stable_group("g", 2)
    assert h.commit("g", {("t", 0): 1}, leader.member_id, 1) == {("t", 0): E.NONE}
    assert h.commit("g", {("t", 0): 1}, leader.member_id, 0) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit("g", {("t", 0): 1}, "stranger", 1) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # generation -1: group not empty
    # A rebalance: the previous generation may still commit while members rejoin...
    h.join("g", leader.member_id)
    assert h.commit("g", {("t", 0): 2}, follower.member_id, 1) == {("t", 0): E.NONE}
    h.join("g", follower.member_id)
    # ...but not once the new generation's JoinGroup responses are out.
    assert h.commit("g", {("t", 0): 3}, follower.member_id, 2) == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 2}


def test_committing_to_a_missing_group_with_a_generation():
    h = Harness()
    assert h.commit("gone", {("t", 0): 1}, "m", 3, version=8) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit("gone", {("t", 0): 1}, "m", 3, version=9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert h.group("gone") is None


def test_metadata_over_offset_metadata_max_bytes_is_refused_per_partition():
    h = Harness(offset_metadata_max_bytes=10)
    errors = h.commit("g", {("t", 0): 1}, metadata="x" * 11)
    assert errors == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.commit("g", {("t", 0): 1}, metadata="x" * 10) == {("t", 0): E.NONE}
    assert h.commit("g", {("t", 1): 1}, metadata=None) == {("t", 1): E.NONE}
    result = h.coordinator.fetch_offsets(RequestInfo(8), "g", [("t", [0, 1])])
    assert [p.metadata for p in result.topics[0].partitions] == ["x" * 10, ""]


def test_a_failed_append_commits_nothing():
    h = Harness()
    h.fail_appends = E.RECORD_LIST_TOO_LARGE
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.INVALID_COMMIT_OFFSET_SIZE}
    h.fail_appends = E.NOT_LEADER_OR_FOLLOWER
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.NOT_COORDINATOR}
    assert h.fetch("g", {"t": [0]}) == {("t", 0): -1}


def test_commit_records_use_kafkas_value_versions():
    h = Harness()
    h.commit("g", {("t", 0): 7})
    h.commit("g", {("t", 1): 8}, version=2, retention_ms=DAY)
    records = h.log[h.coordinator.partition_for("g")]
    assert [key_type(k) for k, _ in records] == [1, 1]
    assert [v[:2] for _, v in records] == [b"\x00\x04", b"\x00\x01"]
    assert decode_value(OffsetCommitValue, records[1][1])[0].expire_timestamp == h.now + DAY


# --- retention ------------------------------------------------------------------------------------

def test_offsets_of_an_empty_group_expire_retention_after_it_became_empty():
    retention = 7 * DAY
    h = Harness(offsets_retention_ms=retention, offsets_retention_check_interval_ms=60_000)
    member, = h.stable_group("g", 1)
    assert h.commit("g", {("t", 0): 1}, member.member_id, 1) == {("t", 0): E.NONE}
    h.leave("g", (member.member_id, None))
    assert h.group("g").state is EMPTY
    h.advance(retention - 60_000)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): 1}
    h.advance(60_000)
    assert h.fetch("g", {"t": [0]}) == {("t", 0): -1}
    assert h.group("g") is None  # empty and without offsets: gone too
    tombstones = [k for k, v in h.log[h.coordinator.partition_for("g")] if v is None]
    assert [key_type(k) for k in tombstones] == [1, 2]


def test_a_stable_consumer_groups_offsets_expire_only_for_topics_it_no_longer_consumes():
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
    member, = h.stable_group("g", 1, protocols=[("range", subscription("t"))], session=1_800_000)
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, member.member_id, 1)
    for _ in range(60):  # over a day, heartbeating
        h.advance(1_700_000)
        h.heartbeat("g", member.member_id, 1)
    assert h.group("g").state is STABLE
    assert h.fetch("g") == {("t", 0): 1}


def test_a_simple_groups_offsets_expire_from_their_commit():
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60_000)
    h.commit("s", {("t", 0): 1})
    h.advance(DAY // 2)
    h.commit("s", {("t", 1): 2})
    h.advance(DAY // 2)
    assert h.fetch("s") == {("t", 1): 2}
    h.advance(DAY // 2)
    assert h.fetch("s") == {} and h.group("s") is None


def test_a_commit_with_its_own_retention_expires_at_that_time():
    h = Harness(offsets_retention_ms=7 * DAY, offsets_retention_check_interval_ms=60_000)
    h.commit("s", {("t", 0): 1}, version=3, retention_ms=DAY)
    h.advance(DAY + 60_000)
    assert h.fetch("s") == {}


# --- DeleteGroups, OffsetDelete, ListGroups ---------------------------------------------------------

def test_delete_groups():
    h = Harness()
    h.stable_group("busy", 1)
    h.commit("idle", {("t", 0): 1, ("t", 1): 2})
    assert h.delete_groups("busy", "idle", "nope", "idle") == {
        "busy": E.NON_EMPTY_GROUP, "idle": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert h.group("idle") is None and h.fetch("idle") == {}
    written = h.log[h.coordinator.partition_for("idle")][-3:]
    assert [(key_type(k), v) for k, v in written] == [(1, None), (1, None), (2, None)]


def test_offset_delete():
    h = Harness()
    member, = h.stable_group("g", 1, protocols=[("range", subscription("t"))])
    h.commit("g", {("t", 0): 1, ("u", 0): 2}, member.member_id, 1)
    body = OffsetDelete(group_id="g", topics=[
        OffsetDelete.OffsetDeleteRequestTopic(name=n, partitions=[OffsetDelete.OffsetDeleteRequestPartition(
            partition_index=0)]) for n in ("t", "u")])
    response = h.call(GroupCoordinator.offset_delete, body)
    assert response.error_code == E.NONE
    assert {t.name: t.partitions[0].error_code for t in response.topics} == {
        "t": E.GROUP_SUBSCRIBED_TO_TOPIC, "u": E.NONE}
    assert h.fetch("g") == {("t", 0): 1}
    body.group_id = "nope"
    assert h.call(GroupCoordinator.offset_delete, body).error_code == E.GROUP_ID_NOT_FOUND


def test_offset_delete_refuses_a_non_consumer_group_with_members():
    h = Harness()
    h.stable_group("connect", 1, protocol_type="connect")
    body = OffsetDelete(group_id="connect", topics=[])
    assert h.call(GroupCoordinator.offset_delete, body).error_code == E.NON_EMPTY_GROUP


def test_list_groups_filters_by_state_and_type_without_case():
    h = Harness()
    h.stable_group("stable", 1)
    h.commit("simple", {("t", 0): 1})
    code, groups = h.coordinator.list_groups([], [])
    assert code == E.NONE
    assert {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in groups} == {
        ("stable", "consumer", "Stable", "classic"), ("simple", "", "Empty", "classic")}
    assert [g.group_id for g in h.coordinator.list_groups(["STABLE"], [])[1]] == ["stable"]
    assert [g.group_id for g in h.coordinator.list_groups([], ["Classic"])[1]] == ["stable", "simple"]
    assert h.coordinator.list_groups([], ["consumer"])[1] == []


def test_offsets_of_a_deleted_topic_go_from_every_group():
    h = Harness()
    h.commit("a", {("t", 0): 1, ("u", 0): 2})
    h.commit("b", {("t", 1): 3})
    h.apply(h.coordinator.delete_topic_offsets(h.now, {"t"}))
    assert h.fetch("a") == {("u", 0): 2} and h.fetch("b") == {}
    assert h.restart().fetch("a") == {("u", 0): 2}


# --- reload -----------------------------------------------------------------------------------------

def test_groups_and_offsets_come_back_from_their_records():
    h = Harness()
    leader, follower = h.stable_group("g", 2, session=30_000)
    h.commit("g", {("t", 0): 11}, leader.member_id, 1)
    h.commit("simple", {("t", 0): 5, ("t", 1): 6})
    h.commit("deleted", {("t", 0): 1})
    h.delete_groups("deleted")
    h.commit("simple", {("t", 1): 7})

    h2 = h.restart()
    group = h2.group("g")
    assert (group.state, group.generation_id, group.leader_id, group.protocol_name) == (
        STABLE, 1, leader.member_id, "range")
    assert {m.member_id: m.assignment for m in group.members.values()} == {
        leader.member_id: leader.member_id.encode(), follower.member_id: follower.member_id.encode()}
    assert group.subscribed_topics == {"t"}
    assert h2.fetch("g") == {("t", 0): 11}
    assert h2.fetch("simple") == {("t", 0): 5, ("t", 1): 7}
    assert h2.group("simple").state is EMPTY
    assert h2.group("deleted") is None and h2.fetch("deleted") == {}
    # Members carry on with their generation: heartbeats and syncs work after the reload...
    assert h2.heartbeat("g", leader.member_id, 1) == E.NONE
    assert h2.answer(h2.sync("g", follower.member_id, 1)).assignment == follower.member_id.encode()
    # ...and a member that never comes back is expired by its session timeout.
    h2.advance(29_000)
    assert h2.heartbeat("g", leader.member_id, 1) == E.NONE
    h2.advance(30_000)
    assert follower.member_id not in h2.group("g").members


def test_an_empty_group_is_reloaded_empty_with_the_time_it_became_empty():
    h = Harness()
    member, = h.stable_group("g", 1)
    h.advance(1000)
    h.leave("g", (member.member_id, None))
    became_empty = h.now
    h.advance(5000)
    h2 = h.restart()
    group = h2.group("g")
    assert group.state is EMPTY and group.current_state_timestamp == became_empty and group.generation_id == 2
