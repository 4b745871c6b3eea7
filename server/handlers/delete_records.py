"""DeleteRecords (key 21), v0-2: advance a partition's log start offset (-1: to the high watermark).
Follows KafkaApis.handleDeleteRecordsRequest and ReplicaManager.deleteRecords: DELETE on the topic,
OFFSET_OUT_OF_RANGE beyond the high watermark, POLICY_VIOLATION on a compact-only topic.
Deviations: none known (the low watermark waits for no follower: this broker is the only replica).
"""

from __future__ import annotations

from ...storage.errors import StorageError
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DELETE, TOPIC
from . import handler

DeleteRecordsResponse = response_class(ApiKey.DELETE_RECORDS)
TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult
HIGH_WATERMARK = -1


def delete_before(ctx, topic: str, p):
    partition = ctx.services.replica_manager.get(topic, p.partition_index)
    if partition is None:
        return PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                               error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    log_ = partition.log
    offset = log_.high_watermark if p.offset == HIGH_WATERMARK else p.offset
    if offset < 0 or offset > log_.high_watermark:
        return PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                               error_code=ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        log_.delete_records(offset)
    except StorageError as e:
        return PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=e.error_code)
    partition.wake()
    return PartitionResult(partition_index=p.partition_index, low_watermark=log_.log_start_offset,
                           error_code=ErrorCode.NONE)


@handler(ApiKey.DELETE_RECORDS, 0, 2)
async def handle(ctx, request):
    topics = []
    for t in request.topics:
        if ctx.authorize(DELETE, TOPIC, t.name):
            partitions = [delete_before(ctx, t.name, p) for p in t.partitions]
        else:
            partitions = [PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                          error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions]
        topics.append(TopicResult(name=t.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
