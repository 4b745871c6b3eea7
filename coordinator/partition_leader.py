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
- An ISR change is pending until the controller confirms it (Kafka's PendingExpandIsr and
  PendingShrinkIsr, KIP-497): `isr` stays the committed one, and no other change starts meanwhile.
  The high watermark and acks=all count the "maximal" ISR: the expanded one while an expansion is
  pending (a stricter rule, harmless if refused), the committed one while a shrink is (so a refused
  shrink cannot have let the high watermark run ahead). A refusal that says the change was not
  applied (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED) rolls it back; the others (FENCED_LEADER_EPOCH,
  INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION...) leave it pending until the controller's
  next LeaderAndIsr replaces this state; any other error is retried.
- As Kafka 3.9's Partition.maybeIncrementLeaderHW: the high watermark does not move while the ISR is
  smaller than min.insync.replicas (at most the replication factor), and a follower outside the ISR
  that is caught up holds it back too (it is about to join).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..wire.errors import ErrorCode

UNKNOWN_OFFSET = -1
# The controller says the change was not applied, and the partition epoch is right: roll it back.
ROLLED_BACK = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
# Only new metadata from the controller (LeaderAndIsr) settles these: the change stays pending.
AWAIT_METADATA = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                            ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
                            ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED})


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
    """A proposed ISR, `isr`, pending until the controller confirms it (AlterPartition in ZooKeeper
    mode); `committed`: the ISR it was made from. An answer is for the very change it was sent for
    (`is`), not an equal one proposed later."""
    isr: tuple[int, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    committed: tuple[int, ...] = ()

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """What the high watermark waits for meanwhile: the larger of the two ISRs."""
        return self.isr if self.added else self.committed


class PartitionLeaderState:
    def __init__(self, local_id: int, replicas: list[int], isr: list[int], leader_epoch_start_offset: int,
                 high_watermark: int, now_ms: int, previous: PartitionLeaderState | None = None) -> None:
        """Taken on becoming leader (Kafka's Partition.makeLeader): the followers of the ISR count as
        caught up now, so a slow one gets a whole lag time before it is dropped. Re-elected
        (`previous`: this broker led the partition until now), the followers' log end offsets are
        kept (Kafka's Replica.resetReplicaState), so the high watermark need not wait for their next
        fetch."""
        self.local_id = local_id
        self.replicas = list(replicas)
        self.isr: tuple[int, ...] = tuple(dict.fromkeys([local_id, *isr]))  # as the controller last confirmed it
        self.pending: IsrChange | None = None
        self.leader_epoch_start_offset = leader_epoch_start_offset
        self.high_watermark = high_watermark
        self.followers = {
            r: FollowerState(r, last_caught_up_time_ms=now_ms if r in self.isr else 0)
            for r in replicas if r != local_id}
        for r, follower in self.followers.items():
            known = previous.followers.get(r) if previous is not None else None
            if known is not None:
                follower.log_end_offset = known.log_end_offset
                follower.last_fetch_leader_log_end_offset = leader_epoch_start_offset
                follower.last_fetch_time_ms = now_ms if r in self.isr else 0

    @property
    def replicated(self) -> bool:
        return bool(self.followers)

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        pending = self.pending
        return self.isr if pending is None else pending.maximal_isr

    def follower_fetched(self, broker_id: int, fetch_offset: int, leader_log_end_offset: int,
                         now_ms: int) -> IsrChange | None:
        """A follower fetched from `fetch_offset`: its log end offset and catch-up time move, and it
        may join the ISR (unless a change is pending). Unknown replicas (not assigned this
        partition) change nothing."""
        follower = self.followers.get(broker_id)
        if follower is None:
            return None
        follower.update_fetch_state(fetch_offset, leader_log_end_offset, now_ms)
        if self.pending is not None or broker_id in self.isr:
            return None
        if fetch_offset >= self.high_watermark and fetch_offset >= self.leader_epoch_start_offset:
            return self._propose(self.isr + (broker_id,), added=(broker_id,))
        return None

    def maybe_advance_high_watermark(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int,
                                     min_insync_replicas: int = 1) -> bool:
        """The high watermark moves up to the smallest log end offset of the maximal ISR and of the
        caught-up followers; not while the ISR is under min.insync.replicas. True if it moved."""
        if len(self.isr) < min(min_insync_replicas, len(self.followers) + 1):
            return False
        candidate = leader_log_end_offset
        maximal_isr = self.maximal_isr
        for broker_id, follower in self.followers.items():
            if follower.log_end_offset < candidate and (
                    broker_id in maximal_isr
                    or (follower.log_end_offset != UNKNOWN_OFFSET
                        and follower.is_caught_up(leader_log_end_offset, now_ms, lag_time_max_ms))):
                candidate = follower.log_end_offset
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def out_of_sync_replicas(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> list[int]:
        if self.pending is not None:
            return []
        return [r for r in self.isr if r != self.local_id
                and not self.followers[r].is_caught_up(leader_log_end_offset, now_ms, lag_time_max_ms)]

    def maybe_shrink_isr(self, leader_log_end_offset: int, now_ms: int, lag_time_max_ms: int) -> IsrChange | None:
        """Propose the ISR without the followers that have not caught up for `lag_time_max_ms`."""
        lagging = self.out_of_sync_replicas(leader_log_end_offset, now_ms, lag_time_max_ms)
        if not lagging:
            return None
        return self._propose(tuple(r for r in self.isr if r not in lagging), removed=tuple(lagging))

    def _propose(self, isr: tuple[int, ...], added: tuple[int, ...] = (), removed: tuple[int, ...] = ()) -> IsrChange:
        self.pending = IsrChange(isr, added, removed, committed=self.isr)
        return self.pending

    def committed(self, change: IsrChange, isr: tuple[int, ...]) -> bool:
        """The controller took `change`, the ISR is now `isr` (Kafka's handleAlterPartitionUpdate,
        once the shell checked the answer's leader and partition epochs). False if `change` is no
        longer the pending one (a LeaderAndIsr came meanwhile): the answer is out of date."""
        if self.pending is not change:
            return False
        self.isr = tuple(isr)
        self.pending = None
        return True

    def refused(self, change: IsrChange, error_code: int) -> bool:
        """The controller refused `change` (Kafka's handleAlterPartitionError); True if it is to be
        sent again."""
        if self.pending is not change:
            return False
        if error_code in ROLLED_BACK:
            self.pending = None
            return False
        return error_code not in AWAIT_METADATA

    def required_offset_reached(self, required_offset: int, min_insync_replicas: int) -> tuple[bool, bool]:
        """Kafka's checkEnoughReplicasReachOffset for an acks=all produce: (done, enough replicas).
        Done once the high watermark passed the produce's last offset; the write then counts only if
        the maximal ISR is at least min.insync.replicas large (else NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        if self.high_watermark < required_offset:
            return False, False
        return True, len(self.maximal_isr) >= min_insync_replicas
