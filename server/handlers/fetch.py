"""Fetch (key 1), v0-18: log bytes, long-polling until `min_bytes` arrive or `max_wait_ms` passes.
Follows KafkaApis.handleFetchRequest, ReplicaManager.fetchMessages, DelayedFetch and FetchSessionCache
(KIP-227 sessions). Record data is never copied: file ranges go out with sendfile; only v0-3 clients
get bytes read and down-converted to message format v0/v1.
A follower's fetch (replica id set) reads up to the log end offset, not the high watermark; what it
asks for tells the leader its log end offset (Partition.follower_fetched: the ISR and the high
watermark may move); a last_fetched_epoch (v12+) the leader's log does not end the same way gets a
diverging_epoch instead of records (Kafka's Partition.fetchRecords). A session opened by v13+ (topics
by id) continued by v12- (by name), or the other way round, is FETCH_SESSION_TOPIC_ID_ERROR.
Fetch from the closest replica (KIP-392, server/replication/replica_selector.py): from v11 a consumer may read
any replica of the partition, a follower up to its high watermark (the leader's, as its fetches
brought it); with `replica.selector.class` set the leader answers a consumer's fetch with a
`preferred_read_replica` and no records, and the consumer goes there. Before v11 only the leader is
read. v18 (KIP-1166) adds only the high watermark a KRaft voter's fetch carries (a tagged field of
its replica state), which no consumer or broker replica sends: served as v17.
Deviations: v0-3 are served as in Kafka 3.9 (Kafka 4.0 removed them, KIP-896).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio

from ...storage.errors import OffsetOutOfRangeException, StorageError
from ...wire import legacy
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION, READ, TOPIC
from ..clock import loop_time, wall_clock_ms
from ..replication.fetch_session import INVALID_SESSION_ID, UNCHANGED, CachedPartition, FetchContext
from ..replication.replica_manager import READ_COMMITTED
from ..replication.replica_selector import preferred_read_replica
from ..throttle import fetch_max_bytes, not_request_time, record_fetch
from . import handler

FetchResponse = response_class(ApiKey.FETCH)
TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
EpochEndOffset = FetchResponse.EpochEndOffset
NO_LIMIT = 2**31 - 1
# The tagged fields a partition's answer leaves at their defaults, one instance each for every
# answer (never changed once built): each PartitionData would otherwise build three.
NO_DIVERGING_EPOCH = EpochEndOffset()
NO_CURRENT_LEADER = FetchResponse.LeaderIdAndEpoch()
NO_SNAPSHOT_ID = FetchResponse.SnapshotId()


def partition_data(index: int, error_code: int, high_watermark: int, last_stable_offset: int, log_start_offset: int,
                   aborted, preferred_read_replica: int, records, diverging_epoch=NO_DIVERGING_EPOCH):
    """A partition's answer (built for every partition of every fetch pass)."""
    return PartitionData(index, error_code, high_watermark, last_stable_offset, log_start_offset, diverging_epoch,
                         NO_CURRENT_LEADER, NO_SNAPSHOT_ID, aborted, preferred_read_replica, records)


def requested_partitions(ctx, request) -> tuple[list[CachedPartition], list[tuple[str, int]], list]:
    """The partitions a request names, with topic ids resolved (v13+); unknown ids answered later."""
    image = ctx.services.metadata_cache
    by_id = ctx.api_version >= 13

    def topic_name(t) -> str | None:
        if not by_id:
            return t.topic
        topic = image.topics_by_id.get(t.topic_id)
        return None if topic is None else topic.name

    wanted, unknown_ids = [], []
    for t in request.topics:
        name = topic_name(t)
        if name is None:
            unknown_ids.append(t)
            continue
        for p in t.partitions:
            wanted.append(CachedPartition(name, t.topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                                          p.log_start_offset, p.current_leader_epoch, p.last_fetched_epoch))
    forgotten: list[tuple[str, int]] = []  # (topic, partition)
    for t in request.forgotten_topics_data or ():
        name = topic_name(t)
        if name is not None:
            forgotten.extend((name, p) for p in t.partitions)
    return wanted, forgotten, unknown_ids


@dataclass(frozen=True)
class FollowerFetch:
    """Who fetches for replication. The epoch of the last batch each partition holds is the fetch
    session's (CachedPartition.last_fetched_epoch, v12+; -1 before): an incremental request names
    only the partitions whose position changed, the session remembers the others'."""
    replica_id: int


