"""A ShareFetch's long poll and its acquisition (Kafka's DelayedShareFetch, ShareFetchUtils and
SharePartitionManager.fetchMessages).

The share partitions of the fetch are created and their state read on first use. Then, until
`min_bytes` can be answered or `max_wait_ms` passes, each pass reads the log of every share
partition that may acquire (its in-flight window not full) from its next fetch offset, up to the
high watermark (the last stable offset for read_committed groups), splitting `max_bytes` evenly
between them; when enough is there (or a read failed, or the time is up) the records read are
acquired for the member and answered, else the fetch parks a trio.Event on every replica
partition (an append, a high watermark or leadership change wakes it, as it wakes a Fetch: Samsa's
DelayedFetch purgatory), and looks again; a share partition that changes (records released,
acknowledged, unlocked, or its state loaded) makes the pass of the fetches parked on it at once,
as Kafka completes a delayed share fetch in the thread that notifies it (see DelayedShareFetch). A
pass makes no await between reading a log and acquiring from it, and passes never nest, so no
other fetch can acquire in between (what Kafka's per-partition fetch lock is for).

What a pass acquired is answered once the persister has the raised delivery counts (the partitions'
writes go out together, those to another broker in one request: the wait is about one write's); records whose write failed are not answered
(AVAILABLE again with their previous count; the partition answers no error unless the share
partition was fenced, NOT_LEADER_OR_FOLLOWER, or its topic partition is unknown to the
coordinator: clients take any other error of a fetched partition as fatal). So a record is never
delivered without its delivery counted where a new leader reads it (not in Kafka 4.4, which
persists no acquisition).

Records go out as Fetch sends them: whole batches, a file range of the log (sent with sendfile),
cut to the batches that hold acquired records; batch headers are read for their offsets,
producer ids and control and transactional flags, never the records. The acquired ranges go with
them as AcquiredRecords: a client takes from the batches only the offsets acquired for it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import trio

from ...coordinator.share_partition import (
    AbortedTransaction,
    AcquiredRecords,
    FetchedBatch,
    ShareAcquireMode,
    SharePartitionError,
    SharePartitionStatus,
)
from ...storage.errors import OffsetOutOfRangeException, StorageError
from ...wire.errors import ErrorCode
from ..clock import loop_ms, loop_time
from .share_session_cache import TopicIdPartition

if TYPE_CHECKING:
    from ...storage.file_records import FileRecords
    from ...storage.log_segment import FetchDataInfo
    from .share_partition_manager import HostedSharePartition, QueuedWrite, SharePartitionManager

# The errors of a failed acquisition write that a fetched partition answers (else none, and no records).
_ACQUISITION_WRITE_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})


@dataclass(frozen=True)
class ShareFetchParams:
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    batch_size: int
    acquire_mode: int = ShareAcquireMode.BATCH_OPTIMIZED
    read_committed: bool = False


@dataclass
class SharePartitionData:
    """One partition's answer: an error, or the records that hold the acquired ones."""

    error_code: int = ErrorCode.NONE  # (Kafka's ShareFetch responses carry no partition error message)
    records: FileRecords | bytes = b""
    acquired_records: list[AcquiredRecords] = field(default_factory=list)

    @property
    def size(self) -> int:
        records = self.records
        return len(records) if isinstance(records, bytes) else records.size


class _Read(NamedTuple):
    fetch_offset: int
    info: FetchDataInfo | None
    error_code: int = ErrorCode.NONE


def rotate(partitions: list[TopicIdPartition], session_epoch: int) -> list[TopicIdPartition]:
    """Kafka's round-robin PartitionRotateStrategy: each request of a session starts one partition
    further, so that max_bytes and max_records do not always go to the same first partitions."""
    if len(partitions) <= 1 or session_epoch < 1:
        return partitions
    at = session_epoch % len(partitions)
    return partitions[at:] + partitions[:at]


def partition_max_bytes(max_bytes: int, count: int) -> list[int]:
    """Kafka's UNIFORM PartitionMaxBytesStrategy: max_bytes split evenly (the rest to one)."""
    share, rest = divmod(max_bytes, count)
    if share == 0:  # fewer bytes than partitions: a byte each to the first ones
        return [1 if i < max_bytes else 0 for i in range(count)]
    return [share + rest] + [share] * (count - 1)


