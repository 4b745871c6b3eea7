"""The follower side of replication (Kafka's ReplicaFetcherManager, ReplicaFetcherThread and
AbstractFetcherThread): one trio task per leader broker (and fetcher id, `num.replica.fetchers`)
fetches the partitions this broker follows and appends the leader's batches as they are.

A partition starts out truncating (KIP-101, KIP-279): OffsetsForLeaderEpoch asks the leader where
this replica's latest epoch ends there, and the log is cut to what both have; when the epochs
disagree, the next round asks again with the epoch that is left. Then Fetch (replica id set, the
current leader epoch, the last fetched epoch) brings the records; the leader's high watermark
caps this replica's. A diverging epoch in a Fetch answer (KIP-595's check, which Kafka 2.7+
leaders make) sends the partition back to truncating. FENCED_LEADER_EPOCH means this broker's view
is older than the leader's: the partition waits for the controller's next LeaderAndIsr.
"""

from __future__ import annotations

import logging
import math
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from ...client.connection import BrokerConnection
from ...client.errors import BrokerUnreachable
from ...storage.errors import StorageError
from ...storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ...wire.errors import ErrorCode
from ...wire.exceptions import CodecError
from ...wire.protocol import ApiKey, request_class
from .fetch_session_handler import FetchSessionHandler, PartitionFetch

if TYPE_CHECKING:
    from ..config.kafka_config import KafkaConfig
    from .replica_manager import Partition, ReplicaManager

log = logging.getLogger("samsa.replica.fetcher")
FETCH_VERSION = 12  # topic names, replica id in the request body, last fetched epoch, diverging epoch
OFFSET_FOR_LEADER_EPOCH_VERSION = 3  # replica id in the request
Fetch = request_class(ApiKey.FETCH)
OffsetForLeaderEpoch = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
ListOffsets = request_class(ApiKey.LIST_OFFSETS)
LIST_OFFSETS_VERSION = 4  # current leader epoch
EARLIEST_TIMESTAMP = -2
TopicPartition = tuple[str, int]
FULL_CHECK_S = 1.0  # how often a fetcher looks at every partition it fetches, not only those that moved


@dataclass
class PartitionFetchState:
    leader_epoch: int
    truncating: bool = True
    partition: Partition | None = None  # the replica manager's, looked up once (None: look it up)


def truncation_offset(leader_epoch: int, leader_end_offset: int, follower_epoch_end: tuple[int, int],
                      log_end_offset: int, high_watermark: int) -> tuple[int, bool]:
    """Where a follower cuts its log after the leader said its epoch `leader_epoch` ends at
    `leader_end_offset` (Kafka's AbstractFetcherThread.getOffsetTruncationState), and whether that
    settles it. `follower_epoch_end`: the follower's own (epoch, end offset) for `leader_epoch`."""
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return high_watermark, True  # the leader knows no such epoch: keep what was committed
    follower_epoch, follower_end = follower_epoch_end
    if follower_epoch == UNDEFINED_EPOCH:
        # This replica never tracked that epoch: trust the leader's end of it.
        return min(leader_end_offset, log_end_offset), True
    if follower_epoch != leader_epoch:
        # This replica's log has no such epoch; the one below it ends at follower_end: cut there
        # and ask again with the epoch left.
        return min(follower_end, log_end_offset), False
    return min(leader_end_offset, follower_end, log_end_offset), True


