"""Partitions this broker leads, their logs, and the fetches parked on them (purgatory).

With one broker every partition's ISR is this broker alone, so the high watermark follows the log
end offset on every append. A long-polling fetch registers a trio.Event with each partition it
reads; an append sets them, so the fetch wakes as soon as data arrives. On a replicated partition
what waits is woken by what it waits for (Kafka's DelayedFetch and DelayedProduce keys): a
follower's fetch by the log end offset moving (an append), a consumer's fetch or an acks=all
produce by the high watermark moving (a follower's fetch); a change of role wakes both. An append
there no longer wakes the consumers, to whom it shows nothing yet, nor a high watermark move the
followers, who take it from their next fetch.

After a clean shutdown a partition's log is opened on its first use (`Partition.log`): what
Metadata answers comes from the metadata image, so startup opens no log.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ...coordinator.partition_leader import IsrChange, PartitionLeaderState
from ...storage.errors import KafkaStorageException, StorageError
from ...storage.log import AppendOrigin, future_dir_name
from ...storage.log_config import LogConfig
from ...storage.log_validator import ProducedRecords
from ...wire.errors import ErrorCode
from ..clock import wall_clock_ms
from ..heap import making_long_lived_objects
from ..metrics.topic_stats import BrokerTopicStats, TopicStats
from ..metadata.cache import TopicInfo
from ..metadata.image import MetadataStore
from .replica_alter_log_dirs import ReplicaAlterLogDirsManager
from .replica_fetcher import ReplicaFetcherManager

if TYPE_CHECKING:
    from ...storage.log import Log, LogAppendInfo
    from ...storage.log_manager import LogManager
    from ..config.kafka_config import KafkaConfig

log = logging.getLogger("samsa.replica")
READ_COMMITTED = 1  # isolation_level of Fetch and ListOffsets
NO_LEADER = -1
ZERO_UUID = uuid.UUID(int=0)
EPOCH_DURING_DELETE = -2  # Kafka's LeaderAndIsr.EPOCH_DURING_DELETE: StopReplica for a topic being deleted
NO_EPOCH = -1  # Kafka's LeaderAndIsr.NO_EPOCH: StopReplica before v3 carries no epochs
RECOVERED, RECOVERING = 0, 1  # Kafka's LeaderRecoveryState (KIP-704)
PartitionEpoch = tuple[tuple[str, int], int]  # ((topic, partition), leader epoch)


@dataclass(frozen=True)
class PartitionState:
    """A partition's leadership as LeaderAndIsr carries it (LeaderAndIsrPartitionState)."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    topic_id: uuid.UUID | None = None  # None: the request carries none (LeaderAndIsr before v5)
    leader_recovery_state: int = RECOVERED  # RECOVERING after an unclean election (v6+)


@dataclass
class IsrChangeCounts:
    """ISR changes the controller confirmed for partitions this broker leads (Kafka's
    IsrShrinksPerSec and IsrExpandsPerSec meters)."""
    shrinks: int = 0
    expands: int = 0


