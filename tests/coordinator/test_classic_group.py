"""The classic group state machine: joins, syncs, heartbeats, leaves, every timeout, static members.

Driven through GroupCoordinator with an explicit clock (group_harness.Harness); no sleeps.
"""

from group_harness import Harness, SyncGroup, subscription
from samsa.coordinator.classic_group import (
    COMPLETING_REBALANCE,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
)
from samsa.coordinator.group_coordinator import GroupCoordinator
from samsa.wire.errors import ErrorCode

E = ErrorCode


# --- JoinGroup ------------------------------------------------------------------------------------

def test_v4_join_asks_for_a_member_id_first_and_the_first_joiner_leads():
    h = Harness()
    first = h.answer(h.join("g", client_id="app"))
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("app-")
    assert first.member_id == "app-00000000-0000-0000-0000-000000000001"  # the harness's first uuid
    assert first.generation_id == -1
    assert h.group("g").state is EMPTY and first.member_id in h.group("g").pending_members
    joined_ticket = h.join("g", first.member_id)
    assert h.answer(joined_ticket) is None  # parked: the initial delay (0 here) runs on the timer
    h.advance(0)
    response = h.answer(joined_ticket)
    assert response.error_code == E.NONE and response.generation_id == 1
    assert response.leader == response.member_id == first.member_id
    assert response.protocol_type == "consumer" and response.protocol_name == "range"
    assert [(m.member_id, m.metadata) for m in response.members] == [(first.member_id, subscription("t"))]
    assert h.group("g").state is COMPLETING_REBALANCE
    # The same metadata again in CompletingRebalance (a lost response): the same answer.
    assert h.answer(h.join("g", first.member_id)) == response


def test_v3_join_gets_its_member_id_with_the_join_response():
    h = Harness()
    ticket = h.join("g", version=3)
    h.advance(0)
    response = h.answer(ticket)
    assert response.error_code == E.NONE and response.member_id and response.generation_id == 1


def test_initial_rebalance_delay_waits_and_extends_while_members_arrive():
    # Kafka's InitialDelayedJoin: delay 3 s, extended by 3 s while new members join, up to the
    # rebalance timeout (10 s here).
    h = Harness(group_initial_rebalance_delay_ms=3000)
    a = h.join_new_member("g", rebalance=10_000)
    h.advance(2000)
    b = h.join_new_member("g", rebalance=10_000)
    h.advance(999)
    assert h.answer(a) is None and h.answer(b) is None  # 2999 ms: first delay not over
    h.advance(1)  # 3000 ms: a member arrived during the delay, so it is extended
    assert h.answer(a) is None
    h.advance(2999)
    assert h.answer(a) is None
    h.advance(1)  # 6000 ms: nobody new, the join completes with both
    assert h.answer(a).generation_id == h.answer(b).generation_id == 1
    assert len(h.answer(a).members) == 2 and h.answer(b).members == []


def test_initial_rebalance_delay_stops_at_the_rebalance_timeout():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    tickets = [h.join_new_member("g", rebalance=7000)]
    for _ in range(3):  # a new member every 2 s keeps extending the delay...
        h.advance(2000)
        tickets.append(h.join_new_member("g", rebalance=7000))
    h.advance(999)
    assert [h.answer(t) for t in tickets] == [None] * 4
    h.advance(1)  # ...but not past the rebalance timeout: 7 s after the first join
    assert [h.answer(t).generation_id for t in tickets] == [1] * 4


