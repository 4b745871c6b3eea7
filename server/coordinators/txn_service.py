"""Runs the transaction coordinator for the broker: requests in with the clock, actions carried out.

The coordinator (coordinator/transaction_coordinator.py) is sans-I/O; this is its shell. A handler
calls `call(lambda now_ms, ticket: coordinator.end_transaction(now_ms, ticket, ...))` and gets the
coordinator's response once the records it asked for are written to `__transaction_state`
(created on first need, compacted, uncompressed) and flushed as the log's flush policy says. The
transaction markers it asks for are written here, to the local partitions, through the same path
as WriteTxnMarkers (server/coordinators/txn_markers.py). A task in the broker's nursery wakes the coordinator
at its deadlines (timed-out transactions, expired transactional ids, retries).

At startup every partition of `__transaction_state` is replayed before the broker accepts
connections, and transactions found preparing get their markers written. Transactional appends
are checked here against the transaction they claim (Kafka's transaction verification, KIP-890).

In a ZooKeeper cluster the broker coordinates the transactional ids of the `__transaction_state`
partitions it leads, each partition with its own coordinator whose coordinator epoch is the
partition's leader epoch, loaded in the background when the controller makes it leader and
unloaded when it follows or stops the partition (Kafka 3.9's TransactionCoordinator.onElection and
onResignation, TransactionStateManager.loadTransactionsForTxnTopicPartition). Writes there, the
markers included, wait for the ISR (acks=all, up to request.timeout.ms) at that epoch.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ...coordinator.group_coordinator import OFFSETS_TOPIC, partition_for
from ...coordinator.transaction_coordinator import (
    TRANSACTION_STATE_TOPIC, TransactionConfig, TransactionCoordinator, TxnActions,
)
from ...coordinator.transaction_metadata import TV_2
from ...wire.coordinator_record import RecordFormatError
from ...wire.errors import ErrorCode
from ...storage.errors import InvalidProducerEpochException
from ...storage.producer_state import SENTINEL_GUARD
from ...wire.records import NO_SEQUENCE, BatchHeader
from .runtime import (
    CoordinatorPartitions, DeadlineWaker, append_records, create_internal_topic, log_batches,
    replay_topic,
)
from .txn_marker_channel import TxnMarkerChannel
from .txn_markers import CompleteOffsets, await_markers_replicated, write_txn_markers

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from ..metadata.cache import MetadataView
    from ..replication.replica_manager import ReplicaManager
    from .txn_marker_channel import ClusterState

    class TxnCluster(MetadataView, ClusterState, Protocol):
        """What the service reads of a ZooKeeper cluster's metadata: the topics (the partition
        count of __transaction_state), and the partitions' leaders for its marker channel."""

log = logging.getLogger("samsa.txn_service")

# Verification errors a producer of Produce v10 and older cannot act on: it retries what
# NOT_ENOUGH_REPLICAS tells it to (Kafka's ReplicaManager).
_RETRY_AS_NOT_ENOUGH_REPLICAS = (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                 ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                 ErrorCode.NETWORK_EXCEPTION)
LAST_PRODUCE_VERSION_WITHOUT_TRANSACTION_ABORTABLE = 10
# Produce v12+: the partition leader adds the partition to a version 2 transaction (ADD_PARTITION);
# TxnOffsetCommit v5+ the group's partition of __consumer_offsets.
FIRST_PRODUCE_VERSION_ADDING_PARTITIONS = 12
FIRST_TXN_OFFSET_COMMIT_VERSION_ADDING_PARTITIONS = 5


