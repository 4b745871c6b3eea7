"""What the leader of a replicated partition knows of its followers, as Kafka's Partition and
Replica keep it: each follower's log end offset and when it was last caught up, the in-sync replica
set (ISR) and the high watermark. Pure: events come in with the time (`now_ms`), the answers and
the ISR changes to publish go out; the trio shell reads the log and does the I/O.

- A follower's fetch at offset F says it has everything below F (its log end offset). It is caught
  up when F reaches the leader's log end offset as of that fetch, or as of its previous fetch
  (Kafka's ReplicaState.updateFetchState), which counts for `replica.lag.time.max.ms`.
- The high watermark is the smallest log end offset in the ISR; it never goes back.
- A follower outside the ISR joins it once it has the high watermark and the current leader
  epoch's first offset (Kafka's isFollowerInSync); a follower of the ISR not caught up for
  `replica.lag.time.max.ms` leaves it (maybeShrinkIsr). The leader never leaves its own ISR.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0

    def update_fetch_state(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> bool:
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= lag_time_max_ms)


@dataclass(frozen=True)
class IsrChange:
    """The ISR became `isr`: the shell applies it and tells the controller (AlterPartition in
    ZooKeeper mode)."""
    isr: tuple[int, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()


class PartitionLeaderState:
    def __init__(self, local_id: int, replicas: list[int], isr: list[int], leader_epoch_start_offset: int,
                 high_watermark: int, now_ms: int) -> None:
        """Taken on becoming leader (Kafka's Partition.makeLeader): the followers of the ISR count as
        caught up now, so a slow one gets a whole lag time before it is dropped."""
        self.local_id = local_id
        self.replicas = list(replicas)
        self.isr: tuple[int, ...] = tuple(dict.fromkeys([local_id, *isr]))
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.high_watermark = high_watermark
        self.followers = {
            r: FollowerState(r, last_caught_up_time_ms=now_ms if r in self.isr else 0)
            for r in replicas if r != local_id}

    @property
    def replicated(self) -> bool:
        return bool(self.followers)

    def follower_fetched(self, broker_id: int, fetch_offset: int, leader_log_end_offset: int,
                         now_ms: int) -> IsrChange | None:
        """A follower fetched from `fetch_offset`: its log end offset and catch-up time move, and it
        may join the ISR. Unknown replicas (not assigned this partition) change nothing."""
        follower = self.followers.get(broker_id)
        if follower is None:
            return None
        follower.update_fetch_state(fetch_offset, leader_log_end_offset, now_ms)
        if broker_id in self.isr:
            return None
        if fetch_offset >= self.high_watermark and fetch_offset >= self.leader_epoch_start_offset:
            return self._change(self.isr + (broker_id,), added=(broker_id,))
        return None

    def maybe_advance_high_watermark(self, leader_log_end_offset: int) -> bool:
        """The high watermark moves up to the smallest log end offset of the ISR; True if it moved."""
        candidate = leader_log_end_offset
        for broker_id in self.isr:
            follower = self.followers.get(broker_id)
            if follower is not None:
                candidate = min(candidate, follower.log_end_offset)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def out_of_sync_replicas(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> list[int]:
        return [r for r in self.isr if r != self.local_id
                and not self.followers[r].is_caught_up(leader_log_end_offset, now_ms, lag_time_max_ms)]

    def maybe_shrink_isr(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> IsrChange | None:
        """Drop the followers of the ISR that have not caught up for `lag_time_max_ms`."""
        lagging = self.out_of_sync_replicas(leader_log_end_offset, now_ms, lag_time_max_ms)
        if not lagging:
            return None
        return self._change(tuple(r for r in self.isr if r not in lagging), removed=tuple(lagging))

    def _change(self, isr: tuple[int, ...], added: tuple[int, ...] = (), removed: tuple[int, ...] = ()) -> IsrChange:
        self.isr = isr
        return IsrChange(isr, added, removed)

    def required_offset_reached(self, required_offset: int, min_insync_replicas: int) -> tuple[bool, bool]:
        """Kafka's checkEnoughReplicasReachOffset for an acks=all produce: (done, enough replicas).
        Done once the high watermark passed the produce's last offset; the write then counts only if
        the ISR is at least min.insync.replicas large (else NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        if self.high_watermark < required_offset:
            return False, False
        return True, len(self.isr) >= min_insync_replicas
