"""The sticky task assignor of streams groups against the cases of Kafka 4.4's own
StickyTaskAssignorTest (group-coordinator, streams/assignor): the same members, previous tasks,
subtopologies and standby replicas, the same assertions. Kafka's ties fall by HashMap order, so its
tests assert only what every tie-break gives; so do these (Samsa's ties fall by id, and a result
is the same at every run)."""

from __future__ import annotations

from samsa.coordinator.streams_assignor import AssignorMember, StickyTaskAssignor, Subtopology, TasksTuple

A = StickyTaskAssignor()
S = "test-subtopology"
S1, S2 = "test-subtopology1", "test-subtopology2"


def fs(*ps: int) -> frozenset[int]:
    return frozenset(ps)


def member(process: str, active=None, standby=None, offsets=None) -> AssignorMember:
    return AssignorMember(process, active or {}, standby or {}, offsets or {})


def subtopologies(num_tasks: int, stateful: bool, *ids: str) -> dict[str, Subtopology]:
    """Kafka's TopologyDescriberImpl: every subtopology with the same number of tasks."""
    return {s: Subtopology(num_tasks, stateful) for s in ids}


def count(result: dict[str, TasksTuple], member_id: str, kind: str = "active") -> int:
    return sum(len(ps) for ps in getattr(result[member_id], kind).values())


def merged(result: dict[str, TasksTuple], kind: str = "active") -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for t in result.values():
        for s, ps in getattr(t, kind).items():
            out.setdefault(s, set()).update(ps)
    return out


def test_name():
    assert A.name == "sticky"


def test_one_active_task_to_each_process_when_as_many_tasks_as_processes():
    result = A.assign({f"member{i}": member(f"process{i}") for i in (1, 2, 3)}, subtopologies(3, False, S), 0)
    assert all(count(result, f"member{i}") == 1 for i in (1, 2, 3))
    assert merged(result) == {S: {0, 1, 2}}


def test_tasks_spread_evenly_over_members_without_and_with_standbys():
    members = {f"member{p}_{m}": member(f"process{p}") for p in (1, 2, 3) for m in (1, 2)}
    for standbys, stateful in ((0, False), (1, True)):
        result = A.assign(members, subtopologies(3, stateful, S1, S2), standbys)
        assert all(count(result, m) == 1 for m in members)
        assert merged(result) == {S1: {0, 1, 2}, S2: {0, 1, 2}}


def test_active_tasks_do_not_migrate_to_another_process():
    result = A.assign({"member1": member("process1", {S: fs(0)}), "member2": member("process2", {S: fs(1)})},
                      subtopologies(3, False, S), 0)
    assert 0 in result["member1"].active[S] and 1 in result["member2"].active[S]
    assert count(result, "member1") + count(result, "member2") == 3
    # The previous tasks flipped around.
    result = A.assign({"member2": member("process2", {S: fs(1)}), "member3": member("process1", {S: fs(2)})},
                      subtopologies(3, False, S), 0)
    assert 1 in result["member2"].active[S] and 2 in result["member3"].active[S]
    assert count(result, "member2") + count(result, "member3") == 3


def test_active_tasks_migrate_to_a_new_process_without_changing_all_assignments():
    result = A.assign({"member1": member("process1", {S: fs(0, 2)}), "member2": member("process2", {S: fs(1)}),
                       "member3": member("process3")}, subtopologies(3, False, S), 0)
    assert result["member1"].active[S] & {0, 2} and result["member2"].active[S] == {1}
    assert result["member3"].active[S] & {0, 2}
    assert sum(count(result, m) for m in result) == 3


def test_assignment_by_capacity():
    result = A.assign({"member1": member("process1"), "member2_1": member("process2"),
                       "member2_2": member("process2")}, subtopologies(3, False, S), 0)
    assert [count(result, m) for m in ("member1", "member2_1", "member2_2")] == [1, 1, 1]


def test_tasks_spread_evenly_with_unequal_subtopology_sizes():
    previous = {S1: fs(0, 1, 2, 3, 4, 5), S2: fs(0)}
    result = A.assign({"member1": member("process1", previous), "member2": member("process2")},
                      {S1: Subtopology(6, False), S2: Subtopology(1, False)}, 0)
    assert count(result, "member1") == 4 and count(result, "member2") == 3
    assert merged(result) == {S1: set(range(6)), S2: {0}}


def test_active_tasks_stay_put_when_there_are_more_clients_than_tasks():
    members = {"member1": member("process1", {S: fs(0)}), "member2": member("process2", {S: fs(2)}),
               "member3": member("process3", {S: fs(1)}), "member4": member("process4"),
               "member5": member("process5")}
    result = A.assign(members, subtopologies(3, False, S), 0)
    assert {m: dict(t.active) for m, t in result.items()} == {
        "member1": {S: {0}}, "member2": {S: {2}}, "member3": {S: {1}}, "member4": {}, "member5": {}}
    members = {"member1": member("process1"), "member2": member("process2", {S: fs(0)}),
               "member3": member("process3"), "member4": member("process4", {S: fs(2)}),
               "member5": member("process5", {S: fs(1)})}
    result = A.assign(members, subtopologies(3, False, S), 0)
    assert {m: dict(t.active) for m, t in result.items()} == {
        "member1": {}, "member2": {S: {0}}, "member3": {}, "member4": {S: {2}}, "member5": {S: {1}}}


