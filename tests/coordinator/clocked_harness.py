"""What the coordinator harnesses (group_harness.Harness, test_transaction_coordinator.Harness)
share: an explicit clock that fires the coordinator's timers as it moves, and responses kept by
ticket, each answered once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ClockedHarness:
    coordinator: Any  # has next_deadline() and on_timer(now)
    now: int
    responses: dict[int, object]

    def apply(self, actions: Any) -> None:
        raise NotImplementedError

    def record_responses(self, responses: Iterable[tuple[int, object]]) -> None:
        for ticket, response in responses:
            assert ticket not in self.responses, f"ticket {ticket} answered twice"
            self.responses[ticket] = response

    def advance(self, ms: int) -> None:
        """Move the clock, firing every timer due on the way, in order."""
        target = self.now + ms
        while (deadline := self.coordinator.next_deadline()) is not None and deadline <= target:
            self.now = max(self.now, deadline)
            self.apply(self.coordinator.on_timer(self.now))
        self.now = target
