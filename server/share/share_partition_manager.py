"""The share partitions this broker leads (Kafka's SharePartitionManager): the trio shell of the
pure state machine coordinator/share_partition.py, one per (share group, topic partition).

A share partition is created by the first ShareFetch that names it here and initialized from the
persister (`Persister.read_state`); a state never given a start offset starts where the group's
`share.auto.offset.reset` says (earliest, latest, by_duration:<ISO-8601 duration>), found in the
partition's log. What the state machine changes on acquisition, acknowledgement, release and lock
expiry is written back with `Persister.write_state`; the request that caused it is answered once the
write is done (a ShareFetch hands out acquired records only then; a lock expiry's write is best
effort, as in Kafka). A share partition's writes reach the persister in the order it made them, one
WriteShareGroupState at a time: those made while one is under way go together in the next (their
state batches overlaid in order), so that the coordinator never applies an older state over a newer
one (an older start offset would bring records back with no delivery count), and a ShareFetch that
acknowledges and acquires waits for one write. Writes of different share partitions go
concurrently. They run in the manager's background, not in the request's task: a request that goes
away leaves no state change half done. Acquisition locks run out on the event loop's clock: one
task sleeps until the earliest deadline of all the share partitions.

A share partition belongs to the partition's leadership it was created under: once the replica
partition is gone (its topic deleted), no longer led here, or led at another epoch, the share
partition is dropped (fenced) when next used or when its locks are due, and a later fetch reads
the persisted state again, as Kafka's SharePartitionListener drops it on onBecomingFollower,
onDeleted and onFailed. Nothing here waits on the replica partitions' events but the long polls
(delayed_share_fetch.py), which park on both the replica partition (new records, leadership
changes) and the share partition (records released, acknowledged, initialized).

A group's configs (`group_configs.share_config(group_id)`: its GROUP resource's share.* configs
over the broker's group.share.* defaults) apply to its share partitions from the next fetch or
acknowledgement on.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import trio

from ...coordinator.share_partition import (
    PendingWrite,
    ShareAcknowledgementBatch,
    SharePartition,
    SharePartitionConfig,
    SharePartitionError,
    SharePartitionStatus,
)
from ...coordinator.share_state import UNINITIALIZED_START_OFFSET, PersisterStateBatch, SharePartitionState
from ...storage.errors import StorageError
from ...wire.errors import ErrorCode
from ..clock import loop_ms, wall_clock_ms
from ..coordinators.runtime import DeadlineWaker
from .share_session_cache import ShareSessionCache, TopicIdPartition

if TYPE_CHECKING:
    from ...coordinator.group_config import GroupConfigManager, ShareGroupConfig
    from ..config.kafka_config import KafkaConfig
    from ..replication.replica_manager import Partition, ReplicaManager
    from .persister import Persister

log = logging.getLogger("samsa.share")

READ_COMMITTED = "read_committed"


class SharePartitionKey(NamedTuple):
    group_id: str
    topic_id: uuid.UUID
    partition: int


def is_read_committed(config: ShareGroupConfig) -> bool:
    return config.isolation_level == READ_COMMITTED


_DURATION = re.compile(r"^([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$", re.IGNORECASE)


def duration_ms(text: str) -> int:
    """Java's Duration.parse (PnDTnHnMn.nS), in milliseconds: what share.auto.offset.reset's
    by_duration takes."""
    found = _DURATION.match(text.strip())
    if found is None or found.group(0).upper().endswith("T") or text.strip().upper() in ("P", "-P", "+P"):
        raise ValueError(f"Invalid duration {text!r}")
    sign, days, hours, minutes, seconds, fraction = found.groups()
    total = (int(days or 0) * 86_400_000 + int(hours or 0) * 3_600_000 + int(minutes or 0) * 60_000
             + int(seconds or 0) * 1000)
    if fraction:
        millis = int((fraction + "000")[:3])
        total += -millis if (seconds or "").startswith("-") else millis
    return -total if sign == "-" else total


def persister_error(code: int) -> int:
    """The error a share fetch answers for a persister's error (Kafka's SharePartition.fetchPersisterError)."""
    if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return code
    if code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


def error_message(code: int) -> str | None:
    """The message of the exception Kafka completes an acknowledgement's future with: its error's
    default message, which the response carries (KafkaApis answers validation errors without one)."""
    return ErrorCode(code).message if code in ErrorCode._value2member_map_ else None


# Errors of a share partition's operation after which it is dropped from memory (Kafka's
# fencedSharePartitionHandler): its state is read again when next fetched.
FENCING_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_STATE_EPOCH,
                            ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


class HostedSharePartition:
    """A share partition led here: the state machine, the replica partition whose log it reads
    (at the leader epoch it was created under), its initialization and the long polls parked on it."""

    def __init__(self, key: SharePartitionKey, topic: str, replica: Partition, state: SharePartition) -> None:
        self.key = key
        self.topic = topic
        self.replica = replica
        self.leader_epoch = replica.leader_epoch
        self.state = state
        self.initialized = trio.Event()
        self.init_error: int | None = None  # why the persister's state could not be loaded
        self.load_start_ms = loop_ms()
        self._waiters: list[Callable[[], None]] = []
        self.write_queue: deque[QueuedWrite] = deque()  # made, not sent yet
        self.writing = False  # a task is sending its writes

    def park(self, waiter: Callable[[], None]) -> None:
        self._waiters.append(waiter)

    def unpark(self, waiter: Callable[[], None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def wake(self) -> None:
        """Records may have become acquirable, or the partition changed: the share fetches parked
        on it try to complete, at once (Kafka's delayedRequestNotifier with the
        DelayedShareFetchGroupKey). They stay parked until they unpark."""
        for waiter in list(self._waiters):
            waiter()


class QueuedWrite:
    """A share partition's PendingWrite on its way to the persister: `await wait()` for the error
    the request that made it answers (the state machine's mapping of the persister's)."""

    __slots__ = ("pending", "best_effort", "error_code", "_done")

    def __init__(self, pending: PendingWrite, best_effort: bool) -> None:
        self.pending = pending
        self.best_effort = best_effort  # nobody waits for it: a failure is logged
        self.error_code: int = ErrorCode.NONE
        self._done = trio.Event()

    def settle(self, error_code: int) -> None:
        self.error_code = error_code
        self._done.set()

    async def wait(self) -> int:
        await self._done.wait()
        return self.error_code


def overlay(states: Sequence[SharePartitionState]) -> SharePartitionState:
    """Writes of one share partition made in this order as one: the last one's start offset and
    figures, and the state batches of all, a later one's over an earlier one's where they overlap."""
    batches: list[PersisterStateBatch] = []
    for state in states:
        for new in state.state_batches:
            kept: list[PersisterStateBatch] = []
            for old in batches:
                if old.last_offset < new.first_offset or old.first_offset > new.last_offset:
                    kept.append(old)
                    continue
                if old.first_offset < new.first_offset:
                    kept.append(PersisterStateBatch(old.first_offset, new.first_offset - 1, old.delivery_state,
                                                    old.delivery_count))
                if old.last_offset > new.last_offset:
                    kept.append(PersisterStateBatch(new.last_offset + 1, old.last_offset, old.delivery_state,
                                                    old.delivery_count))
            kept.append(new)
            batches = sorted(kept, key=lambda b: b.first_offset)
    last = states[-1]
    return SharePartitionState(last.state_epoch, last.start_offset, last.leader_epoch, batches,
                               last.delivery_complete_count)


@dataclass
class ShareFetchMetrics:
    """What Kafka's ShareGroupMetrics, BrokerTopicStats' share meters and DelayedShareFetchMetrics
    count, as counts (a collector turns them into rates)."""

    fetch_requests: int = 0  # totalShareFetchRequestRate (per topic in Kafka)
    failed_fetch_requests: int = 0
    acknowledgement_requests: int = 0
    failed_acknowledgement_requests: int = 0
    acknowledgements: dict[int, int] = field(default_factory=dict)  # by acknowledge type: records
    expired_delayed_fetches: int = 0  # ExpiresPerSec
    partition_load_ms: list[int] = field(default_factory=list)  # partition-load-time, the last ones

    def acknowledged(self, batches: Sequence[ShareAcknowledgementBatch]) -> None:
        for batch in batches:
            types = batch.acknowledge_types
            if len(types) == 1:
                self.acknowledgements[types[0]] = (self.acknowledgements.get(types[0], 0)
                                                   + batch.last_offset - batch.first_offset + 1)
            else:
                for ack_type in types:
                    self.acknowledgements[ack_type] = self.acknowledgements.get(ack_type, 0) + 1


class PendingAcknowledgements:
    """Acknowledgements applied to the share partitions, their writes to the persister pending:
    `complete()` waits for them; `results` then holds each partition's (error code, message)."""

    def __init__(self) -> None:
        self.results: dict[TopicIdPartition, tuple[int, str | None]] = {}
        self._writes: list[tuple[TopicIdPartition, QueuedWrite]] = []

    async def complete(self, manager: SharePartitionManager) -> dict[TopicIdPartition, tuple[int, str | None]]:
        writes, self._writes = self._writes, []
        for tip, queued in writes:  # under way together already
            code = await queued.wait()
            if code != ErrorCode.NONE:
                self.results[tip] = (code, error_message(code))
        if any(code != ErrorCode.NONE for code, _ in self.results.values()):
            manager.metrics.failed_acknowledgement_requests += 1
        return self.results


