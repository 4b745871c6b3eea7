"""ListOffsets (key 2), v0-11: offsets by timestamp and Kafka's special timestamps (latest, earliest,
max timestamp (v7+), earliest local (v8+), latest tiered (v9+), earliest pending upload (v11+, KIP-1023));
a special timestamp older than the version that introduced it gets UNSUPPORTED_VERSION. Follows KafkaApis.handleListOffsetRequest,
Partition.fetchOffsetForTimestamp and UnifiedLog.fetchOffsetByTimestamp. A partition asked for twice
in one topic gets INVALID_REQUEST, once (Kafka 4's ReplicaManager.fetchOffset answers by partition).
Deviations: v0 answers at most one offset (Kafka's legacyFetchOffsetsBefore lists segment base offsets
up to max_num_offsets); v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896); with no tiered
storage, latest tiered and earliest pending upload are always -1 (as Kafka answers for a topic
without remote storage) and earliest local is the log start offset.
"""

from __future__ import annotations

from collections import Counter

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, TOPIC
from . import handler

ListOffsetsResponse = response_class(ApiKey.LIST_OFFSETS)
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
# The version that introduced each special timestamp (ListOffsetsRequest's comments).
FIRST_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8, LATEST_TIERED_TIMESTAMP: 9,
                 EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
NO_TIMESTAMP = -1
DEBUGGING_REPLICA_ID = -2  # ListOffsetsRequest.DEBUGGING_REPLICA_ID: may read a follower


def error(index: int, code: int):
    return PartitionResponse(partition_index=index, error_code=code, timestamp=NO_TIMESTAMP, offset=-1,
                             leader_epoch=-1, old_style_offsets=[])


def lookup(ctx, partition, timestamp: int, isolation: int) -> tuple[int, int]:
    """(timestamp, offset) for a ListOffsets query; offset -1 when nothing matches."""
    log_ = partition.log
    if timestamp == LATEST_TIMESTAMP:
        return NO_TIMESTAMP, partition.read_bound(isolation)
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return NO_TIMESTAMP, log_.log_start_offset
    if timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        return NO_TIMESTAMP, -1  # no tiered storage: nothing is remote, nothing waits to be uploaded
    found = log_.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return NO_TIMESTAMP, -1
    offset, ts = found
    if timestamp != MAX_TIMESTAMP and offset >= partition.read_bound(isolation):
        return NO_TIMESTAMP, -1
    return ts, offset


@handler(ApiKey.LIST_OFFSETS, 0, 11)
async def handle(ctx, request):
    version = ctx.api_version
    isolation = request.isolation_level if version >= 2 else 0
    topics = []
    for t in request.topics:
        if not ctx.authorize(DESCRIBE, TOPIC, t.name):
            topics.append(TopicResponse(name=t.name, partitions=[
                error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]))
            continue
        counts = Counter(p.partition_index for p in t.partitions)
        duplicates = {index for index, n in counts.items() if n > 1}
        parts = []
        answered: set[int] = set()
        for p in t.partitions:
            if p.partition_index in duplicates:
                if p.partition_index not in answered:
                    parts.append(error(p.partition_index, ErrorCode.INVALID_REQUEST))
                answered.add(p.partition_index)
                continue
            partition = ctx.services.replica_manager.get(t.name, p.partition_index)
            if partition is None:
                parts.append(error(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            # Only the leader answers (a follower's high watermark may lag: KIP-392 keeps ListOffsets
            # on the leader), except for the debugging replica id, as Kafka's fetchOnlyFromLeader.
            epoch_error = partition.check_replica(p.current_leader_epoch if version >= 4 else -1,
                                                  require_leader=request.replica_id != DEBUGGING_REPLICA_ID)
            if epoch_error != ErrorCode.NONE:
                parts.append(error(p.partition_index, epoch_error))
                continue
            if version < FIRST_VERSION.get(p.timestamp, 0):
                parts.append(error(p.partition_index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            ts, offset = lookup(ctx, partition, p.timestamp, isolation)
            if version == 0:
                parts.append(PartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                               old_style_offsets=[offset] if offset >= 0 and p.max_num_offsets > 0 else []))
            else:
                parts.append(PartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                               timestamp=ts, offset=offset,
                                               leader_epoch=partition.leader_epoch if offset >= 0 and version >= 4 else -1))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