class Partition:
    """A partition's log and its role here. Until a LeaderAndIsr says otherwise this broker leads it
    alone (the single broker): the high watermark follows the log end offset. Once it leads with
    followers, `leader_state` (pure, coordinator.partition_leader) tracks them, the ISR and the
    high watermark; as a follower the replica fetcher appends what the leader has."""

    def __init__(self, topic: TopicInfo, index: int, logs: LogManager, local_id: int = 0) -> None:
        self.topic = topic
        self.index = index
        self._logs = logs
        self._log: Log | None = None
        self.local_id = local_id
        self.leader_id = local_id
        self.leader_epoch = 0
        # The leader epoch at which this broker's current, unbroken leadership began: an acks=all
        # produce appended since then stays in the log whatever later epochs re-elect it.
        self.led_since_epoch = 0
        self.partition_epoch = 0
        self.replicas: tuple[int, ...] = (local_id,)
        self.isr: tuple[int, ...] = (local_id,)
        self.leader_state: PartitionLeaderState | None = None  # None: unreplicated, or a follower
        self.leader_recovery_state = RECOVERED
        self.high_watermark_follows_log_end = True
        self.replica_lag_time_max_ms = 30_000  # the broker's replica.lag.time.max.ms (ReplicaManager sets it)
        self.clock_ms = wall_clock_ms  # when a follower's last catch-up is too old (tests move it)
        self._waiters: list[trio.Event] = []  # woken when the high watermark moves (and on any wake())
        self._log_end_waiters: list[trio.Event] = []  # followers' fetches: woken by appends (and any wake())
        # Shared with the other partitions (the ReplicaManager's): what this one counts for metrics.
        self.stats = TopicStats()
        self.isr_changes = IsrChangeCounts()

    @property
    def log(self) -> Log:
        """The partition's log, opened on first use."""
        log_ = self._log
        return self.open_log() if log_ is None else log_

    @property
    def effective_min_isr(self) -> int:
        """Kafka 4.4's Partition.effectiveMinIsr: min.insync.replicas, but at most the number of
        replicas, so that a topic with fewer replicas than its min.insync.replicas still takes acks=all
        produces (the high watermark's gate, PartitionLeaderState.maybe_advance_high_watermark, caps
        it alike)."""
        return min(self.log.config.min_insync_replicas, len(self.replicas))

    @property
    def opened_log(self) -> Log | None:
        """The partition's log if it was opened (what reads it without opening it use)."""
        return self._log

    def open_log(self) -> Log:
        log_ = self._log
        if log_ is None:
            log_ = self._logs.get_log(self.topic.name, self.index)
            if log_ is None:
                raise KafkaStorageException(f"The log of partition {self.name} is missing")
            if self.high_watermark_follows_log_end:
                log_.high_watermark = log_.log_end_offset
            self._log = log_
        return log_

    def replace_log(self, new: Log) -> None:
        """Its future log took the current one's place (the replica moved to another log
        directory); what waits on the partition looks again, at the new log."""
        self._log = new
        self.wake()

    def update_config(self, config: LogConfig) -> None:
        self._logs.update_config(self.topic.name, self.index, config)

    @property
    def is_offline(self) -> bool:
        """Its log is in a failed log directory (Kafka's HostedPartition.Offline): every request
        for it gets KAFKA_STORAGE_ERROR until a restart."""
        log_ = self._log
        return log_.is_offline if log_ is not None else self._logs.is_log_offline(self.topic.name, self.index)

    @property
    def name(self) -> str:
        return f"{self.topic.name}-{self.index}"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    @property
    def last_stable_offset(self) -> int:
        """Up to the first record of the earliest open transaction, at most the high watermark."""
        return self.log.last_stable_offset

    def read_bound(self, isolation_level: int) -> int:
        """The first offset a reader may not see: the last stable offset for read_committed."""
        return self.last_stable_offset if isolation_level == READ_COMMITTED else self.log.high_watermark

    def check_leader_epoch(self, requested: int) -> int:
        """KIP-320: a client's view of the leader epoch; -1 means it has none to check."""
        if requested < 0 or requested == self.leader_epoch:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH

    def check_replica(self, requested_epoch: int = -1, require_leader: bool = True) -> int:
        """Kafka's localLogWithEpochOrThrow: the epoch first, then the role; without
        `require_leader` (a consumer reading from a follower, KIP-392) any replica hosting the
        partition serves (not one StopReplica stopped)."""
        log_ = self._log
        if (self.leader_id == self.local_id and log_ is not None and not log_.is_offline
                and (requested_epoch < 0 or requested_epoch == self.leader_epoch)):
            return ErrorCode.NONE  # the leader, asked at its epoch (or none): every fetch of every partition
        if require_leader:
            return self.check_leader(requested_epoch)
        if self.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        code = self.check_leader_epoch(requested_epoch)
        if code == ErrorCode.NONE and (self.leader_id == NO_LEADER or self.local_id not in self.replicas):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return code

    def check_leader(self, requested_epoch: int = -1) -> int:
        """Kafka's localLogWithEpochOrThrow(requireLeader=true): the epoch first, then the role;
        before both, a partition whose log directory failed (getPartitionOrException)."""
        if self.is_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        # No epoch asked for (a Produce, most fetches): only the role decides. Every request asks.
        code = ErrorCode.NONE if requested_epoch < 0 else self.check_leader_epoch(requested_epoch)
        if code == ErrorCode.NONE and not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return code

    def append(self, records: bytearray | memoryview | ProducedRecords,
               origin: AppendOrigin = AppendOrigin.CLIENT, transaction_version: int = 0,
               verification_guard: int | None = None) -> LogAppendInfo:
        """Append a batch, or a Produce partition's parsed records (the log converts, validates and
        assigns offsets in place); wakes parked fetches. `transaction_version`: a transaction
        marker's (KIP-1228), which decides the epoch it must carry. `verification_guard`: a
        transactional batch's, when its verification is required (see Log.append_as_leader)."""
        log_ = self.log
        size = len(records.buffer if isinstance(records, ProducedRecords) else records)
        info = log_.append_as_leader(records, leader_epoch=self.leader_epoch, origin=origin,
                                     transaction_version=transaction_version, verification_guard=verification_guard)
        stats = self.stats  # as Kafka's appendToLocalLog: the bytes as received, the records appended
        stats.bytes_in += size
        stats.messages_in += info.record_count
        if self.leader_state is None:
            log_.high_watermark = log_.log_end_offset
            self.wake()
        else:
            self._wake_log_end_waiters()
            if self._maybe_advance_high_watermark():  # an ISR of the leader alone
                self.wake_high_watermark_waiters()
        return info

    # -- leader of a replicated partition
    def make_leader(self, state: PartitionState, now_ms: int) -> None:
        """Kafka's Partition.makeLeader: the new epoch starts at the log end offset; the followers of
        the ISR count as caught up now. A leader elected uncleanly (RECOVERING) has nothing to
        recover in Kafka 3.9's broker: it is RECOVERED from now on, which its next AlterPartition says."""
        log_ = self.log
        if state.leader_recovery_state == RECOVERING:
            log.info("The topic partition %s was marked as RECOVERING. Marking the topic partition as RECOVERED.",
                     self.name)
        if self.leader_state is None:  # it followed, or led nothing, until now
            self.led_since_epoch = state.leader_epoch
        self._set_state(state)
        self.leader_recovery_state = RECOVERED
        log_.leader_epoch_cache.assign(state.leader_epoch, log_.log_end_offset)
        self.leader_state = PartitionLeaderState(self.local_id, list(state.replicas), list(state.isr),
                                                 log_.log_end_offset, log_.high_watermark, now_ms,
                                                 previous=self.leader_state)  # set while it led here
        self.isr = self.leader_state.isr
        self._maybe_advance_high_watermark()
        self.wake()

    def make_follower(self, state: PartitionState) -> None:
        self._set_state(state)
        self.leader_recovery_state = state.leader_recovery_state
        self.leader_state = None
        self.wake()  # parked fetches and acks=all produces learn they are no longer at the leader

    def stop_leading(self) -> None:
        """No leader here any more, nor a fetcher (StopReplica)."""
        self.leader_id = NO_LEADER
        self.leader_state = None
        self.wake()

    def _set_state(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)

    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: int) -> IsrChange | None:
        """A follower's fetch: its log end offset is `fetch_offset`; an ISR expansion may be
        proposed (pending until the controller confirms it) and the high watermark advance (which
        wakes the consumers and acks=all produces waiting on it)."""
        leader_state = self.leader_state
        if leader_state is None:
            return None
        follower = leader_state.followers.get(replica_id)
        previous_end = None if follower is None else follower.log_end_offset
        change = leader_state.follower_fetched(replica_id, fetch_offset, self.log.log_end_offset, now_ms)
        if change is not None:
            log.info("[Partition %s broker=%d] Expanding ISR from %s to %s", self.name, self.local_id,
                     list(change.committed), list(change.isr))
        # Only a follower's log end offset that moved can move the high watermark (Kafka's
        # updateFollowerFetchState): a fetch that finds the follower where it was (the second pass
        # of a long poll, a partition with nothing new in a session) looks no further.
        if (follower is not None and follower.log_end_offset != previous_end
                and self._maybe_advance_high_watermark()):
            self.wake_high_watermark_waiters()  # not the followers: their next fetch brings it
        return change

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> IsrChange | None:
        """Propose the ISR without the followers lagging more than `lag_time_max_ms`; the high
        watermark still waits for them until the controller confirms."""
        leader_state = self.leader_state
        if leader_state is None:
            return None
        change = leader_state.maybe_shrink_isr(self.log.log_end_offset, now_ms, lag_time_max_ms)
        if change is not None:
            log.info("[Partition %s broker=%d] Shrinking ISR from %s to %s. Leader: (highWatermark: %d, endOffset: %d). "
                     "Out of sync replicas: %s.", self.name, self.local_id, list(change.committed), list(change.isr),
                     self.log.high_watermark, self.log.log_end_offset, list(change.removed))
        return change

    def isr_change_committed(self, change: IsrChange, leader_epoch: int, isr: tuple[int, ...],
                             partition_epoch: int) -> bool:
        """The controller's AlterPartition answer took `change` (Kafka's handleAlterPartitionUpdate):
        ignored if it is for another leader epoch or an older partition epoch, or if a LeaderAndIsr
        replaced the pending change meanwhile; otherwise the ISR is committed and the high
        watermark may move. True if the change is settled."""
        leader_state = self.leader_state
        if (leader_state is None or leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch
                or not leader_state.committed(change, isr)):
            return False
        self.isr = leader_state.isr
        self.partition_epoch = partition_epoch
        if change.removed:
            self.isr_changes.shrinks += 1
        elif change.added:
            self.isr_changes.expands += 1
        log.info("[Partition %s broker=%d] ISR updated to %s%s and version updated to %d", self.name, self.local_id,
                 ",".join(map(str, self.isr)),
                 " (under-min-isr)" if len(self.isr) < self.log.config.min_insync_replicas else "", partition_epoch)
        if self._maybe_advance_high_watermark():
            self.wake_high_watermark_waiters()
        return True

    def isr_change_refused(self, change: IsrChange, error_code: int) -> bool:
        """The controller refused `change` (Kafka's handleAlterPartitionError): rolled back when the
        controller says it was not applied, else pending until the next LeaderAndIsr, or retried
        (True) for other errors."""
        leader_state = self.leader_state
        if leader_state is None or leader_state.pending is not change:
            return False  # a LeaderAndIsr replaced it: the answer is out of date
        retry = leader_state.refused(change, error_code)
        if leader_state.pending is None:
            log.info("[Partition %s broker=%d] Failed to alter partition to ISR %s since the controller rejected the "
                     "request with %s. Partition state has been reset to the latest committed state, ISR %s.",
                     self.name, self.local_id, list(change.isr), ErrorCode(error_code).name, list(self.isr))
        elif retry:
            log.warning("[Partition %s broker=%d] Failed to update ISR to %s due to unexpected %s. Retrying.",
                        self.name, self.local_id, list(change.isr), ErrorCode(error_code).name)
        else:
            log.info("[Partition %s broker=%d] Failed to alter partition to ISR %s: %s. Partition state may be out of "
                     "sync, awaiting the latest metadata.", self.name, self.local_id, list(change.isr),
                     ErrorCode(error_code).name)
        return retry

    def _maybe_advance_high_watermark(self) -> bool:
        leader_state = self.leader_state
        log_ = self.log
        if leader_state is None or not leader_state.maybe_advance_high_watermark(
                log_.log_end_offset, self.clock_ms(), self.replica_lag_time_max_ms,
                log_.config.min_insync_replicas):
            return False
        log_.high_watermark = leader_state.high_watermark
        return True

    def replication_done(self, required_offset: int, leader_epoch: int) -> int | None:
        """Where an acks=all produce appended at `leader_epoch` up to `required_offset` stands
        (Kafka's DelayedProduce tryComplete): None while the ISR has not all of it, else its error
        code. NOT_LEADER_OR_FOLLOWER only if this broker stopped leading since the append (as a
        follower it may have truncated the records). Re-elected at a later epoch without a break (a
        LeaderAndIsr that shrank the ISR, a new controller's), it still has the records and they
        are committed as usual: an idempotent producer told NOT_LEADER_OR_FOLLOWER takes them for
        not written and, should its epoch be bumped, sends them again under new sequence numbers."""
        if self.is_offline:
            # Kafka completes nothing when a log dir fails (handleLogDirFailure): the produce runs
            # out its timeout and gets REQUEST_TIMED_OUT, which a client takes for possibly
            # written, as they may be: on the followers, one of which leads now. Told at once, it
            # need not wait. KAFKA_STORAGE_ERROR would say not written, and an idempotent producer
            # would bump its epoch and write them again under new sequence numbers (a duplicate).
            return ErrorCode.REQUEST_TIMED_OUT
        if not self.is_leader or leader_epoch < self.led_since_epoch:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        leader_state = self.leader_state
        if leader_state is None:
            return ErrorCode.NONE
        done, enough = leader_state.required_offset_reached(required_offset, self.effective_min_isr)
        if not done:
            return None
        return ErrorCode.NONE if enough else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    # -- follower
    def append_as_follower(self, records: bytearray | memoryview | None, leader_high_watermark: int,
                           leader_log_start_offset: int) -> LogAppendInfo | None:
        """What the leader sent (possibly nothing), and its high watermark and log start offset,
        which this replica's follow within what it holds."""
        log_ = self.log
        info = None
        if records is not None and len(records) > 0:
            info = log_.append_as_follower(records)
            self.stats.replication_bytes_in += len(records)
        high_watermark = log_.high_watermark
        # Set (under the log's lock) only when it moves: most answers of a busy partition bring
        # records and the same high watermark, or the reverse.
        if min(leader_high_watermark, log_.log_end_offset) != high_watermark:
            log_.high_watermark = min(leader_high_watermark, log_.log_end_offset)
        if leader_log_start_offset > log_.log_start_offset:
            log_.follow_leader_log_start_offset(leader_log_start_offset)
        if info is not None or log_.high_watermark != high_watermark:
            self.wake()  # what waits on this replica's log: consumers reading from it (KIP-392), tests
        return info

    def park(self, event: trio.Event, on_log_end: bool = False) -> None:
        """Set `event` at the next wake: when the high watermark moves, or with `on_log_end` (a
        follower's fetch) when the log end offset does; and at any change of role or log."""
        (self._log_end_waiters if on_log_end else self._waiters).append(event)

    def unpark(self, event: trio.Event, on_log_end: bool = False) -> None:
        waiters = self._log_end_waiters if on_log_end else self._waiters
        # Usually gone already: the wake that set it took the partition's whole list (a caught-up
        # follower's fetch is woken by an append to every partition of it), and a ValueError raised
        # and caught cost more than looking first.
        if event in waiters:
            waiters.remove(event)

    @property
    def has_parked_fetches(self) -> bool:
        return bool(self._waiters or self._log_end_waiters)

    def wake(self) -> None:
        """Everything parked looks again (a change of role, of the log, of its start)."""
        self.wake_high_watermark_waiters()
        self._wake_log_end_waiters()

    def wake_high_watermark_waiters(self) -> None:
        if not self._waiters:  # every append wakes: most find nobody parked
            return
        waiters, self._waiters = self._waiters, []
        for event in waiters:
            event.set()

    def _wake_log_end_waiters(self) -> None:
        if not self._log_end_waiters:
            return
        waiters, self._log_end_waiters = self._log_end_waiters, []
        for event in waiters:
            event.set()