async def delayed_share_fetch(manager: SharePartitionManager, group_id: str, member_id: str, params: ShareFetchParams,
                              partitions: list[TopicIdPartition], session_epoch: int,
                              parked: Callable[[], AbstractContextManager]) -> dict[TopicIdPartition, SharePartitionData]:
    """Fetch and acquire for the member; `parked()` is entered while the fetch waits (its time is
    not the request's handling time, for quotas)."""
    results: dict[TopicIdPartition, SharePartitionData] = {}
    if not partitions or params.max_records == 0 or params.max_bytes == 0:
        return results
    hosted_by_tip: dict[TopicIdPartition, HostedSharePartition] = {}
    for tip in rotate(partitions, session_epoch):
        code, hosted = manager.get_or_create(group_id, tip)
        if hosted is None or code != ErrorCode.NONE:
            results[tip] = SharePartitionData(error_code=code)
        else:
            hosted_by_tip[tip] = hosted
    manager.metrics.fetch_requests += 1
    if hosted_by_tip:
        deadline = loop_time() + max(params.max_wait_ms, 0) / 1000
        results.update(await DelayedShareFetch(manager, member_id, params, hosted_by_tip, deadline).run(parked))
    if any(data.error_code != ErrorCode.NONE for data in results.values()):
        manager.metrics.failed_fetch_requests += 1
    return results


class DelayedShareFetch:
    """One share fetch waiting for records (Kafka's DelayedShareFetch): `try_complete` is one pass
    over its share partitions. The fetch's own task makes a pass when it starts, when a replica
    partition wakes it and at its deadline; a share partition that changes (its state loaded,
    records released, acknowledged or unlocked) makes one at once, in the task that changed it, as
    Kafka's delayedRequestNotifier completes a delayed share fetch in the thread that notifies. So
    what a fetch answers is what could be acquired at that moment: a fetch parked on two share
    partitions being loaded answers the records of the first one loaded, without waiting for the
    other (as Kafka's first ShareFetch of a new session does)."""

    def __init__(self, manager: SharePartitionManager, member_id: str, params: ShareFetchParams,
                 hosted_by_tip: dict[TopicIdPartition, HostedSharePartition], deadline: float) -> None:
        self.manager = manager
        self.member_id = member_id
        self.params = params
        self.hosted_by_tip = hosted_by_tip
        self.deadline = deadline
        self.results: dict[TopicIdPartition, SharePartitionData] = {}
        # The acquisitions' writes to the persister: the records are answered once they succeed.
        self.writes: list[tuple[TopicIdPartition, QueuedWrite]] = []
        self.completed = False
        self._woken = trio.Event()
        self._error: Exception | None = None  # what a pass made from another task raised

    async def run(self, parked: Callable[[], AbstractContextManager]) -> dict[TopicIdPartition, SharePartitionData]:
        watched = list(self.hosted_by_tip.values())
        for hosted in watched:
            hosted.park(self.on_share_partition_change)
        try:
            while not self.try_complete():
                self._woken = trio.Event()
                replicas = [hosted.replica for hosted in self.hosted_by_tip.values()]
                for replica in replicas:
                    replica.park(self._woken)
                try:
                    with parked(), trio.move_on_at(self.deadline):
                        await self._woken.wait()
                finally:
                    for replica in replicas:
                        replica.unpark(self._woken)
                if self._error is not None:
                    raise self._error
        finally:
            for hosted in watched:
                hosted.unpark(self.on_share_partition_change)
        for tip, queued in self.writes:
            code = await queued.wait()
            if code != ErrorCode.NONE:
                self.results[tip] = SharePartitionData(
                    error_code=code if code in _ACQUISITION_WRITE_ERRORS else ErrorCode.NONE)
        return self.results

    def on_share_partition_change(self) -> None:
        """A share partition of the fetch changed: complete the fetch now if it can be. During
        another pass (nested in its acquisitions) the fetch's own task looks instead."""
        if self.completed:
            return
        if self.manager.fetch_pass_running:
            self._woken.set()
            return
        try:
            if self.try_complete():
                self._woken.set()
        except Exception as e:  # raised in the fetch's own task, not in the one notifying
            self._error = e
            self._woken.set()

    def try_complete(self) -> bool:
        """One pass: acquire and complete if min_bytes can be answered, a read failed or the time
        is up (Kafka's tryComplete, then onComplete)."""
        if self.completed:
            return True
        manager = self.manager
        manager.fetch_pass_running = True
        try:
            self.completed = self._pass()
        finally:
            manager.fetch_pass_running = False
        return self.completed

    def _pass(self) -> bool:
        manager, hosted_by_tip, results = self.manager, self.hosted_by_tip, self.results
        acquirable = []
        for tip, hosted in list(hosted_by_tip.items()):
            if hosted.init_error is not None:  # Kafka's handleInitializationException
                results[tip] = SharePartitionData(error_code=hosted.init_error)
                del hosted_by_tip[tip]
            elif not manager.is_current(hosted):  # leadership moved: nothing from it this time
                manager.remove(hosted)
                del hosted_by_tip[tip]
            elif hosted.state.status == SharePartitionStatus.ACTIVE and hosted.state.can_acquire_records():
                acquirable.append((tip, hosted))
        expired = loop_time() >= self.deadline
        if acquirable:
            reads, total = _read_logs(acquirable, self.params)
            if total >= self.params.min_bytes or expired or any(r.error_code != ErrorCode.NONE for r in reads.values()):
                acquired, writes = _acquire(manager, self.member_id, self.params, acquirable, reads)
                results.update(acquired)
                self.writes.extend(writes)  # under way together already; run() awaits them
                return True
        if expired or not hosted_by_tip:
            manager.metrics.expired_delayed_fetches += 1
            return True
        return False


