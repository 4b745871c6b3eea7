"""The journal checks of test_group_rebalance.py catch what they are meant to catch (no broker:
journals written by hand)."""

from __future__ import annotations

import json

import pytest
from rebalance_journal import analyse, check, duplicates, uncommitted_after_failed_commits, uncommitted_at_crash


def journals(tmp_path, **members):
    """members: name -> [(t, event, fields)]."""
    paths = {}
    for name, events in members.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"ev": ev, "t": t, **fields}) + "\n" for t, ev, fields in events))
        paths[name] = path
    return analyse(paths)


def owner(start, end, offsets, why="revoke", commit=True, gen=1):
    """A member owning partition 0 from `start` to `end`, consuming `offsets` and committing them."""
    events = [(start, "assigned", {"parts": [0], "gen": gen})]
    if offsets:
        events.append((start + 0.01, "consumed", {"p": 0, "o": offsets}))
        if commit:
            events.append((start + 0.02, "committing", {"offsets": {"0": offsets[-1] + 1}}))
            events.append((start + 0.03, "committed", {"offsets": {"0": offsets[-1] + 1}}))
    if why == "killed":
        events.append((end, "killed", {}))
    elif why is not None:
        events.append((end, "revoked", {"parts": [0], "why": why}))
    return events


def test_a_clean_hand_over_passes(tmp_path):
    a = journals(tmp_path, m1=owner(1, 2, [0, 1, 2]), m2=owner(3, 4, [3, 4], why="close"))
    assert check(a, {0: 5}) == []
    assert duplicates(a) == 0


def test_a_crash_may_repeat_exactly_the_uncommitted_tail(tmp_path):
    m1 = owner(1, 2, [0, 1, 2], why=None) + [(1.5, "consumed", {"p": 0, "o": [3, 4]}), (1.6, "killed", {})]
    a = journals(tmp_path, m1=m1, m2=owner(3, 4, [3, 4, 5], why="close"))
    assert check(a, {0: 6}) == []
    assert duplicates(a) == uncommitted_at_crash(a) == 2


def test_a_refused_commit_before_a_hand_over_may_repeat_what_it_covered(tmp_path):
    """Kafka refuses a commit of the generation before (ILLEGAL_GENERATION): the next owner starts at
    the commit before it."""
    m1 = owner(1, 2, [0, 1, 2], why=None) + [
        (1.5, "consumed", {"p": 0, "o": [3, 4]}), (1.6, "committing", {"offsets": {"0": 5}}),
        (1.7, "commit_failed", {"offsets": {"0": 5}, "error": "ILLEGAL_GENERATION"}),
        (1.8, "revoked", {"parts": [0], "why": "revoke"})]
    a = journals(tmp_path, m1=m1, m2=owner(3, 4, [3, 4, 5], why="close"))
    assert check(a, {0: 6}) == []
    assert duplicates(a) == uncommitted_after_failed_commits(a) == 2
    assert uncommitted_at_crash(a) == 0


@pytest.mark.parametrize("case, members, hw, expected", [
    ("overlap", {"m1": owner(1, 3, [0, 1]), "m2": owner(2, 4, [2, 3], why="close")}, 4,
     "owned by m1 and m2 at the same time"),
    ("never released", {"m1": owner(1, 3, [0, 1], why=None), "m2": owner(2, 4, [2, 3], why="close")}, 4,
     "owned by m1 and m2 at the same time"),
    ("consumed before owning", {"m1": [(1, "consumed", {"p": 0, "o": [0]})] + owner(2, 3, [1], why="close")}, 2,
     "without owning it"),
    ("consumed after the ownership ended", {
        "m1": owner(1, 2, [0]) + [(2.5, "consumed", {"p": 0, "o": [1]})]}, 2, "without owning it"),
    ("consumed after the request that ended the ownership was sent (kafkajs journals it later)", {
        "m1": [(1, "assigned", {"parts": [0], "gen": None}), (2.5, "consumed", {"p": 0, "o": [0]}),
               (2, "revoked", {"parts": [0], "why": "JoinGroup"})]}, 1, "outside its ownership"),
    ("a gap", {"m1": owner(1, 2, [0, 2], why="close")}, 3, "a gap or a repeat"),
    ("a repeat within one ownership", {"m1": owner(1, 2, [0, 1, 1, 2], why="close")}, 3, "a gap or a repeat"),
    ("the next owner repeats committed messages", {"m1": owner(1, 2, [0, 1, 2]), "m2": owner(3, 4, [1, 2, 3], why="close")},
     4, "started at offset 1, the committed offset was 3"),
    ("the next owner skips messages", {"m1": owner(1, 2, [0, 1]), "m2": owner(3, 4, [3], why="close")}, 4,
     "started at offset 3, the committed offset was 2"),
    ("given up without committing", {"m1": owner(1, 2, [0, 1], commit=False), "m2": owner(3, 4, [0, 1, 2], why="close")},
     3, "without committing what it consumed"),
    ("a crash repeats more than the uncommitted tail", {
        "m1": owner(1, 2, [0, 1, 2], why="killed"), "m2": owner(3, 4, [1, 2, 3], why="close")}, 4,
     "started at offset 1, the committed offset was 3"),
    ("never consumed", {"m1": owner(1, 2, [0, 1], why="close")}, 3, "1 offsets never consumed, first 2"),
])
def test_violations_are_reported(tmp_path, case, members, hw, expected):
    problems = check(journals(tmp_path, **members), {0: hw})
    assert any(expected in p for p in problems), problems
