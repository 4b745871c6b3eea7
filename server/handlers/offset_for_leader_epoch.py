"""OffsetForLeaderEpoch (key 23), v0-4: where the log of a leader epoch ends on the leader (Kafka's
KafkaApis.handleOffsetForLeaderEpochRequest and Partition.lastOffsetForLeaderEpoch). A follower
asks it to truncate after a leader change (KIP-101, KIP-279); a consumer to validate its position
after one (KIP-320). The answer is the largest epoch <= the one asked for and the start offset of
the epoch after it (the log end offset for the latest), or -1/-1 when the leader knows no such
epoch. current_leader_epoch is checked as Fetch checks it (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH);
only the leader answers (NOT_LEADER_OR_FOLLOWER), except to the debugging replica id -2.
"""

from __future__ import annotations

from ...storage.errors import StorageError
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION, DESCRIBE, TOPIC
from . import handler

OffsetForLeaderEpochResponse = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset
DEBUGGING_REPLICA_ID = -2


def epoch_end_offset(ctx, topic: str, p, only_from_leader: bool):
    partition = ctx.services.replica_manager.get(topic, p.partition)
    if partition is None:
        return EpochEndOffset(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition=p.partition)
    code = partition.check_leader(p.current_leader_epoch) if only_from_leader else \
        partition.check_leader_epoch(p.current_leader_epoch)
    if code != ErrorCode.NONE:
        return EpochEndOffset(error_code=code, partition=p.partition)
    try:
        epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
    except StorageError as e:
        return EpochEndOffset(error_code=e.error_code, partition=p.partition)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset)


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, 4)
async def handle(ctx, request):
    replica_id = request.replica_id if ctx.api_version >= 3 else -1
    names = [t.topic for t in request.topics]
    if ctx.services.authorizer is None or ctx.authorize(CLUSTER_ACTION, CLUSTER):
        authorized = set(names)
    else:
        authorized = ctx.authorized(DESCRIBE, TOPIC, set(names))
    only_from_leader = replica_id != DEBUGGING_REPLICA_ID
    topics = []
    for t in request.topics:
        if t.topic in authorized:
            parts = [epoch_end_offset(ctx, t.topic, p, only_from_leader) for p in t.partitions]
        else:
            parts = [EpochEndOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition)
                     for p in t.partitions]
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