def test_active_tasks_go_to_the_clients_with_their_standbys():
    result = A.assign({"member1": member("process1", standby={S: fs(2)}),
                       "member2": member("process2", standby={S: fs(1)}),
                       "member3": member("process3", standby={S: fs(0)})}, subtopologies(3, False, S), 0)
    assert [result[f"member{i}"].active for i in (1, 2, 3)] == [{S: {2}}, {S: {1}}, {S: {0}}]


def test_no_standby_beside_its_active_task():
    result = A.assign({"member1": member("process1", standby={S: fs(0)}),
                       "member2": member("process2", standby={S: fs(1)})}, subtopologies(2, True, S), 1)
    assert (result["member1"].active, result["member1"].standby) == ({S: {0}}, {S: {1}})
    assert (result["member2"].active, result["member2"].standby) == ({S: {1}}, {S: {0}})


def test_assignment_by_capacity_when_several_clients_have_standbys():
    result = A.assign({"member1": member("process1", {S: fs(0)}, {S: fs(1)}),
                       "member2_1": member("process2", {S: fs(2)}, {S: fs(1)}),
                       "member2_2": member("process2")}, subtopologies(3, False, S), 0)
    assert result["member1"].active == {S: {0}} and result["member2_1"].active == {S: {2}}
    assert result["member2_2"].active == {S: {1}}


def test_standbys_on_another_client_than_their_active_task():
    members = {f"member{i + 1}": member(f"process{i + 1}", {S: fs(i)}) for i in range(4)}
    result = A.assign(members, subtopologies(4, True, S), 1)
    for i in range(4):
        standby = result[f"member{i + 1}"].standby.get(S, set())
        assert i not in standby and len(standby) <= 2
    assert sum(1 for t in result.values() if t.standby) >= 3
    assert merged(result, "standby") == {S: {0, 1, 2, 3}}


def test_several_replicas_of_a_standby():
    members = {f"member{i + 1}": member(f"process{i + 1}", {S: fs(i)}) for i in range(3)}
    result = A.assign(members, subtopologies(3, True, S), 2)
    assert [set(result[f"member{i}"].standby[S]) for i in (1, 2, 3)] == [{1, 2}, {0, 2}, {0, 1}]


def test_no_standby_without_a_client_free_of_the_task():
    result = A.assign({"member1": member("process1")}, subtopologies(1, True, S), 1)
    assert result["member1"].standby == {}


def test_active_and_standby_tasks():
    result = A.assign({f"member{i}": member(f"process{i}") for i in (1, 2, 3)}, subtopologies(3, True, S), 1)
    assert merged(result) == {S: {0, 1, 2}} and merged(result, "standby") == {S: {0, 1, 2}}


def test_at_least_one_task_to_each_client_if_possible():
    members = {"member1_1": member("process1"), "member1_2": member("process1"), "member1_3": member("process1"),
               "member2": member("process2"), "member3": member("process3")}
    result = A.assign(members, subtopologies(3, False, S), 0)
    assert sum(count(result, m) for m in ("member1_1", "member1_2", "member1_3")) == 1
    assert count(result, "member2") == 1 and count(result, "member3") == 1


def test_each_active_task_to_one_client_when_more_clients_than_tasks():
    result = A.assign({f"member{i}": member(f"process{i}") for i in range(1, 7)}, subtopologies(3, False, S), 0)
    assert sum(count(result, m) for m in result) == 3 and merged(result) == {S: {0, 1, 2}}


def test_active_and_standby_tasks_balanced_over_clients():
    result = A.assign({f"member{i}": member(f"process{i}") for i in range(1, 7)}, subtopologies(3, True, S), 1)
    assert all(len(t.standby) + count(result, m) == 1 for m, t in result.items())


def test_more_tasks_to_the_client_with_more_capacity():
    members = {"member1": member("process1"), "member2_1": member("process2"), "member2_2": member("process2")}
    result = A.assign(members, subtopologies(3, False, *(f"test-subtopology{i}" for i in range(4))), 0)
    assert count(result, "member2_1") + count(result, "member2_2") == 8 and count(result, "member1") == 4


def test_rebalance_when_capacity_and_task_count_are_the_same():
    members = {"member1": member("process1"), "member2": member("process2"),
               "member3": member("process3", {S: fs(0, 1, 2, 3)}), "member4": member("process4")}
    result = A.assign(members, subtopologies(4, False, S), 0)
    assert [count(result, f"member{i}") for i in (1, 2, 3, 4)] == [1, 1, 1, 1]


def test_rebalance_when_capacity_is_less_than_the_task_count():
    members = {"member1": member("process1"), "member2": member("process2"),
               "member3": member("process3", {S: fs(0, 1, 2, 3)})}
    result = A.assign(members, subtopologies(4, False, S), 0)
    assert [count(result, f"member{i}") for i in (1, 2, 3)] == [1, 1, 2]


def test_rebalance_by_capacity():
    members = {"member2": member("process2", {S: fs(0, 3, 2)}), "member3_1": member("process3"),
               "member3_2": member("process3")}
    result = A.assign(members, subtopologies(3, False, S), 0)
    assert count(result, "member2") == 1 and count(result, "member3_1") + count(result, "member3_2") == 2


def test_minimal_moves_when_a_client_is_added():
    members = {"member1": member("process1", {S: fs(0, 2)}), "member2": member("process2", {S: fs(1, 3)}),
               "member3": member("process3")}
    result = A.assign(members, subtopologies(4, False, S), 0)
    assert count(result, "member3") == 1
    moved = set(result["member3"].active[S])
    if moved & {0, 2}:
        assert result["member2"].active[S] == {1, 3}
    else:
        assert result["member1"].active[S] == {0, 2}
