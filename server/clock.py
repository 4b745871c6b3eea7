"""The broker's clocks, the one place where server code reads time.

Two clocks, for two jobs:

* the wall clock (`wall_clock_ms`): ms since the epoch, what Kafka's clients and files see.
  Record timestamps, segment times, offsets' commit and expiry times, group and transaction
  states, retention and producer expiration go by it. Storage and the coordinators do not read it:
  they are handed `now_ms` values or this function.
* the event loop's clock (`loop_time`, `loop_ms`): trio's, monotonic, and the one a test's
  trio.testing.MockClock moves. Deadlines the broker sleeps until (idle connections,
  authentication, long polls, throttled connections) and the quota windows go by it.

`elapsed_ns` measures how long something took (a request's handling time, startup).
"""

from __future__ import annotations

import time

import trio


def wall_clock_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def loop_time() -> float:
    """The event loop's clock, in seconds (trio.current_time)."""
    return trio.current_time()


def loop_ms() -> int:
    """The event loop's clock, in milliseconds."""
    return int(trio.current_time() * 1000)


def elapsed_ns() -> int:
    """A high-resolution monotonic clock, for durations only."""
    return time.perf_counter_ns()
