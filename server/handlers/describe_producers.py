"""DescribeProducers (key 61), v0: the producers a partition's log tracks (id, epoch, last sequence
and timestamp, coordinator epoch, where an open transaction starts). Follows
KafkaApis.handleDescribeProducersRequest and ReplicaManager.activeProducerState: READ on the topic.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import READ, TOPIC
from . import handler

DescribeProducersResponse = response_class(ApiKey.DESCRIBE_PRODUCERS)
TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


def partition_response(ctx, topic: str, index: int, readable: set[str]):
    if topic not in readable:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 active_producers=[])
    partition = ctx.services.replica_manager.get(topic, index)
    if partition is None:
        return PartitionResponse(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 active_producers=[])
    producers = [ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                               last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                               current_txn_start_offset=(-1 if e.current_txn_first_offset is None
                                                         else e.current_txn_first_offset))
                 for e in partition.log.active_producers()]
    return PartitionResponse(partition_index=index, error_code=ErrorCode.NONE, active_producers=producers)


@handler(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
async def handle(ctx, request):
    readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics])
    return DescribeProducersResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[partition_response(ctx, t.name, index, readable)
                                               for index in t.partition_indexes])
        for t in request.topics])
