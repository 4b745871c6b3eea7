"""The uniform and range assignors: every partition once, balance, stickiness, co-partitioning."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.coordinator.assignors import (
    ASSIGNORS, MemberSpec, PartitionAssignorError, RangeAssignor, UniformAssignor,
)

TOPICS = [uuid.UUID(int=i + 1) for i in range(4)]
uniform = UniformAssignor()
range_ = RangeAssignor()


def owners(result):
    """partition -> [members holding it]"""
    held = {}
    for member_id, assignment in result.items():
        for topic_id, partitions in assignment.items():
            for p in partitions:
                held.setdefault((topic_id, p), []).append(member_id)
    return held


def sizes(result):
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def check_each_subscribed_partition_once(members, counts, result):
    held = owners(result)
    subscribed = {t for spec in members.values() for t in spec.subscribed_topic_ids}
    expected = {(t, p) for t in subscribed for p in range(counts[t])}
    assert set(held) == expected
    for (topic_id, _), holders in held.items():
        assert len(holders) == 1
        assert topic_id in members[holders[0]].subscribed_topic_ids
    assert set(result) == set(members)


def with_assignment(members, result):
    return {m: MemberSpec(spec.subscribed_topic_ids, result.get(m, {})) for m, spec in members.items()}


partition_counts = st.lists(st.integers(0, 12), min_size=len(TOPICS), max_size=len(TOPICS)).map(
    lambda counts: dict(zip(TOPICS, counts)))
member_ids = st.lists(st.text("abcdefgh", min_size=1, max_size=3), min_size=1, max_size=7, unique=True)


@st.composite
def homogeneous_groups(draw):
    counts = draw(partition_counts)
    topics = frozenset(draw(st.sets(st.sampled_from(TOPICS), min_size=1)))
    return {m: MemberSpec(topics) for m in draw(member_ids)}, counts


@st.composite
def heterogeneous_groups(draw):
    counts = draw(partition_counts)
    members = {m: MemberSpec(frozenset(draw(st.sets(st.sampled_from(TOPICS)))))
               for m in draw(member_ids)}
    return members, counts


@settings(max_examples=300, deadline=None)
@given(homogeneous_groups())
def test_uniform_homogeneous_is_balanced_and_complete(group):
    members, counts = group
    result = uniform.assign(members, counts)
    check_each_subscribed_partition_once(members, counts, result)
    s = sizes(result).values()
    assert max(s) - min(s) <= 1


def assert_locally_balanced(members, result):
    """No partition can move to another subscriber of its topic holding two fewer."""
    size = sizes(result)
    for (topic_id, _), (holder,) in owners(result).items():
        for other, spec in members.items():
            if topic_id in spec.subscribed_topic_ids:
                assert size[holder] - size[other] <= 1, (holder, other, size)


@settings(max_examples=300, deadline=None)
@given(heterogeneous_groups())
def test_uniform_heterogeneous_is_balanced_and_complete(group):
    members, counts = group
    result = uniform.assign(members, counts)
    check_each_subscribed_partition_once(members, counts, result)
    assert_locally_balanced(members, result)


@settings(max_examples=300, deadline=None)
@given(heterogeneous_groups(), st.data())
def test_every_assignor_is_complete_from_any_previous_assignment(group, data):
    members, counts = group
    assignor = data.draw(st.sampled_from(sorted(ASSIGNORS)))
    # A previous target assignment computed for a different subscription and partition count.
    stale = uniform.assign({m: MemberSpec(frozenset(TOPICS)) for m in members},
                           {t: 12 for t in TOPICS})
    result = ASSIGNORS[assignor].assign(with_assignment(members, stale), counts)
    check_each_subscribed_partition_once(members, counts, result)
    again = ASSIGNORS[assignor].assign(with_assignment(members, result), counts)
    assert again == result  # a balanced assignment is a fixed point


@pytest.mark.parametrize("assignor", [uniform, range_], ids=["uniform", "range"])
@settings(max_examples=200, deadline=None)
@given(group=homogeneous_groups(), newcomer=st.text("xyz", min_size=1, max_size=2))
def test_a_joining_member_takes_partitions_only_for_itself(assignor, group, newcomer):
    members, counts = group
    before = assignor.assign(members, counts)
    topics = next(iter(members.values())).subscribed_topic_ids
    joined = with_assignment(members, before)
    joined[newcomer] = MemberSpec(topics)
    after = assignor.assign(joined, counts)
    check_each_subscribed_partition_once(joined, counts, after)
    moved = {tp for tp, (holder,) in owners(after).items() if owners(before)[tp] != [holder]}
    # Every partition that changed hands went to the newcomer: nothing shuffles among the others.
    newcomer_partitions = {(t, p) for t, ps in after[newcomer].items() for p in ps}
    if assignor is uniform:
        assert moved == newcomer_partitions
    else:  # range moves whole ranges per topic, but keeps every member's lowest partitions
        for m in members:
            for t, ps in after[m].items():
                kept = ps & before[m].get(t, frozenset())
                assert len(kept) >= min(len(ps), len(before[m].get(t, ()))) - 1


@pytest.mark.parametrize("assignor", [uniform, range_], ids=["uniform", "range"])
@settings(max_examples=200, deadline=None)
@given(group=homogeneous_groups(), data=st.data())
def test_a_leaving_member_moves_only_its_own_partitions(assignor, group, data):
    members, counts = group
    if len(members) < 2:
        return
    before = assignor.assign(members, counts)
    leaver = data.draw(st.sampled_from(sorted(members)))
    remaining = {m: s for m, s in with_assignment(members, before).items() if m != leaver}
    after = assignor.assign(remaining, counts)
    check_each_subscribed_partition_once(remaining, counts, after)
    for m in remaining:
        for t, ps in before[m].items():
            assert ps <= after[m].get(t, frozenset()), (m, t)  # nobody loses anything


@settings(max_examples=200, deadline=None)
@given(heterogeneous_groups())
def test_range_gives_each_subscriber_a_share_of_every_topic(group):
    members, counts = group
    result = range_.assign(members, counts)
    check_each_subscribed_partition_once(members, counts, result)
    for topic_id in TOPICS:
        subscribers = [m for m, s in members.items() if topic_id in s.subscribed_topic_ids]
        shares = [len(result[m].get(topic_id, ())) for m in subscribers]
        if shares:
            assert max(shares) - min(shares) <= 1


def test_range_co_partitions_topics_with_the_same_partition_count():
    a, b = TOPICS[:2]
    members = {m: MemberSpec(frozenset({a, b})) for m in ("m1", "m2", "m3")}
    result = range_.assign(members, {a: 7, b: 7})
    for m in members:
        assert result[m][a] == result[m][b]
    assert result["m1"][a] == {0, 1, 2} and result["m2"][a] == {3, 4} and result["m3"][a] == {5, 6}


def test_uniform_keeps_the_extra_partition_with_a_member_that_has_it():
    t = TOPICS[0]
    # 7 partitions over 3 members: one member gets 3. "c" holds 3 already: it keeps them all.
    members = {"a": MemberSpec(frozenset({t}), {t: frozenset({0, 1})}),
               "b": MemberSpec(frozenset({t}), {t: frozenset({2, 3})}),
               "c": MemberSpec(frozenset({t}), {t: frozenset({4, 5, 6})})}
    assert uniform.assign(members, {t: 7}) == {"a": {t: {0, 1}}, "b": {t: {2, 3}}, "c": {t: {4, 5, 6}}}


def test_unsubscribed_topic_is_taken_away():
    t, u = TOPICS[:2]
    members = {"a": MemberSpec(frozenset({t}), {t: frozenset({0}), u: frozenset({0})})}
    assert uniform.assign(members, {t: 1, u: 1}) == {"a": {t: {0}}}
    assert range_.assign(members, {t: 1, u: 1}) == {"a": {t: {0}}}


def test_members_without_subscriptions_get_nothing():
    assert uniform.assign({"a": MemberSpec(frozenset())}, {}) == {"a": {}}
    assert range_.assign({"a": MemberSpec(frozenset())}, {}) == {"a": {}}
    assert uniform.assign({}, {}) == {}


def test_a_subscription_to_a_topic_missing_from_the_metadata_is_refused():
    with pytest.raises(PartitionAssignorError):
        uniform.assign({"a": MemberSpec(frozenset({TOPICS[0]}))}, {})
    with pytest.raises(PartitionAssignorError):
        range_.assign({"a": MemberSpec(frozenset({TOPICS[0]}))}, {})