def follower_fetch(ctx, request) -> FollowerFetch | None:
    """A fetch from a follower (replica id >= 0, in replica_state from v15), or None."""
    version = ctx.api_version
    replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
    if replica_id < 0:
        return None
    return FollowerFetch(replica_id)


def diverging_epoch(log_, last_fetched_epoch: int, fetch_offset: int):
    """Where the leader's log of the follower's last fetched epoch ends, if the follower's log
    cannot continue it at `fetch_offset` (Kafka's Partition.fetchRecords with lastFetchedEpoch)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = log_.end_offset_for_epoch(last_fetched_epoch)
    if end_offset < 0:
        return None
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return None


def client_rack(ctx, request, follower: FollowerFetch | None) -> str | None:
    """A consumer's rack from v11 on ('' for none: Kafka's ClientMetadata), None for a follower or
    an older consumer, which read the leader only (Kafka's FetchParams.fetchOnlyLeader)."""
    return request.rack_id if ctx.api_version >= 11 and follower is None else None


def preferred_replica(ctx, partition, rack: str, fetch_offset: int) -> int | None:
    """The replica a consumer in `rack` should read from, if this broker leads the partition and
    a replica selector says another one (Kafka's ReplicaManager.findPreferredReadReplica)."""
    selector = ctx.services.config.replica_selector
    cache = ctx.services.metadata_cache  # the brokers' racks
    leader_state = partition.leader_state
    if (selector is None or not partition.is_leader or leader_state is None
            or not leader_state.replicated):
        return None
    listener = ctx.listener

    def rack_of(node_id: int) -> str | None:
        node = cache.alive_node(node_id, listener)
        return None if node is None else node.rack

    return preferred_read_replica(selector, rack, fetch_offset, wall_clock_ms(), partition.local_id,
                                  partition.log.log_end_offset, leader_state.isr, leader_state.followers.values(),
                                  rack_of)


def read_partition(ctx, p: CachedPartition, partition, max_bytes: int, min_one_message: bool, isolation: int,
                   follower: FollowerFetch | None = None, rack: str | None = None, incremental: bool = False,
                   now_ms: int | None = None):
    """PartitionData for one partition (records possibly a file range) and the bytes it carries.
    `partition`: the replica manager's (None: not hosted here). `rack`: a consumer's (v11+), which
    may read a follower or be sent to one. A partition with nothing to read (the fetch offset at
    the end a reader may see) is not read; in an `incremental` session, if its offsets are also
    those the client was last sent, the answer is UNCHANGED: nothing to say (Kafka's FetchSession
    leaves it out). `now_ms`: when a follower's fetch read it, which updates the follower's fetch
    state; None for a read after a wake, which does not (Kafka's DelayedFetch reads with
    updateFetchState false: the request told where the follower was when it came)."""
    if partition is None:
        return error_data(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), 0
    epoch_error = partition.check_replica(p.current_leader_epoch, require_leader=rack is None)
    if epoch_error != ErrorCode.NONE:
        return read_error_data(p.partition, epoch_error), 0
    log_ = partition.log
    fetch_offset = p.fetch_offset
    if rack is not None and ctx.services.config.replica_selector is not None:
        preferred = preferred_replica(ctx, partition, rack, fetch_offset)
        if preferred is not None:  # the consumer is sent there: no records (Kafka skips the read)
            return partition_data(p.partition, ErrorCode.NONE, log_.high_watermark, log_.last_stable_offset,
                                  log_.log_start_offset, None, preferred, b""), 0
    read_committed = isolation == READ_COMMITTED
    if follower is not None:
        diverging = diverging_epoch(log_, p.last_fetched_epoch, fetch_offset)
        if diverging is not None:
            return partition_data(p.partition, ErrorCode.NONE, log_.high_watermark, log_.last_stable_offset,
                                  log_.log_start_offset, None, -1, b"", diverging), 0
        end = log_.log_end_offset
    else:
        lso = log_.last_stable_offset  # nothing a consumer's read does moves it
        end = lso if read_committed else log_.high_watermark
    log_start_offset = log_.log_start_offset
    if fetch_offset == end and fetch_offset >= log_start_offset:
        # Nothing to read (what Log.read would answer, without its work: most partitions of a
        # replica fetcher's session, or of a consumer's fetch, at most times).
        if follower is not None:
            if now_ms is not None:
                ctx.services.replica_manager.follower_fetched(partition, follower.replica_id, fetch_offset, now_ms)
            lso = log_.last_stable_offset  # the follower's fetch may have moved the high watermark
        hwm = log_.high_watermark
        if incremental and not p.changed(hwm, lso, log_start_offset):
            return UNCHANGED, 0
        return partition_data(p.partition, ErrorCode.NONE, hwm, lso, log_start_offset,
                              [] if read_committed else None, -1, b""), 0
    try:
        if follower is not None:
            info = log_.read(fetch_offset, max_bytes, min_one_message=min_one_message)
            if now_ms is not None:  # a fetch offset out of range says nothing of the follower
                ctx.services.replica_manager.follower_fetched(partition, follower.replica_id, fetch_offset, now_ms)
            lso = log_.last_stable_offset
        else:
            info = log_.read(fetch_offset, max_bytes, isolation_max_offset=end,
                             min_one_message=min_one_message, include_aborted_txns=read_committed)
    except OffsetOutOfRangeException:
        return read_error_data(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE), 0
    except StorageError as e:
        return read_error_data(p.partition, e.error_code), 0
    hwm = log_.high_watermark
    records = info.records
    size = records.size
    if ctx.api_version <= 3:
        records = down_convert(records, 0 if ctx.api_version <= 1 else 1, fetch_offset)
        size = len(records)
    elif size == 0:
        records = b""
    return partition_data(p.partition, ErrorCode.NONE, hwm, lso, log_start_offset,
                          aborted_transactions(info.aborted_transactions), -1, records), size


def aborted_transactions(aborted):
    """Fetch's aborted_transactions: null for read_uncommitted reads."""
    if aborted is None:
        return None
    return [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset) for txn in aborted]


