"""Kafka's ReplicationQuotaManager, sans I/O, for the one replication quota a single broker has: the
copy of replicas between its log directories (QuotaType.ALTER_LOG_DIRS_REPLICATION), bounded by
`replica.alter.log.dirs.io.max.bytes.per.second` over `alter.log.dirs.replication.quota.window.num`
windows of `alter.log.dirs.replication.quota.window.size.seconds`.

The copy asks `is_quota_exceeded` before each chunk it reads (Kafka's LocalLeaderEndPoint.buildFetch
builds no fetch then, and the thread backs off replica.fetch.backoff.ms) and `record`s the bytes of
each chunk it appended (ReplicaAlterLogDirsThread.processPartitionData). The rate is Kafka's
SimpleRate: the bytes of the live samples over the span since the oldest one began, never less than
one window, so a fresh copy may take one window's worth, plus the chunk that crosses the bound, at
once. The bound is read at each check, so a dynamic change applies to the next chunk, the samples
kept (Kafka's updateQuota changes the metric's config, not its samples).
"""

from __future__ import annotations

from .quota_manager import Rate, Window

# Kafka's default bound (Long.MAX_VALUE): never exceeded.
UNBOUNDED = 2**63 - 1


class SimpleRate(Rate):
    """Kafka's SimpleRate: unlike Rate, a young rate is measured over the time it has existed (at
    least one window), not padded to samples - 1 windows."""

    def window_size_ms(self, now_ms: int) -> int:
        self._purge_obsolete(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return max(now_ms - oldest, self.window.size_ms)


class ReplicationQuotaManager:
    def __init__(self, window: Window) -> None:
        self.rate = SimpleRate(window)

    def is_quota_exceeded(self, bound: int, now_ms: int) -> bool:
        """The measured rate is above `bound` bytes per second (Kafka's Quota.upperBound: a rate
        equal to it is acceptable)."""
        return bound < UNBOUNDED and self.rate.measure(now_ms) > bound

    def record(self, size: int, now_ms: int) -> None:
        self.rate.record(size, now_ms)