class ReplicaFetcherManager:
    def __init__(self, replicas: ReplicaManager, config: KafkaConfig) -> None:
        self._replicas = replicas
        self._config = config
        self.nursery: trio.Nursery | None = None  # the replica manager's, once it runs
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}

    def _fetcher_id(self, key: TopicPartition) -> int:
        return (31 * zlib.crc32(key[0].encode()) + key[1]) % max(1, self._config.get_int("num.replica.fetchers"))

    def add_partition(self, key: TopicPartition, leader_id: int, address: tuple[str, int]) -> None:
        partition = self._replicas.get(*key)
        if partition is None or self.nursery is None:
            return
        fetcher_key = (leader_id, self._fetcher_id(key))
        fetcher = self._fetchers.get(fetcher_key)
        if fetcher is not None and (fetcher.address != address or fetcher.finished):
            # The leader moved to another address: a new connection. Or the fetcher ended, its
            # last partition gone (a fenced leader epoch waits for the next LeaderAndIsr): a new one.
            fetcher.stop()
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(leader_id, fetcher_key[1], address, self._replicas, self._config)
            self._fetchers[fetcher_key] = fetcher
            self.nursery.start_soon(fetcher.run)
        fetcher.add(key, PartitionFetchState(partition.leader_epoch, partition=partition))

    def remove_partition(self, key: TopicPartition) -> None:
        for fetcher_key, fetcher in list(self._fetchers.items()):
            if fetcher.remove(key) and not fetcher.partitions:
                fetcher.stop()
                del self._fetchers[fetcher_key]

    def fetch_state(self, key: TopicPartition) -> PartitionFetchState | None:
        for fetcher in self._fetchers.values():
            state = fetcher.partitions.get(key)
            if state is not None:
                return state
        return None


