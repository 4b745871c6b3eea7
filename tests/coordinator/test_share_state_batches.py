"""Combining a share partition's state batches as Kafka's PersisterStateBatchCombiner does: pruned
at the start offset, overlaps won by the higher delivery count then the higher state, adjacent
equal ranges merged."""

from __future__ import annotations

import random

from samsa.coordinator.share_state import PersisterStateBatch as B
from samsa.coordinator.share_state import RecordState
from samsa.coordinator.share_state_batches import combine_state_batches

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = (s.value for s in RecordState)


def test_nothing_and_one_batch():
    assert combine_state_batches([], [], -1) == []
    assert combine_state_batches([B(100, 109, AVAILABLE, 1)], [], -1) == [B(100, 109, AVAILABLE, 1)]


def test_disjoint_batches_are_sorted_and_equal_neighbours_merged():
    assert combine_state_batches([B(110, 119, AVAILABLE, 1)], [B(100, 109, ACKNOWLEDGED, 1)], -1) == [
        B(100, 109, ACKNOWLEDGED, 1), B(110, 119, AVAILABLE, 1)]
    assert combine_state_batches([B(100, 109, AVAILABLE, 1)], [B(110, 119, AVAILABLE, 1)], -1) == [
        B(100, 119, AVAILABLE, 1)]
    # A gap between equal batches keeps them apart.
    assert combine_state_batches([B(100, 109, AVAILABLE, 1)], [B(111, 119, AVAILABLE, 1)], -1) == [
        B(100, 109, AVAILABLE, 1), B(111, 119, AVAILABLE, 1)]


def test_the_higher_delivery_count_wins_an_overlap():
    assert combine_state_batches([B(100, 110, AVAILABLE, 1)], [B(105, 115, AVAILABLE, 2)], -1) == [
        B(100, 104, AVAILABLE, 1), B(105, 115, AVAILABLE, 2)]
    # An older write with a higher count is not undone by a newer one with a lower count.
    assert combine_state_batches([B(100, 110, ARCHIVED, 3)], [B(100, 110, AVAILABLE, 2)], -1) == [
        B(100, 110, ARCHIVED, 3)]


def test_at_equal_counts_the_higher_state_wins():
    assert combine_state_batches([B(100, 120, AVAILABLE, 1)], [B(105, 110, ACKNOWLEDGED, 1)], -1) == [
        B(100, 104, AVAILABLE, 1), B(105, 110, ACKNOWLEDGED, 1), B(111, 120, AVAILABLE, 1)]
    assert combine_state_batches([B(105, 110, ARCHIVED, 1)], [B(100, 120, ACKNOWLEDGED, 1)], -1) == [
        B(100, 104, ACKNOWLEDGED, 1), B(105, 110, ARCHIVED, 1), B(111, 120, ACKNOWLEDGED, 1)]


def test_batches_before_the_start_offset_go_and_a_straddling_one_is_cut():
    so_far = [B(90, 99, ACKNOWLEDGED, 1), B(100, 109, AVAILABLE, 1)]
    assert combine_state_batches(so_far, [B(110, 119, ARCHIVED, 5)], 105) == [
        B(105, 109, AVAILABLE, 1), B(110, 119, ARCHIVED, 5)]
    assert combine_state_batches(so_far, [], 200) == []


def _by_offset(batches):
    """Each offset's winning (count, state): what the combination must equal, computed naively."""
    won = {}
    for b in batches:
        for offset in range(b.first_offset, b.last_offset + 1):
            won[offset] = max(won.get(offset, (-1, -1)), (b.delivery_count, b.delivery_state))
    return won


def test_random_overlaps_give_each_offset_its_winner_in_disjoint_merged_ranges():
    rng = random.Random(7)
    for _ in range(300):
        batches = []
        for _ in range(rng.randint(1, 8)):
            first = rng.randint(0, 40)
            batches.append(B(first, first + rng.randint(0, 12), rng.choice((0, 1, 2, 4)), rng.randint(0, 3)))
        split = rng.randint(0, len(batches))
        start = rng.choice((-1, rng.randint(0, 30)))
        combined = combine_state_batches(batches[:split], batches[split:], start)
        expected = {o: w for o, w in _by_offset(batches).items() if start == -1 or o >= start}
        assert _by_offset(combined) == expected
        for a, b in zip(combined, combined[1:]):
            assert a.last_offset < b.first_offset
            assert not (a.last_offset + 1 == b.first_offset and (a.delivery_state, a.delivery_count)
                        == (b.delivery_state, b.delivery_count))
