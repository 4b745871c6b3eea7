"""DescribeTopicPartitions (key 75), v0: topics and partitions, paged by a cursor (KIP-966). Follows
KafkaApis.handleDescribeTopicPartitionsRequest (DescribeTopicPartitionsRequestHandler): DESCRIBE on
each topic; unauthorized topics are left out of a listing.
As Kafka's KRaftMetadataCache.describeTopicResponse, a partition's error code is left at NONE (a
leader that is not alive on the listener is -1) and its replicas and ISR are not filtered; the
eligible leader replicas and last known ELR (KIP-966) are the partition registration's in a KRaft
cluster. A single broker is every partition's leader, replica and ISR, with no ELR. In a ZooKeeper
cluster (where Kafka 3.9 does not serve this API) the partitions are the controller's last
UpdateMetadata, without ELR.
Deviations: none known.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, TOPIC
from . import handler

Response = response_class(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
TopicEntry = Response.DescribeTopicPartitionsResponseTopic
PartitionEntry = Response.DescribeTopicPartitionsResponsePartition
Cursor = Response.Cursor


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
async def handle(ctx, request):
    services = ctx.services
    image = services.metadata_cache
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(image.topics)
    start_topic, start_partition = "", 0
    if request.cursor is not None:
        start_topic, start_partition = request.cursor.topic_name, request.cursor.partition_index
    names = [name for name in names if name >= start_topic]
    # Unauthorized topics are left out of a listing, and answered without disclosing whether they exist.
    allowed = ctx.authorized(DESCRIBE, TOPIC, names, log_if_denied=bool(request.topics))
    budget = request.response_partition_limit
    topics, next_cursor = [], None
    for name in names:
        if name not in allowed:
            if request.topics:
                topics.append(TopicEntry(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[]))
            continue
        topic = image.topics.get(name)
        if topic is None:
            topics.append(TopicEntry(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[],
                                     topic_authorized_operations=ctx.authorized_operations(TOPIC, name)))
            continue
        first = start_partition if name == start_topic else 0
        partitions = []
        states = {p.partition_index: p for p in image.partition_metadata(name, ctx.listener) or ()}
        for index in range(first, topic.num_partitions):
            if budget == 0:
                next_cursor = Cursor(topic_name=name, partition_index=index)
                break
            budget -= 1
            p = states[index]
            partitions.append(PartitionEntry(
                error_code=ErrorCode.NONE, partition_index=index, leader_id=p.leader_id,
                leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
                eligible_leader_replicas=p.eligible_leader_replicas, last_known_elr=p.last_known_elr,
                offline_replicas=p.offline_replicas))
        topics.append(TopicEntry(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                 is_internal=topic.is_internal, partitions=partitions,
                                 topic_authorized_operations=ctx.authorized_operations(TOPIC, name)))
        if next_cursor is not None:
            break
    return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)
