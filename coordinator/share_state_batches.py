"""How the share coordinator combines a share partition's state batches (Kafka's
PersisterStateBatchCombiner): the batches it holds and those a write brings become one sorted list
of disjoint ranges.

Batches before the start offset are dropped (one straddling it is cut at it). Where batches
overlap, the one with the higher delivery count wins, and at equal counts the higher delivery state
(ACKNOWLEDGED and ARCHIVED over ACQUIRED over AVAILABLE): a write never takes a record back to
fewer deliveries. Adjacent ranges with the same state and count are merged.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from .share_state import PersisterStateBatch

__all__ = ["combine_state_batches"]


def combine_state_batches(batches_so_far: Iterable[PersisterStateBatch], new_batches: Iterable[PersisterStateBatch],
                          start_offset: int) -> list[PersisterStateBatch]:
    """The combined batches from `start_offset` on (-1: none dropped)."""
    pruned = _prune(batches_so_far, start_offset) + _prune(new_batches, start_offset)
    if len(pruned) <= 1:
        return pruned
    return _sweep_merge(pruned)


def _prune(batches: Iterable[PersisterStateBatch], start_offset: int) -> list[PersisterStateBatch]:
    out = []
    for b in batches:
        if start_offset == -1 or b.last_offset >= start_offset:
            if start_offset != -1 and b.first_offset < start_offset:
                out.append(PersisterStateBatch(start_offset, b.last_offset, b.delivery_state, b.delivery_count))
            else:
                out.append(b)
    return out


def _sweep_merge(batches: list[PersisterStateBatch]) -> list[PersisterStateBatch]:
    """A sweep over the batches' begin and end offsets: at each offset the winning (delivery count,
    delivery state) among the batches covering it."""
    # (offset, is_begin, priority); ends sort before begins at the same offset, as in Kafka.
    events = []
    for b in batches:
        priority = (b.delivery_count, b.delivery_state)
        events.append((b.first_offset, True, priority))
        events.append((b.last_offset + 1, False, priority))
    events.sort(key=lambda e: (e[0], e[1]))
    active: dict[tuple[int, int], int] = {}  # priority -> how many batches with it cover the sweep
    heap: list[tuple[int, int]] = []  # negated priorities, stale ones dropped when they surface
    out: list[PersisterStateBatch] = []
    open_from, open_winner = -1, None
    i, n = 0, len(events)
    while i < n:
        offset = events[i][0]
        if open_winner is not None and offset > open_from:
            _append_coalesced(out, open_from, offset - 1, open_winner)
        while i < n and events[i][0] == offset:
            _, is_begin, priority = events[i]
            i += 1
            if is_begin:
                if priority not in active:
                    heapq.heappush(heap, (-priority[0], -priority[1]))
                active[priority] = active.get(priority, 0) + 1
            elif active[priority] == 1:
                del active[priority]
            else:
                active[priority] -= 1
        while heap and (-heap[0][0], -heap[0][1]) not in active:
            heapq.heappop(heap)
        open_winner = (-heap[0][0], -heap[0][1]) if heap else None
        open_from = offset
    return out


def _append_coalesced(out: list[PersisterStateBatch], first: int, last: int, winner: tuple[int, int]) -> None:
    count, state = winner
    if out:
        tail = out[-1]
        if tail.last_offset + 1 == first and tail.delivery_state == state and tail.delivery_count == count:
            out[-1] = PersisterStateBatch(tail.first_offset, last, state, count)
            return
    out.append(PersisterStateBatch(first, last, state, count))
