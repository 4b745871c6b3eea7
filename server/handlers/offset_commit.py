"""OffsetCommit (key 8), v0-9: commit a group's offsets. Follows KafkaApis.handleOffsetCommitRequest
and GroupMetadataManager (the group coordinator): READ on the group (else every partition gets
GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED); partitions of unknown
topics get UNKNOWN_TOPIC_OR_PARTITION here; the coordinator decides the rest and answers once the
offsets are appended to `__consumer_offsets`.
Deviations: v0-1 are served as in Kafka 3.9 (Kafka 4.0 removed them, KIP-896), and v0 commits go to
`__consumer_offsets` like every other version (Kafka's ZooKeeper mode kept them in ZooKeeper).
"""

from __future__ import annotations

import copy

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ, TOPIC
from . import handler

OffsetCommitResponse = response_class(ApiKey.OFFSET_COMMIT)


def split_known(ctx, request, topics_field: str = "topics", readable: set[str] | None = None):
    """A copy of `request` with only the partitions of existing topics (and `readable` ones, if
    given), and the (topic, partition) pairs left out."""
    image = ctx.services.metadata_cache.topics
    known = copy.copy(request)
    unknown = set()
    kept = []
    for topic in getattr(request, topics_field):
        info = image.get(topic.name)
        partitions = []
        for p in topic.partitions:
            if (info is not None and 0 <= p.partition_index < info.num_partitions
                    and (readable is None or topic.name in readable)):
                partitions.append(p)
            else:
                unknown.add((topic.name, p.partition_index))
        if partitions:
            kept_topic = copy.copy(topic)
            kept_topic.partitions = partitions
            kept.append(kept_topic)
    setattr(known, topics_field, kept)
    return known, unknown


def errors_by_partition(topics) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in topics for p in t.partitions}


@handler(ApiKey.OFFSET_COMMIT, 0, 9)
async def handle(ctx, request):
    errors: dict[tuple[str, int], int]  # (topic, partition) -> error code
    if not ctx.authorize(READ, GROUP, request.group_id):
        errors = {(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                  for t in request.topics for p in t.partitions}
    else:
        readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics])
        known, unknown = split_known(ctx, request, readable=readable)
        errors = {(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                  for t in request.topics if t.name not in readable for p in t.partitions}
        if known.topics or not unknown:
            response = await ctx.services.groups.submit(ctx, GroupCoordinator.offset_commit, known.group_id, known)
            errors.update(errors_by_partition(response.topics))
    Topic = OffsetCommitResponse.OffsetCommitResponseTopic
    Partition = OffsetCommitResponse.OffsetCommitResponsePartition
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        Topic(name=t.name, partitions=[Partition(
            partition_index=p.partition_index,
            error_code=errors.get((t.name, p.partition_index), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            for p in t.partitions])
        for t in request.topics])