class TxnService:
    def __init__(self, config: KafkaConfig, metadata: MetadataView, replicas: ReplicaManager,
                 disk_limiter: trio.CapacityLimiter, generate_producer_id: Callable[[], int],
                 complete_offsets: CompleteOffsets, clock: Callable[[], int],
                 cluster: TxnCluster | None = None, transaction_version_level: int = 2) -> None:
        """`replicas`: where `__transaction_state` and the transactions' partitions are;
        `disk_limiter`: fsyncs take turns with the broker's; `generate_producer_id()`: the producer
        id manager's; `complete_offsets`: the group service's complete_transaction, told of markers
        written to `__consumer_offsets`; `clock()`: ms since the epoch; `cluster`: in a ZooKeeper
        cluster, the controller's metadata; `transaction_version_level`: the finalized
        transaction.version (that of the coordinator's own aborts)."""
        self._config = config
        self._metadata = metadata
        self._replicas = replicas
        self._disk_limiter = disk_limiter
        self._generate_producer_id = generate_producer_id
        self._complete_offsets = complete_offsets
        self._clock = clock
        self.transaction_version_level = transaction_version_level
        self.coordinator: TransactionCoordinator | None = None
        self._tickets = itertools.count()
        self._waker = DeadlineWaker("transaction coordinator", clock)
        self._cluster = cluster
        self.partitions: CoordinatorPartitions[TransactionCoordinator] | None = None if cluster is None else \
            CoordinatorPartitions(TRANSACTION_STATE_TOPIC, self._refusing, self._load_partition, self._apply,
                                  self._unload_partition)
        self.marker_channel: TxnMarkerChannel | None = None if cluster is None else TxnMarkerChannel(cluster, config)

    # --- configuration ------------------------------------------------------------------------------

    def _coordinator_config(self) -> TransactionConfig:
        get_int = self._config.get_int
        return TransactionConfig(
            transactional_id_expiration_ms=get_int("transactional.id.expiration.ms"),
            transaction_max_timeout_ms=get_int("transaction.max.timeout.ms"),
            transaction_state_log_num_partitions=self.num_partitions(),
            abort_timed_out_transaction_cleanup_interval_ms=get_int(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_transaction_cleanup_interval_ms=get_int(
                "transaction.remove.expired.transaction.cleanup.interval.ms"),
            transaction_version_level=self.transaction_version_level,
        )

    def num_partitions(self) -> int:
        """The topic's real partition count wins: transactional ids must map where their records are."""
        topics = (self._metadata if self._cluster is None else self._cluster).topics
        topic = topics.get(TRANSACTION_STATE_TOPIC)
        return topic.num_partitions if topic else self._config.get_int("transaction.state.log.num.partitions")

    def transaction_version_changed(self, level: int) -> None:
        """The finalized transaction.version moved: the coordinators made from now on and those
        running take it."""
        self.transaction_version_level = level
        for coordinator in self.coordinators():
            coordinator.transaction_version_changed(level)

    def coordinator_for(self, transactional_id: str) -> TransactionCoordinator:
        """The coordinator of the transactional id: in a cluster, its partition's, or one that
        refuses (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS)."""
        if self.partitions is None:
            return self._local_coordinator()
        return self.partitions.get(partition_for(transactional_id, self.num_partitions()))

    def _local_coordinator(self) -> TransactionCoordinator:
        """A single broker's coordinator, made by `run` before the broker takes requests."""
        if self.coordinator is None:
            raise RuntimeError("the transaction coordinator is not running")
        return self.coordinator

    def _cluster_partitions(self) -> CoordinatorPartitions[TransactionCoordinator]:
        """A cluster's coordinators by partition (leadership changes come from its controller)."""
        if self.partitions is None:
            raise RuntimeError("a single broker's transaction coordinator has no partitions")
        return self.partitions

    def coordinators(self) -> list[TransactionCoordinator]:
        if self.partitions is not None:
            return list(self.partitions.owned.values())
        return [] if self.coordinator is None else [self.coordinator]

    def ensure_transaction_topic(self) -> None:
        """Create `__transaction_state` the way Kafka's coordinator asks for it, if it is missing (a
        single broker; a cluster's is created through ZooKeeper, server/zookeeper/admin_manager.py)."""
        if TRANSACTION_STATE_TOPIC in self._metadata.topics or self.coordinator is None or self._cluster is not None:
            return
        create_internal_topic(self._replicas, self._config, TRANSACTION_STATE_TOPIC,
                              self.coordinator.config.transaction_state_log_num_partitions,
                              "transaction.state.log.replication.factor", {
                                  "cleanup.policy": "compact",
                                  "segment.bytes": str(self._config.get("transaction.state.log.segment.bytes")),
                                  "compression.type": "uncompressed",
                              })

    def cluster_topic_configs(self) -> dict[str, str]:
        """Kafka 3.9's transactionTopicConfigs: what a cluster's `__transaction_state` is created with."""
        return {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(self._config.get("transaction.state.log.min.isr")),
            "segment.bytes": str(self._config.get("transaction.state.log.segment.bytes")),
        }

    # --- lifecycle ------------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if self.partitions is not None:
            await self._run_in_cluster(self.partitions, task_status)
            return
        coordinator = self.coordinator = self._new_coordinator()
        loaded = await trio.to_thread.run_sync(self._load, coordinator)
        task_status.started()
        try:
            await self._apply(coordinator, loaded)
            await self._waker.run(coordinator.next_deadline, self._fire_timers)
        finally:
            coordinator.unload()

    async def _run_in_cluster(self, partitions: CoordinatorPartitions[TransactionCoordinator], task_status) -> None:
        """Partitions are loaded as the controller makes this broker their leader (`on_leadership_change`)."""
        async with trio.open_nursery() as nursery:
            partitions.nursery = nursery
            task_status.started()
            try:
                await self._waker.run(self._next_deadline, self._fire_timers)
            finally:
                partitions.stop()
                if self.marker_channel is not None:  # made with the partitions
                    await self.marker_channel.aclose()

    def _new_coordinator(self, coordinator_epoch: int = 0) -> TransactionCoordinator:
        return TransactionCoordinator(self._coordinator_config(), self._generate_producer_id, self._clock(),
                                      coordinator_epoch)

    def _refusing(self, error: ErrorCode) -> TransactionCoordinator:
        coordinator = self._new_coordinator()
        coordinator.inactive_error = error
        return coordinator

    def _load(self, coordinator: TransactionCoordinator) -> TxnActions:
        """Replay every record of `__transaction_state` (in a thread, before requests arrive)."""
        replay_topic(self._metadata, self._replicas, TRANSACTION_STATE_TOPIC, partial(self._replay_batch, coordinator))
        return coordinator.load_complete(self._clock())

    def _load_partition(self, index: int, epoch: int) -> tuple[TransactionCoordinator, TxnActions]:
        """One partition's transactional ids, replayed into a coordinator of their own whose
        coordinator epoch is the partition's leader epoch (in a thread)."""
        coordinator = self._new_coordinator(epoch)
        partition = self._replicas.get(TRANSACTION_STATE_TOPIC, index)
        if partition is None:  # as Kafka's loadTransactionMetadata: nothing to load, the partition is owned
            log.warning("Attempted to load transaction metadata from %s-%d, but found no log", TRANSACTION_STATE_TOPIC,
                        index)
        else:
            count = sum(self._replay_batch(coordinator, partition, header, records)
                        for header, records in log_batches(partition.log))
            log.info("Replayed %d records of %s-%d for coordinator epoch %d", count, TRANSACTION_STATE_TOPIC, index,
                     epoch)
        return coordinator, coordinator.load_complete(self._clock())

    @staticmethod
    def _unload_partition(coordinator: TransactionCoordinator) -> None:
        coordinator.unload()

    def on_leadership_change(self, led: list[tuple[int, int]], resigned: list[tuple[int, int]]) -> None:
        """(partition, leader epoch) of `__transaction_state` partitions this broker now leads, and
        of those it no longer leads. A partition still loaded here takes the new epoch as its
        coordinator epoch."""
        partitions = self._cluster_partitions()
        partitions.on_leadership_change(led, resigned)
        for index, _ in led:
            # The partition's epoch now: a stale election (an epoch not above the known one) left it as it was.
            coordinator, epoch = partitions.owned.get(index), partitions.epoch(index)
            if coordinator is not None and epoch is not None:
                coordinator.coordinator_epoch = epoch
        self._waker.poke()

    def _next_deadline(self) -> int | None:
        return min((d for c in self.coordinators() if (d := c.next_deadline()) is not None), default=None)

    @staticmethod
    def _replay_batch(coordinator: TransactionCoordinator, partition, header, records) -> int:
        replayed = 0
        if header.is_control:
            return replayed
        for record in records:
            try:
                coordinator.replay(bytes(record.key or b""), None if record.value is None else bytes(record.value))
                replayed += 1
            except RecordFormatError as e:
                log.warning("Skipping a record of %s: %s", partition.name, e)
        return replayed

    async def _fire_timers(self, now_ms: int) -> None:
        for coordinator in self.coordinators():
            deadline = coordinator.next_deadline()
            if deadline is not None and deadline <= now_ms:
                await self._apply(coordinator, coordinator.on_timer(now_ms))

    # --- requests ---------------------------------------------------------------------------------------

    async def call(self, transactional_id: str,
                   operation: Callable[[TransactionCoordinator, int, int], TxnActions]) -> Any:
        """Run `operation(coordinator, now_ms, ticket)` on the coordinator of `transactional_id`; its
        response to the ticket, once every write it caused is done. The coordinator answers every
        request within its actions."""
        self.ensure_transaction_topic()
        coordinator = self.coordinator_for(transactional_id)
        ticket = next(self._tickets)
        responses = await self._apply(coordinator, operation(coordinator, self._clock(), ticket))
        return responses[ticket]

    def list_transactions(self, now_ms: int, state_filters, producer_id_filters, duration_filter_ms: int):
        """ListTransactions over every coordinator here (COORDINATOR_LOAD_IN_PROGRESS while a
        partition loads, as Kafka's TransactionStateManager.listTransactionStates)."""
        if self.partitions is not None and self.partitions.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        error, unknown, found = ErrorCode.NONE, [], []
        for coordinator in self.coordinators():
            error, unknown, listed = coordinator.list_transactions(now_ms, state_filters, producer_id_filters,
                                                                   duration_filter_ms)
            found += listed
        return error, unknown, found

    async def _apply(self, coordinator: TransactionCoordinator, actions: TxnActions) -> dict[Any, Any]:
        responses: dict[Any, Any] = {}
        queue = [actions]
        to_flush = []
        epoch = None if self.partitions is None else coordinator.coordinator_epoch
        timeout_ms = self._config.get_int("request.timeout.ms")
        while queue:
            actions = queue.pop(0)
            responses.update(actions.responses)
            for append in actions.appends:
                error, log_ = await append_records(self._replicas, TRANSACTION_STATE_TOPIC, append.partition,
                                                   append.records, leader_epoch=epoch, timeout_ms=timeout_ms)
                to_flush.append(log_)
                queue.append(coordinator.complete_append(append, error, self._clock()))
            for marker in actions.markers:
                errors, logs = await self._write_markers(marker, timeout_ms)
                to_flush += logs
                queue.append(coordinator.complete_markers(marker, errors, self._clock()))
        for log_ in dict.fromkeys(filter(None, to_flush)):
            # flush.messages reached or a segment rolled: fsync before anyone hears of the write.
            await trio.to_thread.run_sync(log_.flush, limiter=self._disk_limiter)
        self._waker.poke()
        return responses

    async def _write_markers(self, marker, timeout_ms: int) -> tuple[dict[tuple[str, int], int], list[Any]]:
        """A marker's partitions: those led here written locally, in a cluster those led elsewhere
        sent to their leaders. (error code by partition, logs to flush)."""
        channel = self.marker_channel
        remote = [] if channel is None else [tp for tp in marker.partitions if channel.led_elsewhere(tp)]
        local = [tp for tp in marker.partitions if tp not in remote]
        errors, logs = write_txn_markers(self._replicas, self._complete_offsets, marker.producer_id,
                                         marker.producer_epoch, marker.commit, marker.coordinator_epoch, local,
                                         marker.transaction_version)
        if channel is not None:
            await await_markers_replicated(self._replicas, errors, timeout_ms)
            if remote:
                errors.update(await channel.write(marker.producer_id, marker.producer_epoch, marker.commit,
                                                  marker.coordinator_epoch, remote))
        return errors, logs

    # --- transactional appends ------------------------------------------------------------------------------

    def verifies(self, transactional_id: str) -> bool:
        """transaction.partition.verification.enable, for the transactional ids coordinated here: in a
        cluster Kafka asks another broker's coordinator (AddPartitionsToTxn, verify only), which
        Samsa does not yet, and appends unverified. When true, a transactional append must bring
        back the verification guard its partition gave it (storage's producer state)."""
        if not self._config.get("transaction.partition.verification.enable"):
            return False
        return self.partitions is None or partition_for(transactional_id, self.num_partitions()) in self.partitions.owned

    def verify_append(self, transactional_id: str | None, header: BatchHeader, topic: str, partition: int,
                      produce_version: int) -> tuple[int, str | None] | None:
        """None when a transactional batch may be appended: its partition is in its producer's open
        transaction. Otherwise the Produce error (and message) Kafka's ReplicaManager answers.
        Without a transactional id, or with transaction.partition.verification.enable off, Kafka
        appends unverified, and so does this."""
        if transactional_id is None or not self.verifies(transactional_id):
            return None
        error = self.coordinator_for(transactional_id).verify_partitions(
            transactional_id, header.producer_id, header.producer_epoch, [(topic, partition)])[(topic, partition)]
        if error == ErrorCode.NONE:
            return None
        return produce_verification_error(error, produce_version)

    async def add_for_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Produce v12+ and TxnOffsetCommit v5+ (transaction version 2): the partitions added to the
        producer's transaction by its coordinator (Kafka's AddPartitionsToTxnManager with
        verifyOnly false); the error of each (all share it)."""
        error = await self.call(transactional_id, lambda coordinator, now_ms, ticket: coordinator.add_partitions(
            now_ms, ticket, transactional_id, producer_id, producer_epoch, partitions, TV_2))
        return dict.fromkeys(partitions, error)

    async def verify_offsets_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                       partition: int, txn_offset_commit_version: int) -> tuple[int, int | None]:
        """TxnOffsetCommit's check that AddOffsetsToTxn put the group's partition in the transaction;
        from v5 (transaction version 2, which sends no AddOffsetsToTxn) the partition is added to it
        (Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation). As for a Produce, the
        offsets partition first makes the producer's verification (Kafka's
        CoordinatorPartitionWriter.maybeStartTransactionVerification): an epoch older than the
        partition's is refused there, and a transaction already open there asks no coordinator.
        Returns the error code and the verification guard the offsets' write is to bring back (None
        when nothing was verified on the partition)."""
        tp = (OFFSETS_TOPIC, partition)
        adds = txn_offset_commit_version >= FIRST_TXN_OFFSET_COMMIT_VERSION_ADDING_PARTITIONS
        offsets = self._replicas.get(OFFSETS_TOPIC, partition)
        guard = None
        if (adds or self.verifies(transactional_id)) and offsets is not None and offsets.is_leader:
            try:
                guard = offsets.log.maybe_start_transaction_verification(producer_id, NO_SEQUENCE, producer_epoch,
                                                                         supports_epoch_bump=adds)
            except InvalidProducerEpochException:
                return ErrorCode.INVALID_PRODUCER_EPOCH, None
            if guard == SENTINEL_GUARD:
                return ErrorCode.NONE, guard
        if adds:
            error = (await self.add_for_produce(transactional_id, producer_id, producer_epoch, [tp]))[tp]
        elif not self.verifies(transactional_id):
            return ErrorCode.NONE, None
        else:
            error = self.coordinator_for(transactional_id).verify_partitions(transactional_id, producer_id,
                                                                              producer_epoch, [tp])[tp]
        if error == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if error == ErrorCode.TRANSACTION_ABORTABLE and txn_offset_commit_version < 4:
            return ErrorCode.INVALID_TXN_STATE, None
        return error, guard


def error_for_version(error: int, api_version: int, producer_fenced_since: int) -> int:
    """PRODUCER_FENCED is INVALID_PRODUCER_EPOCH to clients of versions before it existed (KIP-588)."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if error == ErrorCode.PRODUCER_FENCED and api_version < producer_fenced_since \
        else error


def produce_verification_error(error: int, produce_version: int) -> tuple[int, str | None]:
    """Kafka's AddPartitionsToTxnManager and ReplicaManager: what a producer hears when the
    coordinator did not vouch for its batch."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, None
    if error == ErrorCode.TRANSACTION_ABORTABLE and produce_version <= LAST_PRODUCE_VERSION_WITHOUT_TRANSACTION_ABORTABLE:
        error = ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error == ErrorCode.CONCURRENT_TRANSACTIONS and produce_version >= FIRST_PRODUCE_VERSION_ADDING_PARTITIONS:
        return error, None  # a producer of transaction version 2 retries it
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS, (f"Unable to verify the partition has been added to the transaction. "
                                               f"Underlying error: {ErrorCode(error).name}")
    return error, None