def down_convert(records, magic: int, fetch_offset: int) -> bytes:
    """Message format v0/v1 for Fetch v0-3 clients (headers dropped), from the fetch offset on."""
    if records.size == 0:
        return b""
    return legacy.down_convert(records.read_bytes(), magic, first_offset=fetch_offset)


def error_data(index: int, code: int):
    """A partition refused before any read (unknown, not authorized): Kafka's
    FetchResponse.partitionResponse, no offsets and an empty aborted_transactions array."""
    return partition_data(index, code, -1, -1, -1, [], -1, b"")


def read_error_data(index: int, code: int):
    """A partition whose read failed (fenced epoch, offset out of range, storage): Kafka's
    LogReadResult for an error carries no offsets (-1) and no aborted_transactions (null)."""
    return partition_data(index, code, -1, -1, -1, None, -1, b"")


def unreadable_topics(ctx, request, context) -> frozenset[str]:
    """The topics of the fetch the sender may not read: a consumer needs READ on each, a follower
    (replica id set) CLUSTER_ACTION on the cluster."""
    if ctx.services.authorizer is None:
        return frozenset()
    topics = {p.topic for p in context.partitions}
    replica_id = request.replica_state.replica_id if ctx.api_version >= 15 else request.replica_id
    if replica_id >= 0:
        return frozenset() if ctx.authorize(CLUSTER_ACTION, CLUSTER) else frozenset(topics)
    return frozenset(topics - ctx.authorized(READ, TOPIC, topics))