def _read_logs(acquirable: list[tuple[TopicIdPartition, HostedSharePartition]],
               params: ShareFetchParams) -> tuple[dict[TopicIdPartition, _Read], int]:
    """Read each share partition's log from its next fetch offset (Kafka's ReplicaManagerLogReader)."""
    reads: dict[TopicIdPartition, _Read] = {}
    total = 0
    limits = partition_max_bytes(params.max_bytes, len(acquirable))
    for (tip, hosted), limit in zip(acquirable, limits):
        offset = hosted.state.next_fetch_offset()
        replica = hosted.replica
        try:
            log_ = replica.log
            bound = replica.last_stable_offset if params.read_committed else log_.high_watermark
            info = log_.read(offset, limit, isolation_max_offset=bound, min_one_message=total == 0,
                             include_aborted_txns=params.read_committed)
        except OffsetOutOfRangeException:
            reads[tip] = _Read(offset, None, ErrorCode.OFFSET_OUT_OF_RANGE)
            continue
        except StorageError as e:
            reads[tip] = _Read(offset, None, e.error_code)
            continue
        reads[tip] = _Read(offset, info)
        total += info.records.size
    return reads, total


def _acquire(manager: SharePartitionManager, member_id: str, params: ShareFetchParams,
             acquirable: list[tuple[TopicIdPartition, HostedSharePartition]], reads: dict[TopicIdPartition, _Read],
             ) -> tuple[dict[TopicIdPartition, SharePartitionData], list[tuple[TopicIdPartition, QueuedWrite]]]:
    """Acquire from what was read, within max_records over all partitions (Kafka's
    ShareFetchUtils.processFetchResponse); the acquisitions' writes, sent."""
    results: dict[TopicIdPartition, SharePartitionData] = {}
    writes: list[tuple[TopicIdPartition, QueuedWrite]] = []
    acquired_count = 0
    now_ms = loop_ms()
    for tip, hosted in acquirable:
        read = reads[tip]
        state = hosted.state
        if read.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            # The log start offset moved past the share partition's (retention, DeleteRecords):
            # it moves there too and the next fetch reads from it.
            try:
                state.update_cache_and_offsets(hosted.replica.log.log_start_offset)
            except (SharePartitionError, StorageError) as e:
                results[tip] = SharePartitionData(error_code=e.error_code)
                manager.maybe_fence(hosted, e.error_code)
            else:
                results[tip] = SharePartitionData()
            continue
        if read.error_code != ErrorCode.NONE or read.info is None:
            results[tip] = SharePartitionData(error_code=read.error_code)
            continue
        records = read.info.records
        try:
            headers = list(records.batch_headers_from(0)) if records.size else []
            batches = [FetchedBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control)
                       for _, h in headers]
            aborted = [AbortedTransaction(txn.producer_id, txn.first_offset)
                       for txn in read.info.aborted_transactions or ()]
            acquired = state.acquire(member_id, read.fetch_offset, batches, now_ms,
                                     max_fetch_records=params.max_records - acquired_count,
                                     batch_size=params.batch_size,
                                     share_acquire_mode=ShareAcquireMode(params.acquire_mode),
                                     read_committed=params.read_committed, aborted_transactions=aborted)
        except (SharePartitionError, StorageError) as e:
            results[tip] = SharePartitionData(error_code=e.error_code)
            manager.maybe_fence(hosted, e.error_code)
            continue
        if not acquired.acquired_records:
            results[tip] = SharePartitionData()
            continue
        acquired_count += acquired.count
        results[tip] = SharePartitionData(records=_batches_holding(records, headers, acquired.acquired_records),
                                          acquired_records=list(acquired.acquired_records))
        if acquired.write is not None:
            writes.append((tip, manager.write(hosted, acquired.write)))
    manager.locks_changed()
    return results, writes


def _batches_holding(records: FileRecords, headers: list, acquired: list[AcquiredRecords]) -> FileRecords:
    """The range of whole batches that hold the acquired offsets (Kafka's maybeSliceFetchRecords):
    from the batch of the first acquired offset to the batch of the last."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    held = [(position, h) for position, h in headers if h.last_offset >= first and h.base_offset <= last]
    if not held:
        return records
    start = held[0][0]
    end = held[-1][0] + held[-1][1].size
    if start == 0 and end == records.size:
        return records
    return records.slice(start, end - start)
