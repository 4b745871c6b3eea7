"""Keyed timers on an explicit clock."""

from samsa.coordinator.timer import CoordinatorTimer


def fired(timer: CoordinatorTimer, now: int) -> list:
    out = []
    while (callback := timer.pop_due(now)) is not None:
        out.append(callback())
    return out


def test_timers_fire_in_deadline_order_when_due():
    timer = CoordinatorTimer()
    timer.schedule("b", 200, lambda: "b")
    timer.schedule("a", 100, lambda: "a")
    assert timer.next_deadline() == 100
    assert fired(timer, 99) == []
    assert fired(timer, 200) == ["a", "b"]
    assert timer.next_deadline() is None and len(timer) == 0


def test_rescheduling_a_key_replaces_it_and_cancel_forgets_it():
    timer = CoordinatorTimer()
    timer.schedule("session", 100, lambda: "old")
    timer.schedule("session", 300, lambda: "new")
    timer.schedule("join", 150, lambda: "join")
    timer.cancel("join")
    timer.cancel("never scheduled")
    assert timer.next_deadline() == 300 and timer.deadline("session") == 300
    assert fired(timer, 299) == [] and fired(timer, 300) == ["new"]
    assert not timer.is_scheduled("session")