def test_invalid_requests_are_refused_with_kafkas_codes():
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=60_000)
    assert h.answer(h.join("", version=3)).error_code == E.INVALID_GROUP_ID
    assert h.answer(h.join("g", session=5999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.answer(h.join("g", session=60_001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert h.answer(h.join("g", "nobody")).error_code == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.join("g", protocol_type="", version=3)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.join("g", protocols=[], version=3)).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_member_without_a_common_protocol_or_with_another_type_is_refused():
    h = Harness()
    h.stable_group("g", 1)
    other = h.answer(h.join("g", protocols=[("roundrobin", b"")], version=3))
    assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    connect = h.answer(h.join("g", protocol_type="connect", version=3))
    assert connect.error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_the_protocol_chosen_is_supported_by_all_and_has_the_most_votes():
    h = Harness()
    a = h.join_new_member("g", protocols=[("roundrobin", b"a1"), ("range", b"a2"), ("sticky", b"a3")])
    b = h.join_new_member("g", protocols=[("range", b"b1"), ("sticky", b"b2")])
    c = h.join_new_member("g", protocols=[("sticky", b"c1"), ("range", b"c2")])
    d = h.join_new_member("g", protocols=[("range", b"d1"), ("sticky", b"d2")])
    h.advance(0)
    # roundrobin is not supported by all; range gets a's and b's and d's votes, sticky only c's.
    leader = h.answer(a)
    assert leader.protocol_name == "range"
    assert {m.member_id: m.metadata for m in leader.members} == {
        h.answer(a).member_id: b"a2", h.answer(b).member_id: b"b1", h.answer(c).member_id: b"c2",
        h.answer(d).member_id: b"d1"}


def test_group_max_size_turns_away_new_members():
    h = Harness(group_max_size=2)
    h.stable_group("g", 2)
    response = h.answer(h.join("g", version=3))
    assert response.error_code == E.GROUP_MAX_SIZE_REACHED and response.member_id == ""
    assert h.group("g").size == 2 and h.group("g").state is STABLE


def test_a_new_member_rebalances_a_stable_group_and_the_join_completes_when_all_rejoin():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    leader, follower = h.stable_group("g", 2)
    newcomer = h.join_new_member("g")
    assert h.group("g").state is PREPARING_REBALANCE
    assert h.heartbeat("g", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    old_leader = h.join("g", leader.member_id)
    assert h.answer(newcomer) is None and h.answer(old_leader) is None
    last = h.join("g", follower.member_id)
    # Every member rejoined: no delay (that is only for a group's first generation).
    for ticket in (newcomer, old_leader, last):
        assert h.answer(ticket).generation_id == 2
    assert h.answer(old_leader).leader == leader.member_id  # the leader stays the leader
    assert len(h.answer(old_leader).members) == 3


def test_rebalance_of_a_stable_three_member_group_completes_at_the_last_join():
    h = Harness()
    members = h.stable_group("g", 3)
    h.join("g", members[0].member_id, protocols=[("range", subscription("t", "u"))])  # leader rejoins: rebalance
    h.advance(100)
    h.join("g", members[1].member_id)
    h.advance(100)
    last = h.join("g", members[2].member_id)
    assert h.answer(last).generation_id == 2  # answered at the last JoinGroup, at the same instant


def test_members_that_do_not_rejoin_within_the_rebalance_timeout_are_dropped():
    h = Harness()
    leader, follower = h.stable_group("g", 2, rebalance=20_000)
    ticket = h.join("g", leader.member_id, protocols=[("range", subscription("x"))], rebalance=20_000)
    for _ in range(2):
        h.advance(9_000)
        assert h.heartbeat("g", follower.member_id, 1) == E.REBALANCE_IN_PROGRESS  # alive, but does not rejoin
    h.advance(1_999)
    assert h.answer(ticket) is None
    h.advance(1)  # 20 s: the rebalance timeout
    response = h.answer(ticket)
    assert response.generation_id == 2 and [m.member_id for m in response.members] == [leader.member_id]
    assert follower.member_id not in h.group("g").members
    assert h.heartbeat("g", follower.member_id, 1) == E.UNKNOWN_MEMBER_ID


def test_the_leader_that_does_not_rejoin_is_replaced_by_one_that_did():
    h = Harness()
    leader, follower = h.stable_group("g", 2, rebalance=20_000)
    ticket = h.join("g", follower.member_id, protocols=[("range", subscription("x"))], rebalance=20_000)
    for _ in range(2):  # the leader is alive but does not rejoin
        h.advance(9_000)
        assert h.heartbeat("g", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    h.advance(2_000)  # the rebalance timeout
    response = h.answer(ticket)
    assert response.leader == follower.member_id and len(response.members) == 1
    assert leader.member_id not in h.group("g").members


# --- SyncGroup ------------------------------------------------------------------------------------

def test_followers_wait_for_the_leaders_assignment_which_is_stored_first():
    h = Harness()
    a, b = h.join_new_member("g"), h.join_new_member("g")
    h.advance(0)
    leader, follower = h.answer(a), h.answer(b)
    waiting = h.sync("g", follower.member_id, 1)
    assert h.answer(waiting) is None and h.group("g").state is COMPLETING_REBALANCE
    partition = h.coordinator.partition_for("g")
    before = len(h.log.get(partition, []))
    done = h.answer(h.sync("g", leader.member_id, 1, {leader.member_id: b"A"}))  # follower missing: empty
    assert len(h.log[partition]) == before + 1
    assert (done.error_code, done.assignment, done.protocol_name) == (E.NONE, b"A", "range")
    assert (h.answer(waiting).error_code, h.answer(waiting).assignment) == (E.NONE, b"")
    assert h.group("g").state is STABLE
    # Stable: a sync gets the member's current assignment at once.
    assert h.answer(h.sync("g", leader.member_id, 1)).assignment == b"A"


def test_sync_errors():
    h = Harness()
    leader, follower = h.stable_group("g", 2)
    assert h.answer(h.sync("g", leader.member_id, 7)).error_code == E.ILLEGAL_GENERATION
    assert h.answer(h.sync("g", "who", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync("nope", "who", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync("", "who", 1)).error_code == E.INVALID_GROUP_ID
    h.join("g", leader.member_id)  # rebalance
    assert h.answer(h.sync("g", follower.member_id, 1)).error_code == E.REBALANCE_IN_PROGRESS


def test_sync_v5_needs_protocol_type_and_name_matching_the_group():
    h = Harness()
    leader, = h.stable_group("g", 1)
    missing = SyncGroup(group_id="g", generation_id=1, member_id=leader.member_id)
    assert h.call(GroupCoordinator.sync_group, missing, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.call(GroupCoordinator.sync_group, missing, 4).error_code == E.NONE
    wrong = SyncGroup(group_id="g", generation_id=1, member_id=leader.member_id, protocol_type="consumer",
                      protocol_name="roundrobin")
    assert h.call(GroupCoordinator.sync_group, wrong, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_a_failed_assignment_append_fails_the_syncs_and_rebalances():
    h = Harness()
    a, b = h.join_new_member("g"), h.join_new_member("g")
    h.advance(0)
    leader, follower = h.answer(a), h.answer(b)
    waiting = h.sync("g", follower.member_id, 1)
    h.fail_appends = E.KAFKA_STORAGE_ERROR
    done = h.answer(h.sync("g", leader.member_id, 1, {leader.member_id: b"A", follower.member_id: b"B"}))
    assert done.error_code == h.answer(waiting).error_code == E.NOT_COORDINATOR
    assert h.group("g").state is PREPARING_REBALANCE


def test_members_that_do_not_sync_within_the_rebalance_timeout_are_dropped():
    h = Harness()
    a, b = h.join_new_member("g", rebalance=15_000), h.join_new_member("g", rebalance=15_000)
    h.advance(0)
    leader, follower = h.answer(a), h.answer(b)
    h.answer(h.sync("g", leader.member_id, 1, {leader.member_id: b"A"}))
    assert h.group("g").state is STABLE
    h.advance(9_000)
    assert h.heartbeat("g", leader.member_id, 1) == E.NONE
    assert h.heartbeat("g", follower.member_id, 1) == E.NONE  # heartbeats, but never syncs
    h.advance(6_000)
    assert follower.member_id not in h.group("g").members
    assert h.group("g").state is PREPARING_REBALANCE
    assert h.heartbeat("g", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS


# --- sessions -------------------------------------------------------------------------------------

def test_a_member_without_heartbeats_is_removed_at_its_session_timeout():
    h = Harness()
    leader, follower = h.stable_group("g", 2, session=10_000)
    h.advance(9_000)
    assert h.heartbeat("g", leader.member_id, 1) == E.NONE
    h.advance(999)
    assert follower.member_id in h.group("g").members
    h.advance(1)  # the follower's last word was its SyncGroup, 10 s ago
    assert follower.member_id not in h.group("g").members
    assert h.group("g").state is PREPARING_REBALANCE
    assert h.heartbeat("g", leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", follower.member_id, 1) == E.UNKNOWN_MEMBER_ID
    rejoin = h.join("g", leader.member_id)
    assert h.answer(rejoin).generation_id == 2 and len(h.answer(rejoin).members) == 1


def test_an_offset_commit_counts_as_a_heartbeat():
    h = Harness()
    member, = h.stable_group("g", 1, session=10_000)
    for _ in range(3):
        h.advance(9_000)
        assert h.commit("g", {("t", 0): 5}, member.member_id, 1) == {("t", 0): E.NONE}
    assert h.group("g").state is STABLE


def test_a_member_told_member_id_required_that_never_joins_expires():
    h = Harness()
    pending = h.answer(h.join("g", session=10_000)).member_id
    assert pending in h.group("g").pending_members
    h.advance(10_000)
    assert pending not in h.group("g").pending_members
    assert h.answer(h.join("g", pending)).error_code == E.UNKNOWN_MEMBER_ID


def test_a_pending_member_that_never_joins_does_not_block_a_rebalance():
    h = Harness()
    member, = h.stable_group("g", 1)
    h.answer(h.join("g"))  # MEMBER_ID_REQUIRED: the group now waits for that member id too
    h.join("g", member.member_id, protocols=[("range", subscription("x"))])
    assert h.group("g").state is PREPARING_REBALANCE and not h.group("g").has_all_members_joined()
    h.advance(10_000)  # the pending member's session ends, and with it the wait
    assert h.group("g").state is COMPLETING_REBALANCE


def test_a_new_member_stuck_in_a_long_join_is_dropped_after_five_minutes():
    h = Harness()
    member, = h.stable_group("g", 1, rebalance=600_000)
    newcomer = h.join_new_member("g", rebalance=600_000)
    for _ in range(33):  # the old member heartbeats but never rejoins
        h.advance(9_000)
        assert h.heartbeat("g", member.member_id, 1) == E.REBALANCE_IN_PROGRESS
    h.advance(2_999)
    assert h.answer(newcomer) is None
    h.advance(1)
    response = h.answer(newcomer)
    assert (response.error_code, response.member_id) == (E.UNKNOWN_MEMBER_ID, "")


def test_waiting_in_a_join_keeps_an_existing_members_session():
    h = Harness()
    a, b = h.stable_group("g", 2, session=10_000, rebalance=60_000)
    parked = h.join("g", a.member_id)
    h.advance(30_000)  # b is dropped by its session; a, parked, is not
    assert b.member_id not in h.group("g").members
    assert h.answer(parked).generation_id == 2


# --- Heartbeat ------------------------------------------------------------------------------------

def test_heartbeat_errors():
    h = Harness()
    member, = h.stable_group("g", 1)
    assert h.heartbeat("g", member.member_id, 0) == E.ILLEGAL_GENERATION
    assert h.heartbeat("g", "x", 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nope", "x", 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", "x", 1) == E.INVALID_GROUP_ID


# --- LeaveGroup -----------------------------------------------------------------------------------

def test_leave_rebalances_and_the_last_leave_empties_the_group():
    h = Harness()
    leader, follower = h.stable_group("g", 2)
    assert h.leave("g", (follower.member_id, None), version=2).error_code == E.NONE
    rejoin = h.join("g", leader.member_id)
    assert h.answer(rejoin).generation_id == 2
    h.answer(h.sync("g", leader.member_id, 2, {leader.member_id: b"A"}))
    response = h.leave("g", (leader.member_id, None), ("ghost", None))
    assert response.error_code == E.NONE
    assert [(m.member_id, m.error_code) for m in response.members] == [
        (leader.member_id, E.NONE), ("ghost", E.UNKNOWN_MEMBER_ID)]
    group = h.group("g")
    assert group.state is EMPTY and group.generation_id == 3 and group.protocol_name is None


def test_leave_before_v3_reports_the_members_error_at_the_top():
    h = Harness()
    h.stable_group("g", 1)
    assert h.leave("g", ("ghost", None), version=1).error_code == E.UNKNOWN_MEMBER_ID
    assert h.leave("nope", ("ghost", None), version=1).error_code == E.UNKNOWN_MEMBER_ID


def test_a_parked_member_leaving_gets_unknown_member_id_on_its_join():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    first = h.answer(h.join("g")).member_id
    parked = h.join("g", first)
    h.leave("g", (first, None))
    assert (h.answer(parked).error_code, h.answer(parked).member_id) == (E.UNKNOWN_MEMBER_ID, "")


# --- static membership ----------------------------------------------------------------------------

def test_a_static_member_rejoins_a_stable_group_without_a_rebalance():
    h = Harness()
    a = h.join("g", instance_id="i-a")
    b = h.join("g", instance_id="i-b")
    h.advance(0)
    leader, follower = h.answer(a), h.answer(b)
    h.answer(h.sync("g", follower.member_id, 1))
    h.answer(h.sync("g", leader.member_id, 1, {leader.member_id: b"A", follower.member_id: b"B"}))
    # the follower restarts: unknown member id, same instance id
    rejoined = h.answer(h.join("g", instance_id="i-b"))
    assert rejoined.error_code == E.NONE and rejoined.generation_id == 1 and rejoined.member_id != follower.member_id
    assert h.group("g").state is STABLE
    assert h.answer(h.sync("g", rejoined.member_id, 1, instance_id="i-b")).assignment == b"B"
    # the old incarnation is fenced
    assert h.heartbeat("g", follower.member_id, 1, instance_id="i-b") == E.FENCED_INSTANCE_ID
    assert h.commit("g", {("t", 0): 1}, follower.member_id, 1, instance_id="i-b") == {("t", 0): E.FENCED_INSTANCE_ID}
    assert h.heartbeat("g", rejoined.member_id, 1, instance_id="i-b") == E.NONE


def test_a_static_leader_rejoining_at_v9_is_told_to_skip_the_assignment():
    h = Harness()
    a = h.join("g", instance_id="i-a")
    h.advance(0)
    leader = h.answer(a)
    h.answer(h.sync("g", leader.member_id, 1, {leader.member_id: b"A"}))
    at_v9 = h.answer(h.join("g", instance_id="i-a", version=9))
    assert at_v9.leader == at_v9.member_id and at_v9.skip_assignment and len(at_v9.members) == 1
    at_v8 = h.answer(h.join("g", instance_id="i-a", version=8))
    assert at_v8.leader == at_v9.member_id != at_v8.member_id  # the old leader id: no assignment to run
    assert h.group("g").generation_id == 1 and h.group("g").state is STABLE


def test_a_static_member_rejoining_while_completing_rebalance_restarts_it():
    h = Harness()
    a, b = h.join("g", instance_id="i-a"), h.join("g", instance_id="i-b")
    h.advance(0)
    old = h.answer(b)
    parked = h.sync("g", old.member_id, 1, instance_id="i-b")
    again = h.join("g", instance_id="i-b")
    assert h.answer(parked).error_code == E.FENCED_INSTANCE_ID
    assert h.group("g").state is PREPARING_REBALANCE
    assert h.answer(again) is None
    h.join("g", h.answer(a).member_id, instance_id="i-a")
    assert h.answer(again).generation_id == 2


def test_a_static_member_that_does_not_rejoin_stays_in_the_group_through_a_rebalance():
    h = Harness()
    a, b = h.join("g", instance_id="i-a"), h.join("g", instance_id="i-b", session=60_000)
    h.advance(0)
    leader, follower = h.answer(a), h.answer(b)
    h.answer(h.sync("g", leader.member_id, 1, {}))
    rejoin = h.join("g", leader.member_id, instance_id="i-a", protocols=[("range", subscription("x"))])
    h.advance(30_000)
    assert h.answer(rejoin).generation_id == 2 and follower.member_id in h.group("g").members


def test_an_administrator_removes_a_static_member_by_instance_id():
    h = Harness()
    a = h.join("g", instance_id="i-a")
    h.advance(0)
    response = h.leave("g", ("", "i-a"), ("", "i-unknown"))
    assert [m.error_code for m in response.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert h.group("g").size == 0 and h.answer(a).member_id not in h.group("g").members


def test_a_static_member_with_a_stale_member_id_is_fenced_on_join():
    h = Harness()
    ticket = h.join("g", instance_id="i-a", version=5)
    h.advance(0)
    first = h.answer(ticket)
    h.join("g", instance_id="i-a", version=5)  # replaced by a new incarnation
    stale = h.answer(h.join("g", first.member_id, instance_id="i-a", version=5))
    assert stale.error_code == E.FENCED_INSTANCE_ID


# --- DescribeGroups and shutdown --------------------------------------------------------------------

def test_describe_a_stable_group_and_an_unknown_one():
    h = Harness()
    leader, follower = h.stable_group("g", 2)
    described, unknown = h.coordinator.describe_groups(None, ["g", "nope"])
    assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    assert {m.member_id: (m.member_assignment, m.client_host) for m in described.members} == {
        leader.member_id: (leader.member_id.encode(), "/127.0.0.1"),
        follower.member_id: (follower.member_id.encode(), "/127.0.0.1")}
    assert (unknown.error_code, unknown.group_state, unknown.members) == (E.NONE, "Dead", [])


def test_unload_answers_parked_requests_and_refuses_new_ones():
    h = Harness(group_initial_rebalance_delay_ms=3000)
    parked = h.join_new_member("g")
    h.apply(h.coordinator.unload(h.now))
    assert h.answer(parked).error_code == E.NOT_COORDINATOR
    assert h.answer(h.join("g")).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert h.commit("g", {("t", 0): 1}) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
