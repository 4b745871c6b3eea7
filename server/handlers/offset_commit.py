"""OffsetCommit (key 8), v0-10: commit a group's offsets. Follows KafkaApis.handleOffsetCommitRequest
and GroupMetadataManager (the group coordinator): READ on the group (else every partition gets
GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED); partitions of unknown
topics get UNKNOWN_TOPIC_OR_PARTITION here; the coordinator decides the rest and answers once the
offsets are appended to `__consumer_offsets`. v10 (KIP-848) names topics by id: an id this broker
does not know gets UNKNOWN_TOPIC_ID; offsets are kept by topic name, as in Kafka. The answer has one
topic per name (per id from v10), as Kafka's OffsetCommitResponse.Builder merges them.
Deviations: v0-1 are served as in Kafka 3.9 (Kafka 4.0 removed them, KIP-896), and v0 commits go to
`__consumer_offsets` like every other version (Kafka's ZooKeeper mode kept them in ZooKeeper).
"""

from __future__ import annotations

import copy
from typing import Any

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import GROUP, READ, TOPIC
from . import handler

OffsetCommitResponse = response_class(ApiKey.OFFSET_COMMIT)
Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = OffsetCommitResponse.OffsetCommitResponsePartition


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


class ResponseBuilder:
    """Kafka's OffsetCommitResponse.Builder: one response topic per topic name (per topic id from v10),
    in the order first met, the partitions the handler refuses first, then the coordinator's merged in."""

    def __init__(self, by_id: bool) -> None:
        self.by_id = by_id
        self.topics: dict[object, Any] = {}  # OffsetCommitResponseTopic by name or id

    def add_partitions(self, topic_id, name: str, indexes, code: int) -> None:
        key = topic_id if self.by_id else name
        topic = self.topics.get(key)
        if topic is None:
            topic = self.topics[key] = Topic(name=name, topic_id=topic_id, partitions=[])
        topic.partitions += [Partition(partition_index=i, error_code=code) for i in indexes]

    def merge(self, topics) -> None:
        if not self.topics:  # Kafka takes the coordinator's answer as it is
            self.topics = {object(): t for t in topics}
            return
        for new in topics:
            key = new.topic_id if self.by_id else new.name
            if key in self.topics:
                self.topics[key].partitions += new.partitions
            else:
                self.topics[key] = new

    def build(self):
        return OffsetCommitResponse(throttle_time_ms=0, topics=list(self.topics.values()))


@handler(ApiKey.OFFSET_COMMIT, 0, 10)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return OffsetCommitResponse(throttle_time_ms=0, topics=[
            Topic(name=t.name, topic_id=t.topic_id, partitions=[
                Partition(partition_index=p.partition_index, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
                for p in t.partitions])
            for t in request.topics])
    by_id = ctx.api_version >= 10
    image = ctx.services.metadata_cache
    if by_id:  # v10 names topics by id alone: an unknown id leaves the name empty
        for t in request.topics:
            known = image.topics_by_id.get(t.topic_id)
            t.name = "" if known is None else known.name
    readable = ctx.authorized(READ, TOPIC, [t.name for t in request.topics])
    builder = ResponseBuilder(by_id)
    kept = []  # the topics, with their existing partitions, the coordinator gets
    for t in request.topics:
        indexes = [p.partition_index for p in t.partitions]
        info = image.topics.get(t.name)
        if by_id and not t.name:
            builder.add_partitions(t.topic_id, t.name, indexes, ErrorCode.UNKNOWN_TOPIC_ID)
        elif t.name not in readable:
            builder.add_partitions(t.topic_id, t.name, indexes, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif info is None:
            builder.add_partitions(t.topic_id, t.name, indexes, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            valid = [p for p in t.partitions if 0 <= p.partition_index < info.num_partitions]
            for p in t.partitions:
                if not 0 <= p.partition_index < info.num_partitions:
                    builder.add_partitions(t.topic_id, t.name, [p.partition_index],
                                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if valid:
                kept_topic = copy.copy(t)
                kept_topic.partitions = valid
                kept.append(kept_topic)
    if kept or not request.topics:
        known = copy.copy(request)
        known.topics = kept
        response = await ctx.services.groups.submit(ctx, GroupCoordinator.offset_commit, known.group_id, known)
        # The coordinator answers by name, topic for topic as it was asked.
        for asked, answered in zip(kept, response.topics):
            answered.topic_id = asked.topic_id
        builder.merge(response.topics)
    return builder.build()
