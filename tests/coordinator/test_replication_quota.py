"""The alter-log-dirs replication quota's arithmetic (Kafka's ReplicationQuotaManager over a
SimpleRate), on an explicit clock."""

from __future__ import annotations

from samsa.coordinator.quota_manager import Window
from samsa.coordinator.replication_quota import UNBOUNDED, ReplicationQuotaManager


def test_a_young_rate_is_measured_over_one_window_at_least():
    quota = ReplicationQuotaManager(Window(samples=11, size_ms=1000))
    assert not quota.is_quota_exceeded(1000, 0)  # nothing recorded
    quota.record(1000, 0)
    # 1000 bytes over (at least) one second: at the bound, acceptable (Kafka's upper bound is <=).
    assert not quota.is_quota_exceeded(1000, 0)
    quota.record(500, 200)
    assert quota.is_quota_exceeded(1000, 200)  # 1500 B/s over the first second
    assert quota.is_quota_exceeded(1000, 1499)  # 1500 / 1.499 s
    assert not quota.is_quota_exceeded(1000, 1500)  # 1500 / 1.5 s: the bound
    assert not quota.is_quota_exceeded(2000, 200)  # a higher bound, the same samples
    assert not quota.is_quota_exceeded(UNBOUNDED, 200)


def test_the_rate_spans_the_live_samples_and_forgets_expired_ones():
    quota = ReplicationQuotaManager(Window(samples=2, size_ms=1000))
    quota.record(3000, 0)
    quota.record(3000, 1000)  # a second sample: 6000 bytes since 0
    assert quota.rate.measure(2000) == 3000  # 6000 B over 2 s
    assert quota.is_quota_exceeded(2999, 2000) and not quota.is_quota_exceeded(3000, 2000)
    # Two windows later each sample is reset when measured: nothing is left of the burst.
    assert quota.rate.measure(3000) == 0
    assert not quota.is_quota_exceeded(0, 3000)


def test_a_zero_bound_lets_one_chunk_through_then_stops_the_copy():
    quota = ReplicationQuotaManager(Window(samples=11, size_ms=1000))
    assert not quota.is_quota_exceeded(0, 0)
    quota.record(512, 0)
    assert quota.is_quota_exceeded(0, 5000)


def test_the_bytes_allowed_over_time_follow_the_bound():
    """A copy that asks before each chunk of `chunk` bytes, and waits `backoff` ms when refused,
    copies no more than bound * max(elapsed, one window) + one chunk at any time."""
    bound, chunk, backoff = 10_000, 1_500, 50
    quota = ReplicationQuotaManager(Window(samples=11, size_ms=1000))
    now, copied, start = 0, 0, None
    while copied < 60_000:
        if quota.is_quota_exceeded(bound, now):
            now += backoff
            continue
        start = now if start is None else start
        quota.record(chunk, now)
        copied += chunk
        assert copied <= bound * max(now - start, 1000) / 1000 + chunk
    # 60 kB at 10 kB/s: the last chunk goes once 58.5 kB have been allowed, at 5.85 s, not before.
    assert now == 5850