class ReplicaFetcher:
    def __init__(self, leader_id: int, fetcher_id: int, address: tuple[str, int], replicas: ReplicaManager,
                 config: KafkaConfig) -> None:
        self.leader_id = leader_id
        self.address = address
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._replicas = replicas
        self._config = config
        self._client_id = f"broker-{replicas.local_id}-fetcher-{fetcher_id}"
        self._cancel_scope = trio.CancelScope()
        self.finished = False  # run returned: partitions added now would never be fetched
        self._session = FetchSessionHandler()  # KIP-227: after the first, fetches name what changed
        # What each partition being fetched (not truncating) asks of the leader, and the partitions
        # whose ask may have changed since: added or removed, truncated, or in the last response.
        # Only those are looked at again before a fetch: a follower of fifty quiet partitions (a
        # group coordinator's) and a busy one does not walk the fifty at every fetch. Nothing
        # else changes what a partition asks except its own retention moving its log start offset
        # (which the leader only records), and a failed log dir (whose handler removes the
        # partition): a full look every FULL_CHECK_S catches those.
        self._fetches: dict[TopicPartition, PartitionFetch] = {}
        self._stale: set[TopicPartition] = set()
        # Partitions added or removed while a fetch is in flight: their part of its answer was
        # asked for another state, and is ignored (a set of the few that changed, rather than a
        # copy of every partition's state at each fetch).
        self._replaced: set[TopicPartition] = set()
        self._fetch_request: Any = None  # built once per fetcher: only the session's fields and partitions change
        self._truncating: set[TopicPartition] = set()
        self._next_full_check = -math.inf
        # The connection's calls answered within replica.socket.timeout.ms: one deadline for all of
        # them, moved on before a call once an eighth of the timeout has passed since it was set,
        # rather than a cancel scope per call (trio's costs about 6 us, a fetch round's twentieth).
        # A call is thus given up between 7/8 of the timeout and the timeout after it started.
        self._timeout = math.inf
        self._deadline = trio.CancelScope()

    def add(self, key: TopicPartition, state: PartitionFetchState) -> None:
        self.partitions[key] = state
        self._stale.add(key)
        self._replaced.add(key)
        if state.truncating:
            self._truncating.add(key)

    def remove(self, key: TopicPartition) -> bool:
        """Stop fetching the partition; False if this fetcher did not have it."""
        if self.partitions.pop(key, None) is None:
            return False
        self._stale.add(key)
        self._replaced.add(key)
        return True

    def _truncate_later(self, key: TopicPartition, state: PartitionFetchState) -> None:
        """The partition goes back to OffsetsForLeaderEpoch before it fetches again."""
        state.truncating = True
        self._truncating.add(key)
        self._stale.add(key)

    def stop(self) -> None:
        self._cancel_scope.cancel()

    async def run(self) -> None:
        try:
            await self._run()
        finally:
            self.finished = True

    async def _run(self) -> None:
        backoff = self._config.get_int("replica.fetch.backoff.ms") / 1000
        timeout_ms = self._config.get_int("replica.socket.timeout.ms")
        self._timeout = timeout_ms / 1000
        with self._cancel_scope:
            while self.partitions:
                try:
                    # The calls are bounded by the deadline below, not each by a cancel scope of its own.
                    connection = await BrokerConnection.connect(*self.address, self._client_id, timeout_ms,
                                                                timed_calls=False)
                    self._session.reset()  # a request lost with the last connection: start over
                    self._next_full_check = -math.inf
                    try:
                        with trio.CancelScope(deadline=trio.current_time() + self._timeout) as self._deadline:
                            while self.partitions:
                                truncated = await self._truncate(connection)
                                fetched = await self._fetch(connection)
                                if not (truncated or fetched):
                                    # Nothing moved (errors, or only partitions waiting): Kafka's
                                    # replica.fetch.backoff.ms, not a busy loop against the leader.
                                    await trio.sleep(backoff)
                        if self._deadline.cancelled_caught:
                            raise BrokerUnreachable(f"no response from the leader within {timeout_ms} ms")
                    finally:
                        with trio.CancelScope(shield=True):
                            await connection.aclose()
                except (BrokerUnreachable, CodecError) as e:
                    log.info("[ReplicaFetcher %s leader=%d] %s; retrying in %.0f ms", self._client_id, self.leader_id,
                             e, backoff * 1000)
                    await trio.sleep(backoff)

    async def _call(self, connection: BrokerConnection, request, version: int):
        """`connection.call` within the timeout (see `_deadline`)."""
        due = trio.current_time() + self._timeout
        deadline = self._deadline
        if deadline.deadline < due - self._timeout / 8:
            deadline.deadline = due
        return await connection.call(request, version)

    def _hosted(self, key: TopicPartition, state: PartitionFetchState) -> Partition | None:
        """The partition `state` fetches, or None (and it leaves this fetcher) when it is gone or
        its log dir failed (Kafka's handleLogDirFailure removes its fetcher)."""
        partition = self._replicas.get(*key)
        if partition is None or partition.is_offline:
            del self.partitions[key]
            self._stale.add(key)
            self._replaced.add(key)
            return None
        state.partition = partition
        return partition

    # -- truncation (KIP-101, KIP-279)
    async def _truncate(self, connection: BrokerConnection) -> bool:
        """One round of OffsetsForLeaderEpoch for the partitions still truncating; True if one of
        them moved on."""
        if not self._truncating:
            return False
        asking = []
        progressed = False
        for key in list(self._truncating):
            state = self.partitions.get(key)
            partition = None if state is None or not state.truncating else self._hosted(key, state)
            if state is None or partition is None or not state.truncating:
                self._truncating.discard(key)
                continue
            latest = partition.log.leader_epoch_cache.latest_epoch
            if latest == UNDEFINED_EPOCH:
                # No epochs to compare: keep what the high watermark says both have.
                self._truncate_to(partition, partition.log.high_watermark)
                self._truncated(key, state)
                progressed = True
                continue
            asking.append((key, state, partition, latest))
        if not asking:
            return progressed
        by_topic: dict[str, list] = {}
        for (topic, index), state, _, latest in asking:
            by_topic.setdefault(topic, []).append(OffsetForLeaderEpoch.OffsetForLeaderPartition(
                partition=index, current_leader_epoch=state.leader_epoch, leader_epoch=latest))
        request = OffsetForLeaderEpoch(replica_id=self._replicas.local_id, topics=[
            OffsetForLeaderEpoch.OffsetForLeaderTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()])
        response = await self._call(connection, request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        answers = {(t.topic, p.partition): p for t in response.topics for p in t.partitions}
        for key, state, partition, _ in asking:
            answer = answers.get(key)
            if answer is None or self.partitions.get(key) is not state:
                continue  # not answered, or the partition changed hands meanwhile
            if answer.error_code == ErrorCode.NONE:
                progressed = True
                self._truncate_on_epoch_end(key, partition, state, answer.leader_epoch, answer.end_offset)
            else:
                self._partition_error(key, state, answer.error_code, "OffsetsForLeaderEpoch")
        return progressed

    def _truncate_on_epoch_end(self, key: TopicPartition, partition: Partition, state: PartitionFetchState,
                               leader_epoch: int, end_offset: int) -> None:
        log_ = partition.log
        offset, complete = truncation_offset(leader_epoch, end_offset, log_.end_offset_for_epoch(leader_epoch),
                                             log_.log_end_offset, log_.high_watermark)
        self._truncate_to(partition, offset)
        if complete:
            self._truncated(key, state)

    def _truncated(self, key: TopicPartition, state: PartitionFetchState) -> None:
        """Truncation settled: the partition fetches from its log end offset."""
        state.truncating = False
        self._truncating.discard(key)
        self._stale.add(key)

    def _truncate_to(self, partition: Partition, offset: int) -> None:
        log_ = partition.log
        if log_.truncate_to(offset):
            log.info("[ReplicaFetcher %s] truncated %s to offset %d (leader %d, epoch %d)", self._client_id,
                     partition.name, offset, self.leader_id, partition.leader_epoch)

    # -- fetching
    def _refresh_fetches(self) -> set[TopicPartition]:
        """Bring `_fetches` up to date for the stale partitions (every one at a full check); the
        partitions whose ask may have changed."""
        now = trio.current_time()
        if now >= self._next_full_check:
            self._next_full_check = now + FULL_CHECK_S
            self._stale.update(self.partitions)
            self._stale.update(self._fetches)
        stale, self._stale = self._stale, set()
        fetches = self._fetches
        max_bytes = self._config.get_int("replica.fetch.max.bytes")
        for key in stale:
            state = self.partitions.get(key)
            partition = None if state is None else self._hosted(key, state)
            if state is None or partition is None or state.truncating:
                fetches.pop(key, None)
                continue
            log_ = partition.log
            fetches[key] = PartitionFetch(log_.log_end_offset, state.leader_epoch,
                                          log_.leader_epoch_cache.latest_epoch, log_.log_start_offset, max_bytes)
        return stale

    async def _fetch(self, connection: BrokerConnection) -> bool:
        candidates = self._refresh_fetches()
        fetches = self._fetches
        if not fetches:
            return False
        config = self._config
        session = self._session.build(fetches, candidates)
        by_topic: dict[str, list] = {}
        for (topic, index), fetch in session.partitions.items():
            by_topic.setdefault(topic, []).append(Fetch.FetchPartition(
                partition=index, current_leader_epoch=fetch.current_leader_epoch, fetch_offset=fetch.fetch_offset,
                last_fetched_epoch=fetch.last_fetched_epoch, log_start_offset=fetch.log_start_offset,
                partition_max_bytes=fetch.max_bytes))
        forgotten: dict[str, list[int]] = {}
        for topic, index in session.forgotten:
            forgotten.setdefault(topic, []).append(index)
        request = self._fetch_request
        if request is None:
            request = self._fetch_request = Fetch(
                replica_id=self._replicas.local_id, max_wait_ms=config.get_int("replica.fetch.wait.max.ms"),
                min_bytes=config.get_int("replica.fetch.min.bytes"),
                max_bytes=config.get_int("replica.fetch.response.max.bytes"), isolation_level=0)
        request.session_id = session.session_id
        request.session_epoch = session.epoch
        request.topics = [Fetch.FetchTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()]
        request.forgotten_topics_data = [Fetch.ForgottenTopic(topic=topic, partitions=parts)
                                         for topic, parts in forgotten.items()]
        replaced = self._replaced
        replaced.clear()
        response = await self._call(connection, request, FETCH_VERSION)  # failing, it costs the connection: reset
        self._session.handle_response(session, response.error_code, response.session_id)
        if response.error_code != ErrorCode.NONE:
            log.info("[ReplicaFetcher %s] fetch from %d failed: error %d", self._client_id, self.leader_id,
                     response.error_code)
            # A session the leader evicted or lost count of: a full fetch at once opens a new one.
            return response.error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        # An incremental answer leaves out the partitions with nothing new (and the loop below
        # looks at no other): a long poll that ended with nothing is progress too (the next fetch
        # polls again), where only errors are not.
        answered = progressed = False
        to_flush = []
        out_of_range: list[tuple[TopicPartition, PartitionFetchState, Partition]] = []
        partitions = self.partitions
        stale = self._stale
        for topic in response.responses:
            name = topic.topic
            for data in topic.partitions:
                key = (name, data.partition_index)
                answered = True
                state = partitions.get(key)
                if state is None or key not in fetches or key in replaced:
                    continue  # not asked for (truncating), or the partition changed hands meanwhile
                partition = state.partition
                assert partition is not None  # _refresh_fetches looked it up
                stale.add(key)  # its log end offset, epoch or log start offset may move now
                if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((key, state, partition))
                    continue
                if data.error_code != ErrorCode.NONE:
                    self._partition_error(key, state, data.error_code, "Fetch")
                    continue
                progressed = True
                if data.diverging_epoch.epoch != UNDEFINED_EPOCH:
                    self._truncate_later(key, state)
                    continue
                try:
                    info = partition.append_as_follower(data.records, data.high_watermark, data.log_start_offset)
                    if info is not None and info.flush_needed:
                        to_flush.append(partition.log)
                except StorageError as e:
                    log.error("[ReplicaFetcher %s] cannot append to %s: %s", self._client_id, partition.name, e)
                    self._truncate_later(key, state)
        for log_ in to_flush:
            await trio.to_thread.run_sync(log_.flush)
        if out_of_range:
            await self._handle_out_of_range(connection, out_of_range)
        return progressed or not answered

    async def _handle_out_of_range(self, connection: BrokerConnection,
                                   partitions: list[tuple[TopicPartition, PartitionFetchState, Partition]]) -> None:
        """Kafka's handleOutOfRangeError: below the leader's log start offset (retention went past
        this replica), start over empty there; otherwise the leader's log is shorter, which the
        epochs settle (truncation)."""
        by_topic: dict[str, list] = {}
        for (topic, index), state, _ in partitions:
            by_topic.setdefault(topic, []).append(ListOffsets.ListOffsetsPartition(
                partition_index=index, current_leader_epoch=state.leader_epoch, timestamp=EARLIEST_TIMESTAMP))
        request = ListOffsets(replica_id=self._replicas.local_id, isolation_level=0, topics=[
            ListOffsets.ListOffsetsTopic(name=topic, partitions=parts) for topic, parts in by_topic.items()])
        response = await self._call(connection, request, LIST_OFFSETS_VERSION)
        starts = {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}
        for key, state, partition in partitions:
            answer = starts.get(key)
            if answer is None or self.partitions.get(key) is not state:
                continue
            if answer.error_code != ErrorCode.NONE:
                self._partition_error(key, state, answer.error_code, "ListOffsets")
                continue
            log_ = partition.log
            if log_.log_end_offset < answer.offset:
                log.info("[ReplicaFetcher %s] %s: log end offset %d is below the leader's log start offset %d; "
                         "starting over there", self._client_id, partition.name, log_.log_end_offset, answer.offset)
                log_.truncate_fully_and_start_at(answer.offset)
                self._stale.add(key)
            else:
                self._truncate_later(key, state)

    def _partition_error(self, key: TopicPartition, state: PartitionFetchState, code: int, api: str) -> None:
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            # The leader has a newer epoch than this broker was told: wait for the next LeaderAndIsr.
            log.info("[ReplicaFetcher %s] %s of %s-%d: fenced leader epoch %d; the partition waits for a new "
                     "LeaderAndIsr", self._client_id, api, *key, state.leader_epoch)
            del self.partitions[key]
            self._stale.add(key)
        else:
            log.debug("[ReplicaFetcher %s] %s of %s-%d: error %d; retrying", self._client_id, api, *key, code)