class SharePartitionManager:
    def __init__(self, replica_manager: ReplicaManager, config: KafkaConfig, persister: Persister | None,
                 group_configs: GroupConfigManager) -> None:
        self._replicas = replica_manager
        self._config = config
        # None until the share coordinator's persister is wired: reads answer COORDINATOR_NOT_AVAILABLE.
        self.persister = persister
        self.group_configs = group_configs
        self.sessions = ShareSessionCache(config.get_int("group.share.max.share.sessions"))
        self.sessions.listener = self
        self.partitions: dict[SharePartitionKey, HostedSharePartition] = {}
        self.metrics = ShareFetchMetrics()
        self._waker = DeadlineWaker("share partitions' acquisition locks", loop_ms)
        # A share fetch's pass (read, then acquire) is running: a fetch woken meanwhile makes its
        # own pass later, in its own task, rather than one nested in another's acquisitions.
        self.fetch_pass_running = False
        self._nursery: trio.Nursery | None = None

    # -- the background: initializations, best-effort writes, lock expiry ------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._waker.run(self._next_deadline, self._expire_locks)
        finally:
            self._nursery = None

    def _background(self, fn, *args) -> bool:
        """Run a load or writes in the background; dropped (False) once the broker is shutting down
        (the state is read from the persister again at the next start, as after a crash)."""
        try:
            if self._nursery is None:
                raise RuntimeError("not running")
            self._nursery.start_soon(fn, *args)
        except RuntimeError:  # not running, or its nursery closed to new tasks as the broker stops
            log.debug("The broker is shutting down: %s of %s not done", fn.__name__, args[0].key)
            return False
        return True

    def locks_changed(self) -> None:
        """Acquisitions or acknowledgements moved the lock deadlines."""
        self._waker.poke()

    def _next_deadline(self) -> int | None:
        deadlines = [d for hosted in self.partitions.values() if (d := hosted.state.next_deadline()) is not None]
        return min(deadlines) if deadlines else None

    async def _expire_locks(self, now_ms: int) -> None:
        for hosted in list(self.partitions.values()):
            deadline = hosted.state.next_deadline()
            if deadline is None or deadline > now_ms:
                continue
            if not self.is_current(hosted):
                self.remove(hosted)
                continue
            pending = hosted.state.expire_locks(now_ms)
            hosted.wake()
            if pending is not None:
                self.write(hosted, pending, best_effort=True)

    # -- the share partitions -----------------------------------------------------------------------

    def share_config(self, group_id: str) -> ShareGroupConfig:
        return self.group_configs.share_config(group_id)

    def partition_config(self, group_config: ShareGroupConfig) -> SharePartitionConfig:
        return SharePartitionConfig(
            record_lock_duration_ms=group_config.record_lock_duration_ms,
            delivery_count_limit=group_config.delivery_count_limit,
            max_in_flight_records=group_config.partition_max_record_locks,
            renew_acknowledge_enabled=group_config.renew_acknowledge_enable)

    def replica(self, topic: str, partition: int) -> tuple[int, Partition | None]:
        """The replica partition a share partition reads, led here, or why not (Kafka's
        PartitionMetadataProvider: getPartitionOrException, then isLeader)."""
        replica = self._replicas.get(topic, partition)
        if replica is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        code = replica.check_leader()
        return code, (replica if code == ErrorCode.NONE else None)

    def is_current(self, hosted: HostedSharePartition) -> bool:
        """Still led here at the epoch the share partition was created under."""
        replica = self._replicas.get(hosted.topic, hosted.key.partition)
        return (replica is hosted.replica and replica.is_leader and not replica.is_offline
                and replica.leader_epoch == hosted.leader_epoch
                and hosted.state.status != SharePartitionStatus.FENCED)

    def drop_stale(self) -> None:
        """Drop the share partitions whose replica partition went or is no longer led here at their
        epoch (Kafka's SharePartitionListener: onDeleted, onBecomingFollower, onFailed); the
        broker calls it when topics or leaderships change."""
        for hosted in [h for h in self.partitions.values() if not self.is_current(h)]:
            self.remove(hosted)

    def get(self, group_id: str, tip: TopicIdPartition) -> HostedSharePartition | None:
        """The share partition if it is hosted and still current (a stale one is dropped)."""
        hosted = self.partitions.get(SharePartitionKey(group_id, tip.topic_id, tip.partition))
        if hosted is not None and not self.is_current(hosted):
            self.remove(hosted)
            return None
        return hosted

    def get_or_create(self, group_id: str, tip: TopicIdPartition) -> tuple[int, HostedSharePartition | None]:
        """The share partition, created (and its state being read) if new here; or the error that
        answers the partition (Kafka's getOrCreateSharePartition and maybeInitialize)."""
        config = self.partition_config(self.share_config(group_id))
        hosted = self.get(group_id, tip)
        if hosted is None:
            assert tip.topic is not None
            code, replica = self.replica(tip.topic, tip.partition)
            if replica is None:
                return code, None
            key = SharePartitionKey(group_id, tip.topic_id, tip.partition)
            state = SharePartition(group_id, tip.topic_id, tip.partition, replica.leader_epoch, config)
            hosted = self.partitions[key] = HostedSharePartition(key, tip.topic, replica, state)
        elif hosted.state.config != config:  # the group's configs changed: from now on
            hosted.state.config = config
        return self._maybe_initialize(hosted), hosted

    def _maybe_initialize(self, hosted: HostedSharePartition) -> int:
        if hosted.init_error is not None:
            return hosted.init_error
        try:
            start = hosted.state.start_initializing()
        except SharePartitionError as e:
            if e.error_code == ErrorCode.LEADER_NOT_AVAILABLE:
                return ErrorCode.NONE  # being read: the fetch waits for it
            self.remove(hosted)
            return e.error_code
        if start:
            self._background(self._initialize, hosted)
        return ErrorCode.NONE

    async def _initialize(self, hosted: HostedSharePartition) -> None:
        """Read the persisted state and load it (Kafka's SharePartition.maybeInitialize)."""
        key = hosted.key
        error: int = ErrorCode.NONE
        persister = self.persister
        code: int
        state: SharePartitionState | None
        try:
            if persister is None:
                code, state = ErrorCode.COORDINATOR_NOT_AVAILABLE, None
            else:
                code, state = await persister.read_state(key.group_id, key.topic_id, key.partition, hosted.leader_epoch)
        except Exception:
            log.exception("Failed to read the share group state of %s", key)
            code, state = ErrorCode.UNKNOWN_SERVER_ERROR, None
        if code != ErrorCode.NONE or state is None:
            log.error("Failed to initialize the share partition: %s-%s:%d: %s", key.group_id, hosted.topic,
                      key.partition, code)
            error = persister_error(code) if code != ErrorCode.NONE else ErrorCode.UNKNOWN_SERVER_ERROR
        elif hosted.state.status == SharePartitionStatus.INITIALIZING:
            try:
                start_offset = None
                if state.start_offset == UNINITIALIZED_START_OFFSET:
                    start_offset = self.reset_offset(hosted)
                hosted.state.initialize(state, start_offset)
            except SharePartitionError as e:
                error = e.error_code
            except StorageError as e:
                error = e.error_code
        if error != ErrorCode.NONE:
            hosted.init_error = error
            if hosted.state.status == SharePartitionStatus.INITIALIZING:
                hosted.state.mark_failed()
            self.remove(hosted)
        else:
            self.metrics.partition_load_ms = self.metrics.partition_load_ms[-99:] + [loop_ms() - hosted.load_start_ms]
        hosted.initialized.set()
        hosted.wake()

    def reset_offset(self, hosted: HostedSharePartition) -> int:
        """Where a share partition without a persisted start offset starts, by the group's
        share.auto.offset.reset (Kafka's startOffsetDuringInitialization): latest is the high
        watermark, earliest the log start offset, by_duration the first record at most that old;
        raises SharePartitionError OFFSET_NOT_AVAILABLE when there is none."""
        log_ = hosted.replica.log
        reset = str(self.share_config(hosted.key.group_id).auto_offset_reset).strip()
        kind = reset.lower()
        if kind == "latest":
            return log_.high_watermark
        if kind == "earliest":
            return log_.log_start_offset
        if kind.startswith("by_duration:"):
            timestamp = wall_clock_ms() - duration_ms(reset[len("by_duration:"):])
            found = log_.fetch_offset_by_timestamp(timestamp)
            if found is not None and found.offset < log_.high_watermark:
                return found.offset
            raise SharePartitionError(ErrorCode.OFFSET_NOT_AVAILABLE,
                                      f"Offset for timestamp {timestamp} not found for topic partition: "
                                      f"{hosted.topic}-{hosted.key.partition}")
        raise SharePartitionError(ErrorCode.INVALID_CONFIG, f"Unknown share.auto.offset.reset {reset!r}")

    def remove(self, hosted: HostedSharePartition) -> None:
        """Drop a share partition from memory (Kafka's removeSharePartitionFromCache): fenced, its
        long polls woken; its state is read from the persister again when next fetched."""
        if self.partitions.get(hosted.key) is hosted:
            del self.partitions[hosted.key]
        if hosted.state.status != SharePartitionStatus.FENCED:
            hosted.state.mark_fenced()
        hosted.wake()

    def maybe_fence(self, hosted: HostedSharePartition, code: int) -> None:
        if code in FENCING_ERRORS:
            log.info("The share partition with key %s is fenced: %s", hosted.key, code)
            self.remove(hosted)

    def write(self, hosted: HostedSharePartition, pending: PendingWrite, best_effort: bool = False) -> QueuedWrite:
        """Send a state change of the share partition to the persister after those it made before,
        and settle it in the state machine (see the module's docstring)."""
        queued = QueuedWrite(pending, best_effort)
        hosted.write_queue.append(queued)
        if not hosted.writing:
            hosted.writing = True
            if not self._background(self._send_writes, hosted):  # the broker is shutting down
                hosted.writing = False
                writes = list(hosted.write_queue)
                hosted.write_queue.clear()
                self._settle(hosted, writes, ErrorCode.COORDINATOR_NOT_AVAILABLE, stopping=True)
        return queued

    async def _send_writes(self, hosted: HostedSharePartition) -> None:
        """The share partition's writes, one WriteShareGroupState at a time, those made meanwhile
        together in the next, until none is left."""
        try:
            while hosted.write_queue:
                writes = list(hosted.write_queue)
                hosted.write_queue.clear()
                code = await self._write_state(hosted, overlay([w.pending.state for w in writes]))
                self._settle(hosted, writes, code)
        finally:
            hosted.writing = False

    async def _write_state(self, hosted: HostedSharePartition, state: SharePartitionState) -> int:
        key = hosted.key
        persister = self.persister
        try:
            if persister is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return await persister.write_state(key.group_id, key.topic_id, key.partition, state)
        except Exception:
            log.exception("Failed to write the share group state of %s", key)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    def _settle(self, hosted: HostedSharePartition, writes: list[QueuedWrite], code: int,
                stopping: bool = False) -> None:
        fetchable = False
        for queued in writes:
            completed = hosted.state.complete_write(queued.pending.write_id, code)
            fetchable = fetchable or completed.fetchable
            queued.settle(completed.error_code)
        if fetchable:
            hosted.wake()
        self.locks_changed()
        if code != ErrorCode.NONE and not stopping:
            if any(w.best_effort for w in writes):
                log.warning("Failed to write the share group state of %s: %s", hosted.key,
                            ErrorCode(code).name if code in ErrorCode._value2member_map_ else code)
            self.maybe_fence(hosted, persister_error(code))

    # -- acknowledgements and releases --------------------------------------------------------------

    def acknowledge(self, group_id: str, member_id: str,
                    batches: dict[TopicIdPartition, list[ShareAcknowledgementBatch]]) -> PendingAcknowledgements:
        """Apply acknowledgements to the share partitions at once (the next fetch sees them); their
        writes complete with `PendingAcknowledgements.complete` (Kafka's SharePartitionManager.acknowledge)."""
        pending = PendingAcknowledgements()
        self.metrics.acknowledgement_requests += 1
        now = loop_ms()
        config = self.partition_config(self.share_config(group_id))
        for tip, partition_batches in batches.items():
            hosted = self.get(group_id, tip)
            if hosted is not None and hosted.state.config != config:
                hosted.state.config = config  # RENEW's lock duration, renew_acknowledge_enabled
            if hosted is None:
                pending.results[tip] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        error_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                write = hosted.state.acknowledge(member_id, partition_batches, now)
            except SharePartitionError as e:
                pending.results[tip] = (e.error_code, e.message or error_message(e.error_code))
                self.maybe_fence(hosted, e.error_code)
            else:
                pending.results[tip] = (ErrorCode.NONE, None)
                self.metrics.acknowledged(partition_batches)
                if write is not None:
                    pending._writes.append((tip, self.write(hosted, write)))
            hosted.wake()
        self.locks_changed()
        return pending

    def release_session(self, group_id: str, member_id: str) -> bool:
        """Close a member's share session and release the records it holds on its partitions
        (their writes in the background); False when it had no session (Kafka's releaseSession)."""
        session = self.sessions.get(group_id, member_id)
        if session is None:
            log.error("Share session error for %s: no such share session found", (group_id, member_id))
            return False
        tips = [cached.partition for cached in session.partitions.values()]
        self.sessions.remove(group_id, member_id)
        self._release(group_id, member_id, tips)
        return True

    def _release(self, group_id: str, member_id: str, tips: list[TopicIdPartition]) -> None:
        now = loop_ms()
        for tip in tips:
            hosted = self.get(group_id, tip)
            if hosted is None or hosted.state.status != SharePartitionStatus.ACTIVE:
                continue
            try:
                write = hosted.state.release_acquired_records(member_id, now)
            except SharePartitionError as e:
                self.maybe_fence(hosted, e.error_code)
                continue
            hosted.wake()
            if write is not None:
                self.write(hosted, write, best_effort=True)
        self.locks_changed()

    # -- ShareGroupListener (the share session cache's, on a closed connection) -----------------------

    def on_member_leave(self, group_id: str, member_id: str) -> None:
        """The connection of the member's share session closed: its records go back."""
        if self.sessions.get(group_id, member_id) is not None:
            self.release_session(group_id, member_id)

    def on_group_empty(self, group_id: str) -> None:
        """No member left: the group's share partitions leave memory (read again when fetched)."""
        for hosted in [h for key, h in self.partitions.items() if key.group_id == group_id]:
            self.remove(hosted)

    def connection_closed(self, connection_id: str) -> None:
        """A client connection closed: the share session it opened goes (the member leaves)."""
        self.sessions.connection_closed(connection_id)

    def record_lock_duration_ms(self, group_id: str) -> int:
        """The response's acquisition_lock_timeout_ms (Kafka's recordLockDurationMsOrDefault)."""
        return int(self.share_config(group_id).record_lock_duration_ms)
