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
from its end. Deviation: the fetched log is kept in memory, not written to the metadata log dir:
each start fetches it again from the quorum.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...storage.cluster_metadata import MetadataReplay
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class
from ...wire.records import iter_batch_headers

log = logging.getLogger("samsa.kraft.quorum")

METADATA_TOPIC = "__cluster_metadata"  # Kafka's Topic.CLUSTER_METADATA_TOPIC_NAME
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID ("AAAAAAAAAAAAAAAAAAAAAQ")
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


class QuorumObserver:
    """`run` fetches for as long as the broker runs; `on_commit(replay, offset)` is called after
    each batch of committed records replayed (offset: the last one's), in the event loop."""

    def __init__(self, config, cluster_id: str, node_id: int, directory_id: uuid.UUID,
                 on_commit: Callable[[MetadataReplay, int], None]) -> None:
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
        task_status.started()
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
                self._truncate(partition.diverging_epoch.end_offset, partition.diverging_epoch.epoch)
                continue
            self._append(partition.records)
            self._commit(partition.high_watermark)

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
        if not records:
            return
        data = bytes(records)
        for pos, header in iter_batch_headers(data):
            if header.next_offset <= self.fetch_offset:
                continue
            self._pending.append(_Batch(header.base_offset, header.next_offset, header.partition_leader_epoch,
                                        data[pos:pos + header.size]))
            self.fetch_offset = header.next_offset
            self.last_fetched_epoch = header.partition_leader_epoch

    def _truncate(self, end_offset: int, epoch: int) -> None:
        """The leader's log diverges from what was fetched at `end_offset`: what is kept aside from
        there on goes (committed records never diverge)."""
        log.info("[RaftClient id=%d] Truncating the fetched metadata log to offset %d (epoch %d)", self._node_id,
                 end_offset, epoch)
        self._pending = [b for b in self._pending if b.next_offset <= end_offset]
        self.fetch_offset = max(min(end_offset, self.fetch_offset), self.applied_offset + 1)
        self.last_fetched_epoch = self._pending[-1].epoch if self._pending else epoch

    def _commit(self, high_watermark: int) -> None:
        """Replay the batches the high watermark passed, then tell the broker."""
        self.high_watermark = max(self.high_watermark, high_watermark)
        committed = 0
        for batch in self._pending:
            if batch.next_offset > self.high_watermark:
                break
            self.replay.batches(batch.data)
            self.applied_offset = batch.next_offset - 1
            committed += 1
        if committed:
            del self._pending[:committed]
            self._on_commit(self.replay, self.applied_offset)

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
        replay = MetadataReplay()
        replay.batches(b"".join(chunks))
        self.replay = replay
        self._pending.clear()
        self.fetch_offset = end_offset
        self.last_fetched_epoch = epoch
        self.high_watermark = max(self.high_watermark, end_offset)
        self.applied_offset = end_offset - 1
        self._on_commit(self.replay, self.applied_offset)