def read_all(ctx, context, max_bytes: int, isolation: int, unreadable: frozenset[str],
             follower: FollowerFetch | None = None, rack: str | None = None, woken: bool = False):
    """One pass over the session's partitions: ([(cached partition, data)] for those the response
    may carry (an incremental session's unchanged partitions left out), bytes read, whether an
    error or a preferred read replica settles the fetch at once, the replica manager's partition
    of each of `context.partitions` (None: not hosted), for the fetch to park on). A follower's
    fetch tells where the follower is in its first pass only, not in a pass after a wake (`woken`)."""
    hosting = ctx.services.replica_manager.get
    remaining = max_bytes
    results = []
    hosted = []
    total = 0
    settled = False
    incremental = context.incremental
    now_ms = wall_clock_ms() if follower is not None and not woken else None
    for p in context.partitions:
        partition = hosting(p.topic, p.partition)
        hosted.append(partition)
        if unreadable and p.topic in unreadable:
            results.append((p, error_data(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            settled = True
            continue
        limit = min(p.max_bytes, remaining)
        data, size = read_partition(ctx, p, partition, limit, total == 0, isolation, follower, rack, incremental,
                                    now_ms)
        if data is UNCHANGED:
            continue
        results.append((p, data))
        if size:
            total += size
            remaining = max(0, remaining - size)
        elif (data.error_code != ErrorCode.NONE or data.preferred_read_replica >= 0
              or data.diverging_epoch is not NO_DIVERGING_EPOCH):
            settled = True  # answered at once (Kafka's fetchMessages)
    return results, total, settled, hosted


@handler(ApiKey.FETCH, 0, 18)
async def handle(ctx, request):
    services = ctx.services
    version = ctx.api_version
    wanted, forgotten, unknown_ids = requested_partitions(ctx, request)
    now_ms = wall_clock_ms()
    if version >= 7:
        context = services.fetch_sessions.new_context(request.session_id, request.session_epoch, wanted,
                                                      forgotten, now_ms, uses_topic_ids=version >= 13)
        if context.error != ErrorCode.NONE:
            return FetchResponse(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    else:
        context = FetchContext(wanted)
    isolation = request.isolation_level if version >= 4 else 0
    max_bytes = request.max_bytes if version >= 3 else NO_LIMIT
    quota_bytes = fetch_max_bytes(ctx)
    if quota_bytes is not None:
        max_bytes = min(max_bytes, quota_bytes)  # a response the byte-rate quota would surely throttle
    min_bytes = min(request.min_bytes, max_bytes)
    deadline = loop_time() + max(request.max_wait_ms, 0) / 1000
    unreadable = unreadable_topics(ctx, request, context)
    follower = follower_fetch(ctx, request)
    rack = client_rack(ctx, request, follower)
    on_log_end = follower is not None  # a follower waits for appends, a consumer for the high watermark
    woken = False
    while True:
        # Kafka's DelayedFetch: woken, read again. A pass over partitions with nothing new costs
        # what looking at their offsets first would (Kafka's tryComplete), and a fetch is woken
        # only by what it waits for (a follower's by an append, a consumer's by the high
        # watermark moving), so most wakes find something.
        results, total, settled, parked = read_all(ctx, context, max_bytes, isolation, unreadable, follower, rack,
                                                   woken)
        if total >= min_bytes or settled or not context.partitions or loop_time() >= deadline:
            break
        wake = trio.Event()
        for partition in parked:
            if partition is not None:
                partition.park(wake, on_log_end)
        with not_request_time(ctx), trio.move_on_at(deadline):
            await wake.wait()
        for partition in parked:
            if partition is not None:
                partition.unpark(wake, on_log_end)
        woken = True
    if record_fetch(ctx, total):
        return throttled_response(ctx, context)
    return build_response(ctx, context, results, unknown_ids)


def throttled_response(ctx, context):
    """A fetch over quota gets nothing (Kafka's getThrottledResponse); a session it would have
    opened is not kept, so the client starts over with a full fetch."""
    session_id = context.session_id
    if session_id != INVALID_SESSION_ID and not context.incremental:
        ctx.services.fetch_sessions.remove(session_id)
        session_id = INVALID_SESSION_ID
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=session_id, responses=[])


def carries_records(records) -> bool:
    size = len(records) if isinstance(records, (bytes, bytearray, memoryview)) else records.size
    return size > 0


def build_response(ctx, context, results, unknown_ids):
    by_topic: dict[str, Any] = {}  # topic name -> its TopicResponse (a generated message: Any to mypy)
    topics = []
    in_session = context.session_id != INVALID_SESSION_ID  # without one (most consumers), nothing to remember
    incremental = context.incremental
    for p, data in results:
        if in_session:
            changed = p.needs_response(data.high_watermark, data.last_stable_offset, data.log_start_offset,
                                       carries_records(data.records), data.error_code)
            changed = changed or data.preferred_read_replica >= 0  # as Kafka's maybeUpdateResponseData
            if incremental and not changed:
                continue
        entry = by_topic.get(p.topic)
        if entry is None:
            entry = TopicResponse(topic=p.topic, topic_id=p.topic_id, partitions=[])
            by_topic[p.topic] = entry
            topics.append(entry)
        entry.partitions.append(data)
    for t in unknown_ids:
        topics.append(TopicResponse(topic="", topic_id=t.topic_id, partitions=[
            error_data(p.partition, ErrorCode.UNKNOWN_TOPIC_ID) for p in t.partitions]))
    return FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=context.session_id,
                         responses=topics)
