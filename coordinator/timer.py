"""Keyed timers on an explicit clock (Kafka's CoordinatorTimer), for sans-I/O coordinators.

A timer is scheduled under a key; scheduling the same key again replaces it, and cancelling a key
that is not scheduled does nothing, which is what session timeouts need (every heartbeat pushes the
member's deadline back). The owner asks for `next_deadline()` to know when to wake up, then takes
due callbacks one at a time with `pop_due(now_ms)` and runs each before taking the next, since a
callback may cancel or reschedule other timers.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable
from typing import Any


class CoordinatorTimer:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []  # (deadline, sequence, key), stale entries left in
        self._timers: dict[Hashable, tuple[int, int, Callable[..., Any]]] = {}
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[..., Any]) -> None:
        sequence = next(self._sequence)
        self._timers[key] = (deadline_ms, sequence, callback)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._timers

    def deadline(self, key: Hashable) -> int | None:
        timer = self._timers.get(key)
        return None if timer is None else timer[0]

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> Callable[..., Any] | None:
        """The callback of the earliest timer due at `now_ms` (removed), or None."""
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._timers.pop(key)[2]

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            _, sequence, key = heap[0]
            timer = self._timers.get(key)
            if timer is not None and timer[1] == sequence:
                return
            heapq.heappop(heap)

    def __len__(self) -> int:
        return len(self._timers)
