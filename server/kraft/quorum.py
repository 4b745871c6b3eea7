"""The metadata log, fetched from the controller quorum as an observer (Kafka's KafkaRaftClient in a
broker: a replica that is not a voter).

The observer sends Raft Fetch requests for `__cluster_metadata` partition 0 (the metadata topic's id,
Kafka's Uuid.METADATA_TOPIC_ID) with its node id as the replica id, to the quorum's leader: at first
to a bootstrap server (controller.quorum.bootstrap.servers) or a voter (controller.quorum.voters);
an answer from a node that does not lead (NOT_LEADER_OR_FOLLOWER), or about another epoch
(FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), names the current leader and epoch, and from Fetch
v16 where it listens (`node_endpoints`). The leader of the metadata log is the active controller:
the lifecycle's requests go there too (controller_channel.py).

Records past the high watermark are kept aside until it passes them: only committed batches are
replayed (Kafka's RaftClient.Listener.handleCommit), through the same replay that imports Kafka's
metadata log from disk (storage/cluster_metadata.py's MetadataReplay). A diverging epoch truncates
what is kept aside; a fetch below the log start is answered with a snapshot id, and the observer
fetches that snapshot (FetchSnapshot, key 59) and replays it into a new image before fetching on
from its end.

What is fetched is kept on disk as Kafka's brokers keep it (storage/metadata_log.py: segments,
snapshots and quorum-state in `<metadata.log.dir>/__cluster_metadata-0`): appended as fetched, cut
where the leader's log diverges, replaced by a fetched snapshot. At start the observer loads its
latest snapshot and the log after it, and fetches from its log end: only what it lacks. As Kafka's
observer it does not fsync each append (only voters must); a rolled segment, each snapshot and
quorum-state are fsynced, and the log is flushed at shutdown. Like Kafka's broker
(SnapshotGenerator) it snapshots its image once metadata.log.max.record.bytes.between.snapshots
bytes of records were committed since the last one, or metadata.log.max.snapshot.interval.ms passed
with any; then snapshots and segments beyond metadata.max.retention.bytes/ms go.

Nothing is replayed past the snapshot until a Fetch answer gives the high watermark (as Kafka's
MetadataLoader waits to catch up before publishing): the records on disk past it may not be
committed.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...storage.cluster_metadata import MetadataReplay
from ...storage.metadata_log import METADATA_TOPIC_ID, MetadataLog, MetadataLogConfig, QuorumState, SnapshotId
from ...storage.metadata_snapshot import build_snapshot
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class
from ...wire.records import iter_batch_headers

log = logging.getLogger("samsa.kraft.quorum")

METADATA_TOPIC = "__cluster_metadata"  # Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME
FETCH_VERSION = 17  # Kafka 4.4's KRaft uses the latest its peers support; 17 has replica_state and endpoints
FETCH_SNAPSHOT_VERSION = 1
FETCH_MAX_WAIT_MS = 500  # Kafka's KafkaRaftClient.fetchMaxWaitMs
MAX_RECONNECT_BACKOFF_MS = 1000  # Kafka's reconnect.backoff.max.ms default
FetchRequest = request_class(ApiKey.FETCH)
FetchSnapshotRequest = request_class(ApiKey.FETCH_SNAPSHOT)
_LEADER_MOVED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH)


@dataclass
class _Batch:
    base_offset: int
    next_offset: int
    epoch: int
    data: bytes
    max_timestamp: int = -1


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class QuorumObserver:
    """`run` fetches for as long as the broker runs; `on_commit(replay, offset)` is called after
    each batch of committed records replayed (offset: the last one's), in the event loop."""

    def __init__(self, config, cluster_id: str, node_id: int, directory_id: uuid.UUID,
                 on_commit: Callable[[MetadataReplay, int], None], metadata_log_dir: Path | None = None) -> None:
        """`metadata_log_dir`: where the metadata log is kept (metadata.log.dir, else the first log
        dir); None keeps it in memory only (tests of the fetch handling)."""
        self._cluster_id = cluster_id
        self._node_id = node_id
        self._directory_id = directory_id
        self._on_commit = on_commit
        self._voters: dict[int, tuple[str, int]] = dict(config.quorum_voters)
        self._bootstrap = list(config.quorum_bootstrap_servers) or list(self._voters.values())
        self._timeout_ms = config.get_int("controller.quorum.request.timeout.ms")
        self._retry_backoff_ms = config.get_int("controller.quorum.retry.backoff.ms")
        self._fetch_max_bytes = config.get_int("controller.quorum.fetch.max.bytes")
        self._snapshot_max_bytes = config.get_int("controller.quorum.fetch.snapshot.max.bytes")
        self.replay = MetadataReplay()
        self.leader_id: int | None = None
        self.leader_epoch = -1
        self._endpoints: dict[int, tuple[str, int]] = dict(self._voters)  # node id -> controller listener
        self.fetch_offset = 0  # the next offset to fetch
        self.last_fetched_epoch = 0
        self.high_watermark = 0
        self.applied_offset = -1  # the last committed offset replayed
        self._pending: list[_Batch] = []  # fetched, not yet committed
        self._leader_changed = trio.Event()  # set, and replaced, when the leader or its endpoint changes
        self._metadata_log_dir = metadata_log_dir
        self._metadata_log_config = MetadataLogConfig.from_broker_config(config)
        self.metadata_log: MetadataLog | None = None  # open while run() runs
        self._static_voters = sorted(self._voters) if self._voters else None  # kraft.version 0: quorum-state v0
        self._quorum_state_written = QuorumState()
        self._published = False  # nothing published yet: the first high watermark publishes what is loaded
        self._applied_epoch = 0  # the leader epoch of the last batch replayed
        self._applied_timestamp = -1  # and its max timestamp (a snapshot's last contained log timestamp)
        self._snapshot_max_bytes = config.get_int("metadata.log.max.record.bytes.between.snapshots")
        self._snapshot_interval_ms = config.get_int("metadata.log.max.snapshot.interval.ms")
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = _monotonic_ms()

    # --- what the broker reads --------------------------------------------------------------------

    @property
    def leader_endpoint(self) -> tuple[int, str, int] | None:
        """The quorum leader (the active controller): (node id, host, port), None while unknown."""
        if self.leader_id is None or self.leader_id not in self._endpoints:
            return None
        return self.leader_id, *self._endpoints[self.leader_id]

    def controller_endpoint(self, listener: str) -> tuple[str, int] | None:
        """Where the active controller listens (its controller listener, whatever `listener`): the
        AlterPartition manager's ControllerLocator."""
        leader = self.leader_endpoint
        return None if leader is None else (leader[1], leader[2])

    async def wait_leader_changed(self) -> None:
        await self._leader_changed.wait()

    def leader_unreachable(self, node_id: int) -> None:
        """A request to the leader failed: find it again through the quorum (the next fetch asks
        the bootstrap servers if the leader is still not answering)."""
        if self.leader_id == node_id:
            self._set_leader(None, self.leader_epoch)

    # --- fetching ----------------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        if self._metadata_log_dir is not None:
            await trio.to_thread.run_sync(self.load, self._metadata_log_dir)
        try:
            task_status.started()
            await self._fetch_forever()
        finally:
            if self.metadata_log is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.metadata_log.close)

    def load(self, metadata_log_dir: Path) -> None:
        """Open the metadata log on disk (in a worker thread): its latest snapshot replayed (not yet
        published), the batches after it kept aside until a high watermark commits them, the
        fetch position at its end, the leader epoch from quorum-state."""
        metadata_log = MetadataLog.in_log_dir(metadata_log_dir, self._metadata_log_config, _wall_clock_ms)
        self.metadata_log = metadata_log
        state = metadata_log.read_quorum_state()
        self._quorum_state_written = state
        if state.leader_epoch > self.leader_epoch:
            self.leader_epoch = state.leader_epoch
            self.leader_id = state.leader_id if state.leader_id >= 0 else None
        start = metadata_log.start_offset
        snapshot = metadata_log.latest_snapshot
        if snapshot is not None:
            self._load_snapshot(snapshot, metadata_log.read_snapshot(snapshot))
            start = snapshot.end_offset
        self._read_pending(start)
        log.info("[RaftClient id=%d] Loaded the metadata log from %s: %s, log %d to %d (epoch %d), leader epoch %d",
                 self._node_id, metadata_log.dir, f"snapshot {snapshot.end_offset}-{snapshot.epoch}" if snapshot
                 else "no snapshot", metadata_log.start_offset, self.fetch_offset, self.last_fetched_epoch,
                 self.leader_epoch)

    def _read_pending(self, start: int) -> None:
        """The batches of the log on disk from `start` on kept aside (until committed), and the
        fetch position at the log's end."""
        assert self.metadata_log is not None
        self._pending = []
        data = self.metadata_log.read(start)
        for pos, header in iter_batch_headers(data):
            if header.next_offset > start:
                self._pending.append(_Batch(header.base_offset, header.next_offset, header.partition_leader_epoch,
                                            data[pos:pos + header.size], header.max_timestamp))
        self.fetch_offset = self.metadata_log.end_offset
        self.last_fetched_epoch = self.metadata_log.last_fetched_epoch

    def _load_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        replay = MetadataReplay()
        replay.batches(data)
        replay.image.end_offset = snapshot.end_offset
        self.replay = replay
        self.applied_offset = snapshot.end_offset - 1
        self._applied_epoch = snapshot.epoch
        self.high_watermark = max(self.high_watermark, snapshot.end_offset)

    async def _fetch_forever(self) -> None:
        failures = 0  # connection attempts failed in a row: the backoff doubles, as reconnect.backoff.ms's
        while True:
            target = self._target()
            try:
                connection = await BrokerConnection.connect(target[0], target[1], f"raft-observer-{self._node_id}",
                                                            self._timeout_ms)
            except BrokerUnreachable as e:
                (log.info if failures == 0 else log.debug)("[RaftClient id=%d] cannot reach %s:%d: %s",
                                                             self._node_id, *target, e)
                self.leader_unreachable(self.leader_id if self.leader_id is not None else -1)
                await trio.sleep(min(self._retry_backoff_ms * 2 ** failures, MAX_RECONNECT_BACKOFF_MS) / 1000)
                failures += 1
                continue
            failures = 0
            try:
                await self._fetch_from(connection, target)
            except (BrokerUnreachable, CodecError) as e:
                log.info("[RaftClient id=%d] fetching from %s:%d failed: %s", self._node_id, *target, e)
                if self.leader_endpoint is not None and self.leader_endpoint[1:] == target:
                    self.leader_unreachable(self.leader_endpoint[0])
                await trio.sleep(self._retry_backoff_ms / 1000)
            finally:
                with trio.CancelScope(shield=True):
                    await connection.aclose()

    def _target(self) -> tuple[str, int]:
        leader = self.leader_endpoint
        if leader is not None:
            return leader[1], leader[2]
        return random.choice(self._bootstrap)

    async def _fetch_from(self, connection: BrokerConnection, target: tuple[str, int]) -> None:
        """Fetch on this connection until the leader is elsewhere."""
        while True:
            response = await connection.call(self._fetch_request(), FETCH_VERSION)
            self._learn_endpoints(response.node_endpoints)
            if response.error_code != ErrorCode.NONE:
                log.warning("[RaftClient id=%d] Fetch from %s:%d failed: %s", self._node_id, *target,
                            ErrorCode(response.error_code).name)
                await trio.sleep(self._retry_backoff_ms / 1000)
                return
            partition = response.responses[0].partitions[0]
            leader = partition.current_leader
            if leader.leader_id >= 0 and (leader.leader_id != self.leader_id or leader.leader_epoch != self.leader_epoch):
                self._new_epoch(leader.leader_id, leader.leader_epoch)
            if partition.error_code in _LEADER_MOVED:
                if leader.leader_id < 0:  # no leader known yet (an election): ask again
                    await trio.sleep(self._retry_backoff_ms / 1000)
                if self.leader_endpoint is None or self.leader_endpoint[1:] != target:
                    return
                continue
            if partition.error_code != ErrorCode.NONE:
                log.warning("[RaftClient id=%d] Fetch of %s-0 failed: %s", self._node_id, METADATA_TOPIC,
                            ErrorCode(partition.error_code).name)
                await trio.sleep(self._retry_backoff_ms / 1000)
                return
            if partition.snapshot_id.end_offset >= 0 and partition.snapshot_id.epoch >= 0:
                await self._fetch_snapshot(connection, partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
                continue
            if partition.diverging_epoch.epoch >= 0:
                await trio.to_thread.run_sync(self._truncate, partition.diverging_epoch.end_offset,
                                              partition.diverging_epoch.epoch)
                continue
            if partition.records:
                await trio.to_thread.run_sync(self._append, bytes(partition.records))
            self._commit(partition.high_watermark)
            await self._maybe_snapshot()
            await self._maybe_write_quorum_state()

    def _fetch_request(self):
        Topic, Partition = FetchRequest.FetchTopic, FetchRequest.FetchPartition
        return FetchRequest(
            cluster_id=self._cluster_id, replica_state=FetchRequest.ReplicaState(replica_id=self._node_id,
                                                                                 replica_epoch=-1),
            max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=self._fetch_max_bytes,
            topics=[Topic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[Partition(
                partition=0, current_leader_epoch=max(self.leader_epoch, 0), fetch_offset=self.fetch_offset,
                last_fetched_epoch=self.last_fetched_epoch, partition_max_bytes=self._fetch_max_bytes,
                replica_directory_id=self._directory_id)])])

    def _learn_endpoints(self, node_endpoints) -> None:
        changed = False
        for endpoint in node_endpoints or ():
            address = (endpoint.host, endpoint.port)
            if self._endpoints.get(endpoint.node_id) != address:
                self._endpoints[endpoint.node_id] = address
                changed = changed or endpoint.node_id == self.leader_id
        if changed:
            self._leader_changed.set()
            self._leader_changed = trio.Event()

    def _new_epoch(self, leader_id: int, epoch: int) -> None:
        if epoch < self.leader_epoch:
            return
        log.info("[RaftClient id=%d] Completed transition to FollowerState(epoch=%d, leaderId=%d) as an observer",
                 self._node_id, epoch, leader_id)
        self._set_leader(leader_id, epoch)

    def _set_leader(self, leader_id: int | None, epoch: int) -> None:
        self.leader_id, self.leader_epoch = leader_id, epoch
        self._leader_changed.set()
        self._leader_changed = trio.Event()

    def _append(self, records) -> None:
        """Keep the fetched batches (on disk, and aside until committed); in a worker thread."""
        if not records:
            return
        data = bytes(records)
        first = end = None  # the bytes of the batches not already here
        kept = []
        for pos, header in iter_batch_headers(data):
            if header.base_offset < self.fetch_offset:
                continue
            if first is None:
                first = pos
            end = pos + header.size
            kept.append(_Batch(header.base_offset, header.next_offset, header.partition_leader_epoch,
                               data[pos:pos + header.size], header.max_timestamp))
        if first is None:
            return
        if self.metadata_log is not None:
            self.metadata_log.append_as_follower(data[first:end])
            if self.metadata_log.log.flush_due(_wall_clock_ms()):
                self.metadata_log.flush()  # a rolled segment is made durable, as Kafka's roll does
        self._pending.extend(kept)
        self.fetch_offset = kept[-1].next_offset
        self.last_fetched_epoch = kept[-1].epoch

    def _truncate(self, end_offset: int, epoch: int) -> None:
        """The leader's log diverges from what was fetched at `end_offset` (Kafka's
        truncateToEndOffset, in a worker thread): what is kept from there on goes. Committed records
        never diverge: the leader asking to cut below them is answered by cutting above them."""
        if end_offset <= self.applied_offset:
            log.error("[RaftClient id=%d] The leader requested truncation to offset %d, which is below the "
                      "records already committed (to %d)", self._node_id, end_offset, self.applied_offset)
            end_offset = self.applied_offset + 1
        if self.metadata_log is not None:
            truncated = self.metadata_log.truncate_to_end_offset(end_offset, epoch)
            self.fetch_offset = self.metadata_log.end_offset
            self.last_fetched_epoch = self.metadata_log.last_fetched_epoch
            self._pending = [b for b in self._pending if b.next_offset <= self.fetch_offset]
            log.info("[RaftClient id=%d] Truncated to offset %d from Fetch response from leader %s", self._node_id,
                     truncated, self.leader_id)
            return
        log.info("[RaftClient id=%d] Truncating the fetched metadata log to offset %d (epoch %d)", self._node_id,
                 end_offset, epoch)
        self._pending = [b for b in self._pending if b.next_offset <= end_offset]
        self.fetch_offset = max(min(end_offset, self.fetch_offset), self.applied_offset + 1)
        self.last_fetched_epoch = self._pending[-1].epoch if self._pending else epoch

    def _commit(self, high_watermark: int) -> None:
        """Replay the batches the high watermark passed, then tell the broker (also, the first time,
        when only what was loaded from disk is committed)."""
        self.high_watermark = max(self.high_watermark, high_watermark)
        committed = 0
        for batch in self._pending:
            if batch.next_offset > self.high_watermark:
                break
            self.replay.batches(batch.data, self.applied_offset + 1)
            self.applied_offset = batch.next_offset - 1
            self._applied_epoch = batch.epoch
            self._applied_timestamp = batch.max_timestamp
            self._bytes_since_snapshot += len(batch.data)
            committed += 1
        if committed:
            del self._pending[:committed]
        if committed or not self._published and self.applied_offset >= 0:
            self._published = True
            self._on_commit(self.replay, self.applied_offset)

    async def _maybe_snapshot(self) -> None:
        """Kafka's SnapshotGenerator: a snapshot of the image once enough bytes of records were
        committed since the last, or enough time passed with some; then the metadata log's cleaning."""
        if self.metadata_log is None or self._bytes_since_snapshot == 0:
            return
        elapsed = _monotonic_ms() - self._last_snapshot_ms
        timed_out = self._snapshot_interval_ms > 0 and elapsed >= self._snapshot_interval_ms  # 0: never by time
        if self._bytes_since_snapshot < self._snapshot_max_bytes and not timed_out:
            return
        reason = (f"{self._bytes_since_snapshot} bytes of records since the last" if
                  self._bytes_since_snapshot >= self._snapshot_max_bytes else f"{elapsed} ms since the last")
        # In a worker thread; the image changes only in _commit, which waits for it here.
        await trio.to_thread.run_sync(self.write_snapshot, reason)

    def write_snapshot(self, reason: str = "") -> SnapshotId | None:
        """A snapshot of the image as replayed to `applied_offset`; the log cleaned after it."""
        metadata_log = self.metadata_log
        if metadata_log is None or self.applied_offset < 0:
            return None
        snapshot = SnapshotId(self.applied_offset + 1, self._applied_epoch)
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = _monotonic_ms()
        latest = metadata_log.latest_snapshot
        if latest is not None and latest.end_offset >= snapshot.end_offset:
            return None
        data = build_snapshot(self.replay, snapshot.epoch, self._applied_timestamp, _wall_clock_ms())
        metadata_log.write_snapshot(snapshot, data)
        log.info("[SnapshotGenerator id=%d] Created snapshot %020d-%010d (%d bytes)%s", self._node_id,
                 snapshot.end_offset, snapshot.epoch, len(data), f": {reason}" if reason else "")
        metadata_log.maybe_clean()
        return snapshot

    async def _maybe_write_quorum_state(self) -> None:
        """quorum-state follows the leader and epoch this observer follows (Kafka's QuorumState
        writes it at each transition)."""
        if self.metadata_log is None or self.leader_id is None:
            return
        state = QuorumState(self.leader_id, self.leader_epoch)
        if state == self._quorum_state_written:
            return
        await trio.to_thread.run_sync(functools.partial(self.metadata_log.write_quorum_state, state,
                                                        static_voters=self._static_voters))
        self._quorum_state_written = state

    async def _fetch_snapshot(self, connection: BrokerConnection, end_offset: int, epoch: int) -> None:
        """FetchSnapshot until the whole snapshot is here, then replay it into a new image."""
        log.info("[RaftClient id=%d] Fetching snapshot %020d-%010d of %s-0", self._node_id, end_offset, epoch,
                 METADATA_TOPIC)
        Topic, Partition = FetchSnapshotRequest.TopicSnapshot, FetchSnapshotRequest.PartitionSnapshot
        chunks: list[bytes] = []
        position = 0
        while True:
            request = FetchSnapshotRequest(
                cluster_id=self._cluster_id, replica_id=self._node_id, max_bytes=self._snapshot_max_bytes,
                topics=[Topic(name=METADATA_TOPIC, partitions=[Partition(
                    partition=0, current_leader_epoch=self.leader_epoch,
                    snapshot_id=FetchSnapshotRequest.SnapshotId(end_offset=end_offset, epoch=epoch),
                    position=position, replica_directory_id=self._directory_id)])])
            response = await connection.call(request, FETCH_SNAPSHOT_VERSION)
            partition = response.topics[0].partitions[0] if response.topics else None
            code = response.error_code or (partition.error_code if partition is not None else ErrorCode.UNKNOWN_SERVER_ERROR)
            if code != ErrorCode.NONE or partition is None:
                raise BrokerUnreachable(f"FetchSnapshot of {end_offset}-{epoch} failed: {ErrorCode(code).name}")
            chunk = bytes(partition.unaligned_records or b"")
            chunks.append(chunk)
            position += len(chunk)
            if position >= partition.size or not chunk:
                break
        data = b"".join(chunks)
        snapshot = SnapshotId(end_offset, epoch)
        self._load_snapshot(snapshot, data)
        if self.metadata_log is not None:
            # Stored, the log started over at its end (the log on disk past it, if any, kept aside).
            await trio.to_thread.run_sync(self._store_snapshot, snapshot, data)
        else:
            self._pending.clear()
            self.fetch_offset = end_offset
            self.last_fetched_epoch = epoch
        self._bytes_since_snapshot = 0
        self._published = True
        self._on_commit(self.replay, self.applied_offset)

    def _store_snapshot(self, snapshot: SnapshotId, data: bytes) -> None:
        """A fetched snapshot on disk, and the log started over at its end (Kafka's
        truncateToLatestSnapshot after FetchSnapshot); in a worker thread."""
        assert self.metadata_log is not None
        self.metadata_log.write_snapshot(snapshot, data)
        if self.metadata_log.truncate_to_latest_snapshot():
            log.info("[RaftClient id=%d] Fully truncated the log at (%d, %d) after downloading snapshot %020d-%010d",
                     self._node_id, self.metadata_log.end_offset, self.metadata_log.last_fetched_epoch,
                     snapshot.end_offset, snapshot.epoch)
        self._read_pending(snapshot.end_offset)