async def let_woken_fetches_answer() -> None:
    """Let the fetches an append woke send their responses before the appending request goes on:
    a consumer's latency is the append's, while a producer pipelines past its acknowledgement.
    trio runs each batch of runnable tasks in either order, so a task yielding twice runs again
    only after every task that was already runnable (the woken fetches) has had its turn."""
    await trio.lowlevel.cancel_shielded_checkpoint()
    await trio.lowlevel.cancel_shielded_checkpoint()


class ReplicaManager:
    def __init__(self, logs: LogManager, metadata: MetadataStore, config: KafkaConfig) -> None:
        """`config`: the broker's, dynamic configs applied (topic logs take its defaults)."""
        self._logs = logs
        self._metadata = metadata
        self._config = config
        # Called when a topic was created, deleted or grew: the consumer groups subscribed to it rebalance.
        self.on_topics_changed: Callable[[], None] = lambda: None
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.local_id: int = config.node_id
        # The single broker is its partitions' whole ISR: their high watermark is the log end
        # offset. In a cluster it is the one checkpointed (replication-offset-checkpoint) until the
        # partition's leader moves it.
        self.high_watermark_follows_log_end = not config.get("zookeeper.connect")
        # Called with (partition, change) when this broker, as leader, changed an ISR; in ZooKeeper
        # mode it tells the controller (AlterPartition, server/replication/alter_partition_manager.py).
        self.isr_change_listener: Callable[[Partition, IsrChange], None] = lambda partition, change: None
        # Called with (led, resigned) when leaderships changed here (Kafka's onLeadershipChange): the
        # partitions this broker now leads and those it now follows or stopped, each ((topic,
        # partition), leader epoch). In ZooKeeper mode the coordinators load and unload theirs.
        self.on_leadership_change: Callable[[list[PartitionEpoch], list[PartitionEpoch]], None] = (
            lambda led, resigned: None)
        self.fetchers = ReplicaFetcherManager(self, config)
        self.log_dir_movers = ReplicaAlterLogDirsManager(logs, config)  # AlterReplicaLogDirs' moves
        # Kafka's replicaStateChangeLock: one controller request (LeaderAndIsr, StopReplica) at a time,
        # its controller epoch checked and its changes made without another one in between.
        self.state_change_lock = trio.Lock()
        self.topic_stats = BrokerTopicStats()  # bytes and messages in and out, by topic (server/metrics/)
        self.isr_changes = IsrChangeCounts()

    def topic_log_config(self, topic: TopicInfo) -> LogConfig:
        return LogConfig.from_props(topic.configs, base=self._config.log_config())

    def load(self) -> None:
        """A partition for every one in the metadata image, its log created where missing; the
        logs startup loaded (recovered) take the high watermark now, the others when opened."""
        logs = self._logs
        for topic in self._metadata.topics.values():
            config = None
            for index in range(topic.num_partitions):
                if not logs.has_log(topic.name, index):
                    config = config or self.topic_log_config(topic)
                    self._open(topic, index, config)
                else:
                    self.partitions[(topic.name, index)] = self._partition(topic, index)
        for log_ in logs.opened_logs():
            partition = self.partitions.get((log_.topic, log_.partition))
            if partition is not None:
                partition.open_log()  # its high watermark follows the log end offset from now

    def _partition(self, topic: TopicInfo, index: int) -> Partition:
        partition = Partition(topic, index, self._logs, self.local_id)
        partition.high_watermark_follows_log_end = self.high_watermark_follows_log_end
        partition.replica_lag_time_max_ms = self._config.get_int("replica.lag.time.max.ms")
        partition.stats = self.topic_stats.of(topic.name)
        partition.isr_changes = self.isr_changes
        return partition

    def _open(self, topic: TopicInfo, index: int, config: LogConfig) -> Partition:
        topic_id = None if topic.topic_id == ZERO_UUID else topic.topic_id
        self._logs.create_log(topic.name, index, config, topic_id)  # or the log that is there
        self._logs.update_config(topic.name, index, config)
        partition = self._partition(topic, index)
        partition.open_log()
        self.partitions[(topic.name, index)] = partition
        return partition

    def _open_all(self, topic: TopicInfo, indexes: range, config: LogConfig) -> None:
        """Open (creating) these partitions' logs, or none of them: a directory that cannot be made
        (a full disk, no descriptors left) must not leave a topic whose partitions have no log,
        which every later Metadata request would trip over."""
        opened = []
        try:
            with making_long_lived_objects():
                for index in indexes:
                    self._open(topic, index, config)
                    opened.append(index)
        except (OSError, KafkaStorageException) as e:
            for index in opened:
                del self.partitions[(topic.name, index)]
                self._logs.delete_log(topic.name, index)
            log.error("Could not create the logs of %s partitions %s: %s", topic.name, indexes, e)
            raise KafkaStorageException(f"Could not create the log of {topic.name}: {getattr(e, 'strerror', None) or e}") from e

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str],
                     replication_factor: int = 1) -> TopicInfo:
        topic = self._metadata.add_topic(name, num_partitions, configs, replication_factor)
        config = self.topic_log_config(topic)
        try:
            self._open_all(topic, range(num_partitions), config)
        except KafkaStorageException:
            self._metadata.remove_topic(name)
            raise
        log.info("Created topic %s with %d partitions, topic id %s", name, num_partitions, topic.topic_id)
        self.on_topics_changed()
        return topic

    def add_partitions(self, name: str, new_total: int) -> None:
        topic = self._metadata.topics[name]
        config = self.topic_log_config(topic)
        self._open_all(topic, range(topic.num_partitions, new_total), config)
        self._metadata.set_partitions(name, new_total)
        self.on_topics_changed()

    def update_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        topic = self._metadata.topics[name]
        self._metadata.set_configs(name, configs)
        config = self.topic_log_config(topic)
        for index in range(topic.num_partitions):
            self.partitions[(name, index)].update_config(config)

    def apply_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """In a cluster: a topic's overrides changed in ZooKeeper (a /config/changes notification,
        Kafka's TopicConfigHandler); the logs of its partitions here take them."""
        hosted = [p for (topic, _), p in self.partitions.items() if topic == name]
        if hosted:
            config = LogConfig.from_props(configs, base=self._config.log_config())
            for partition in hosted:
                partition.topic.configs = dict(configs)
                partition.update_config(config)

    def delete_topic(self, name: str) -> TopicInfo:
        topic = self._metadata.remove_topic(name)
        for index in range(topic.num_partitions):
            partition = self.partitions.pop((name, index), None)
            if partition is not None:
                partition.wake()
                self.log_dir_movers.stop(name, index)
                self._logs.delete_log(name, index)
        self.topic_stats.remove(name)
        log.info("Deleted topic %s", name)
        self.on_topics_changed()
        return topic

    # -- replication (driven by LeaderAndIsr)
    def become_leader_or_follower(self, states: list[PartitionState], brokers: dict[int, tuple[str, int]],
                                  new_topics: Mapping[str, TopicInfo] | None = None,
                                  same_epoch_accepted: bool = False) -> dict[tuple[str, int], int]:
        """Take each partition's leadership as the controller decided it (Kafka's
        ReplicaManager.becomeLeaderOrFollower): lead it, or follow its leader at `brokers[leader]`
        (host, port), truncating first (KIP-279). A partition new to this broker is created (its log
        too, or the one on disk taken) from `new_topics[topic]` (its id and config overrides).
        Kafka's checks, in its order: a topic id other than the partition's: INCONSISTENT_TOPIC_ID; a
        leader epoch older than, or the same as, the one known: STALE_CONTROLLER_EPOCH (ignored);
        this broker not among the replicas: UNKNOWN_TOPIC_OR_PARTITION. `same_epoch_accepted`: the
        known leader epoch is taken again (a KRaft controller's request). Returns each partition's
        error code."""
        errors: dict[tuple[str, int], int] = {}
        now_ms = wall_clock_ms()
        for state in states:
            key = (state.topic, state.partition)
            partition = self.partitions.get(key)
            if partition is None:
                created = self._create_partition(state, new_topics)
                if not isinstance(created, Partition):
                    errors[key] = created
                    continue
                partition = created
            else:
                code = self._check_leader_and_isr(partition, state, same_epoch_accepted)
                if code != ErrorCode.NONE:
                    errors[key] = code
                    continue
            errors[key] = self._take_leadership(partition, state, brokers, now_ms)
        self._leadership_changed([self.partitions[k] for k, code in errors.items() if code == ErrorCode.NONE])
        for key, code in errors.items():
            if code == ErrorCode.NONE and self._logs.get_future_log(*key) is not None:
                # A move the last run left unfinished resumes (Kafka's becomeLeaderOrFollower
                # starts the alter-log-dirs fetcher of a partition with a future log).
                self.log_dir_movers.start(self.partitions[key])
        return errors

    def create_missing_logs(self, states: list[PartitionState], new_topics: Mapping[str, TopicInfo]) -> None:
        """Create the logs of the partitions in `states` this broker is to host and does not yet
        (as become_leader_or_follower would), so that it finds them: run in a worker thread before
        it. Creating a log writes and fsyncs a directory and its files, some 6 ms each on the
        development VM: a group coordinator's topic (50 partitions) held the event loop, and
        every produce and fetch, for 0.3-0.6 s (issue 31). A log that cannot be created here is
        left to become_leader_or_follower, which answers why. Thread-safe as the log manager's
        periodic jobs are (its lock)."""
        for state in states:
            topic = new_topics.get(state.topic)
            if (topic is None or self.local_id not in state.replicas or (state.topic, state.partition) in self.partitions
                    or self._logs.is_log_offline(state.topic, state.partition)):
                continue
            try:
                self._logs.create_log(topic.name, state.partition, self.topic_log_config(topic),
                                      None if topic.topic_id == ZERO_UUID else topic.topic_id)
            except (OSError, StorageError):
                continue

    def _create_partition(self, state: PartitionState, new_topics: Mapping[str, TopicInfo] | None) -> Partition | int:
        """A partition LeaderAndIsr names that this broker does not host yet, its log created (or
        the one on disk taken); or the error code that refuses it."""
        if self._logs.is_log_offline(state.topic, state.partition):
            return ErrorCode.KAFKA_STORAGE_ERROR
        topic = (new_topics or {}).get(state.topic)
        if self.local_id not in state.replicas or topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            return self._open(topic, state.partition, self.topic_log_config(topic))
        except StorageError as e:
            log.error("[Broker %d] cannot create the log of %s-%d: %s", self.local_id, state.topic, state.partition, e)
            return e.error_code

    def _check_leader_and_isr(self, partition: Partition, state: PartitionState, same_epoch_accepted: bool) -> int:
        if partition.is_offline:
            # HostedPartition.Offline: the controller learns from this answer that the replica is
            # in a failed log dir (after this broker's /log_dir_event_notification).
            log.warning("[Broker %d] Ignoring LeaderAndIsr for %s as the local replica for the partition is in "
                        "an offline log directory", self.local_id, partition.name)
            return ErrorCode.KAFKA_STORAGE_ERROR
        known_id = partition.topic.topic_id
        if state.topic_id not in (None, ZERO_UUID) and known_id != ZERO_UUID and state.topic_id != known_id:
            log.error("[Broker %d] Topic ID in memory: %s does not match the topic ID for partition %s received: %s.",
                      self.local_id, known_id, partition.name, state.topic_id)
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if state.leader_epoch < partition.leader_epoch or (
                state.leader_epoch == partition.leader_epoch and not same_epoch_accepted):
            log.info("[Broker %d] Ignoring LeaderAndIsr for %s: its leader epoch %d is not newer than %d",
                     self.local_id, partition.name, state.leader_epoch, partition.leader_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.local_id not in state.replicas:
            log.warning("[Broker %d] Ignoring LeaderAndIsr for %s as itself is not in assigned replica list %s",
                        self.local_id, partition.name, list(state.replicas))
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NONE

    def _take_leadership(self, partition: Partition, state: PartitionState, brokers: dict[int, tuple[str, int]],
                         now_ms: int) -> int:
        key = (state.topic, state.partition)
        partition.high_watermark_follows_log_end = False
        self.fetchers.remove_partition(key)
        try:
            if state.leader == self.local_id:
                partition.make_leader(state, now_ms)
                log.info("[Broker %d] %s: leader at epoch %d, ISR %s", self.local_id, partition.name,
                         state.leader_epoch, list(state.isr))
            else:
                partition.make_follower(state)
                address = brokers.get(state.leader)
                if address is not None:
                    self.fetchers.add_partition(key, state.leader, address)
                else:
                    log.warning("[Broker %d] %s: follower of %d, whose address is unknown: not fetching",
                                self.local_id, partition.name, state.leader)
                log.info("[Broker %d] %s: follower of %d at epoch %d", self.local_id, partition.name,
                         state.leader, state.leader_epoch)
        except StorageError as e:
            log.error("[Broker %d] %s: cannot take its leadership: %s", self.local_id, partition.name, e)
            return e.error_code
        return ErrorCode.NONE

    def stop_replicas(self, states: Mapping[tuple[str, int], tuple[int, bool]]) -> dict[tuple[str, int], int]:
        """StopReplica (Kafka's ReplicaManager.stopReplicas), `states`: (leader epoch, delete) by
        partition. Stop fetching the partitions and stop leading them (produces and fetches get
        NOT_LEADER_OR_FOLLOWER); with delete, their logs go too (the partition moved away, or its
        topic is being deleted), also the log of a partition not hosted (its topic deleted while
        this broker was down). A leader epoch older than the partition's: FENCED_LEADER_EPOCH, unless
        it is -2 (a deletion) or -1 (a request without epochs)."""
        errors: dict[tuple[str, int], int] = {}
        for key, (leader_epoch, delete) in states.items():
            partition = self.partitions.get(key)
            if partition is not None and partition.is_offline:
                log.warning("[Broker %d] Ignoring StopReplica (delete=%s) for %s as the local replica for the "
                            "partition is in an offline log directory", self.local_id, delete, partition.name)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if (partition is not None and leader_epoch not in (EPOCH_DURING_DELETE, NO_EPOCH)
                    and leader_epoch < partition.leader_epoch):
                log.warning("[Broker %d] Ignoring StopReplica for %s: its leader epoch %d is older than %d",
                            self.local_id, partition.name, leader_epoch, partition.leader_epoch)
                errors[key] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            self.fetchers.remove_partition(key)
            self.log_dir_movers.stop(*key)  # as Kafka's alter-log-dirs fetcher: the next LeaderAndIsr resumes it
            try:
                if partition is not None:
                    partition.stop_leading()
                    if delete:
                        del self.partitions[key]
                if delete and self._logs.has_log(*key):
                    self._logs.delete_log(*key)
                elif delete:
                    self._logs.delete_future_log(*key)
            except StorageError as e:
                errors[key] = e.error_code
                continue
            errors[key] = ErrorCode.NONE
        deleted_topics = {topic for (topic, _), (_, delete) in states.items() if delete}
        if deleted_topics:
            for topic in deleted_topics - {topic for topic, _ in self.partitions}:
                self.topic_stats.remove(topic)  # the last of its partitions here went
        self.on_leadership_change([], [(key, states[key][0]) for key, code in errors.items() if code == ErrorCode.NONE])
        return errors

    def handle_log_dir_failure(self, log_dir) -> None:
        """ReplicaManager.handleLogDirFailure, once the LogManager took the directory's logs offline:
        its partitions stop fetching, and what waits on them looks again: long-polling fetches
        answer KAFKA_STORAGE_ERROR, acks=all produces REQUEST_TIMED_OUT (`replication_done`)."""
        offline = [key for key, partition in self.partitions.items() if partition.is_offline]
        for key in offline:
            self.fetchers.remove_partition(key)
            self.log_dir_movers.stop(*key)
            self.partitions[key].wake()
        log.warning("Broker %d stopped fetcher for partitions %s because they are in the failed log directory %s",
                    self.local_id, ",".join(f"{t}-{p}" for t, p in sorted(offline)), log_dir)

    # -- the coordinators' hook (Kafka's onLeadershipChange and handleStopReplicaRequest's resignation)
    def _leadership_changed(self, changed: list[Partition]) -> None:
        self.on_leadership_change([((p.topic.name, p.index), p.leader_epoch) for p in changed if p.is_leader],
                                  [((p.topic.name, p.index), p.leader_epoch) for p in changed if not p.is_leader])

    def maybe_shrink_isrs(self, now_ms: int) -> None:
        """Kafka's isr-expiration task: drop followers lagging more than replica.lag.time.max.ms."""
        lag_time_max_ms = self._config.get_int("replica.lag.time.max.ms")
        for partition in list(self.partitions.values()):
            change = partition.maybe_shrink_isr(now_ms, lag_time_max_ms)
            if change is not None:
                self.isr_change_listener(partition, change)

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        change = partition.follower_fetched(replica_id, fetch_offset, now_ms)
        if change is not None:
            self.isr_change_listener(partition, change)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The replica fetchers and the ISR expiration, every half replica.lag.time.max.ms."""
        async with trio.open_nursery() as nursery:
            self.fetchers.nursery = nursery
            self.log_dir_movers.nursery = nursery
            self._resume_log_dir_moves()
            task_status.started()
            while True:
                await trio.sleep(self._config.get_int("replica.lag.time.max.ms") / 2000)
                self.maybe_shrink_isrs(wall_clock_ms())

    # -- moving replicas between log directories (AlterReplicaLogDirs)
    def alter_replica_log_dirs(self, partition_dirs: Mapping[tuple[str, int], str],
                               known: Callable[[str, int], bool]) -> dict[tuple[str, int], int]:
        """Move each partition's replica to the log directory given (an absolute path), as Kafka's
        ReplicaManager.alterReplicaLogDirs: INVALID_TOPIC_EXCEPTION when the future directory's
        name would pass 255 bytes, LOG_DIR_NOT_FOUND for a directory not in log.dirs,
        KAFKA_STORAGE_ERROR for an offline one or an offline partition. A move to another
        directory cancels the one under way. A partition not hosted here gets the directory as
        its preferred one, for when it is created, and REPLICA_NOT_AVAILABLE (`known`: its topic
        has it) or UNKNOWN_TOPIC_OR_PARTITION."""
        logs = self._logs
        errors: dict[tuple[str, int], int] = {}
        for (topic, index), destination in partition_dirs.items():
            try:
                if len(future_dir_name(topic, index).encode()) > 255:
                    errors[(topic, index)] = ErrorCode.INVALID_TOPIC_EXCEPTION
                    continue
                if not logs.is_log_dir_online(destination):
                    raise KafkaStorageException(f"Log directory {destination} is offline")
                log_dir = logs.log_dir_named(destination)
                partition = self.partitions.get((topic, index))
                if partition is not None:
                    if partition.is_offline:
                        raise KafkaStorageException(f"Partition {topic}-{index} is offline")
                    future = logs.get_future_log(topic, index)
                    if future is not None and future.dir.parent != log_dir:
                        self.log_dir_movers.stop(topic, index)
                        logs.delete_future_log(topic, index)
                logs.maybe_update_preferred_log_dir(topic, index, log_dir)
                if partition is None:
                    errors[(topic, index)] = (ErrorCode.REPLICA_NOT_AVAILABLE if known(topic, index)
                                              else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    continue
                if partition.log.dir.parent != log_dir and logs.get_future_log(topic, index) is None:
                    topic_id = None if partition.topic.topic_id == ZERO_UUID else partition.topic.topic_id
                    logs.create_future_log(topic, index, log_dir, topic_id)
                    self.log_dir_movers.start(partition)
                errors[(topic, index)] = ErrorCode.NONE
            except StorageError as e:
                log.warning("Unable to alter log dirs for %s-%d: %s", topic, index, e)
                errors[(topic, index)] = e.error_code
        return errors

    def _resume_log_dir_moves(self) -> None:
        """The future logs startup found: the moves of hosted partitions resume. A single broker's
        other ones belong to deleted topics and go; in a cluster they wait for the controller's
        LeaderAndIsr (which resumes them) or StopReplica (which deletes them)."""
        for future in self._logs.future_logs():
            key = (future.topic, future.partition)
            partition = self.partitions.get(key)
            if partition is not None:
                self.log_dir_movers.start(partition)
            elif self.high_watermark_follows_log_end:
                log.info("Deleting the future log of %s-%d: no such partition", *key)
                self._logs.delete_future_log(*key)

    def wake_all(self) -> None:
        for partition in self.partitions.values():
            partition.wake()
