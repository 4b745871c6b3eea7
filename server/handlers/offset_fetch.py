"""OffsetFetch (key 9), v0-10: a group's committed offsets; v0-7 ask for one group, v8+ for several
(each with its own error); topics null (v2+) means every partition with an offset. Follows
KafkaApis.handleOffsetFetchRequest and GroupMetadataManager: DESCRIBE on the group, and on a topic:
left out of "every partition", TOPIC_AUTHORIZATION_FAILED when asked for. v10 (KIP-848) names topics
by id: an id this broker does not know gets UNKNOWN_TOPIC_ID (after the coordinator's topics, with the
refused ones, as Kafka orders them); "every partition" lists the topics that still exist, by id.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896), reading
`__consumer_offsets` like later versions (Kafka's ZooKeeper mode read v0 offsets from ZooKeeper).
"""

from __future__ import annotations

import uuid

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from . import handler

OffsetFetchResponse = response_class(ApiKey.OFFSET_FETCH)
ZERO_UUID = uuid.UUID(int=0)


def one_group_response(group):
    """The v0-7 shape of one group's result."""
    Topic = OffsetFetchResponse.OffsetFetchResponseTopic
    Partition = OffsetFetchResponse.OffsetFetchResponsePartition
    return OffsetFetchResponse(throttle_time_ms=0, error_code=group.error_code, topics=[
        Topic(name=t.name, partitions=[Partition(partition_index=p.partition_index, committed_offset=p.committed_offset,
                                                 committed_leader_epoch=p.committed_leader_epoch, metadata=p.metadata,
                                                 error_code=p.error_code)
                                       for p in t.partitions])
        for t in group.topics])


def fetch_offsets(ctx, info, group_id: str, topics: list[tuple[str, list[int]]] | None, *args,
                  by_id: bool = False, topic_ids: list | None = None):
    """One group's result (the v8+ shape), with the checks of Kafka's KafkaApis.fetchOffsets.
    `by_id` (v10): topics named by id, `topic_ids` the id each of `topics` was asked by (a name is
    empty where the id is unknown)."""
    Group = OffsetFetchResponse.OffsetFetchResponseGroup
    if not ctx.authorize(DESCRIBE, GROUP, group_id):
        return Group(group_id=group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.services.groups.coordinator_for(group_id)
    if topics is None:
        group = coordinator.fetch_offsets(info, group_id, None, *args)
        visible = ctx.authorized(DESCRIBE, TOPIC, [t.name for t in group.topics], log_if_denied=False)
        group.topics = [t for t in group.topics if t.name in visible]
        if by_id:  # offsets are kept by name: a deleted topic's (no id any more) are not listed
            existing = ctx.services.metadata_cache.topics
            group.topics = [t for t in group.topics if t.name in existing]
            for t in group.topics:
                t.topic_id = existing[t.name].topic_id
        return group
    ids = topic_ids or [ZERO_UUID] * len(topics)
    unknown = [by_id and not name for name, _ in topics]
    visible = ctx.authorized(DESCRIBE, TOPIC, [name for (name, _), u in zip(topics, unknown) if not u])
    asked = [(t, i) for t, i, u in zip(topics, ids, unknown) if not u and t[0] in visible]
    group = coordinator.fetch_offsets(info, group_id, [t for t, _ in asked], *args)
    if group.error_code == ErrorCode.NONE:
        for answered, (_, topic_id) in zip(group.topics, asked):  # one answer per topic asked, in order
            answered.topic_id = topic_id
        group.topics += [group_topic(name, indexes, ErrorCode.UNKNOWN_TOPIC_ID if u
                                     else ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id)
                         for (name, indexes), topic_id, u in zip(topics, ids, unknown) if u or name not in visible]
    return group


@handler(ApiKey.OFFSET_FETCH, 0, 10)
async def handle(ctx, request):
    info = ctx.services.groups.request_info(ctx)
    if ctx.api_version < 8:
        topics = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
        group = fetch_offsets(ctx, info, request.group_id, topics, request.require_stable)
        if ctx.api_version < 2 and group.error_code != ErrorCode.NONE:
            # No top-level error before v2: every partition asked for carries it.
            group.topics = [group_topic(name, indexes, group.error_code) for name, indexes in topics or []]
        return one_group_response(group)
    by_id = ctx.api_version >= 10
    image = ctx.services.metadata_cache
    groups = []
    for wanted in request.groups:
        topics = topic_ids = None
        if wanted.topics is not None:
            if by_id:  # v10 names topics by id alone: an unknown id leaves the name empty
                for t in wanted.topics:
                    known = image.topics_by_id.get(t.topic_id)
                    t.name = "" if known is None else known.name
            topics = [(t.name, t.partition_indexes) for t in wanted.topics]
            topic_ids = [t.topic_id for t in wanted.topics]
        groups.append(fetch_offsets(ctx, info, wanted.group_id, topics, request.require_stable,
                                    wanted.member_id, wanted.member_epoch, by_id=by_id, topic_ids=topic_ids))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def group_topic(name: str, indexes: list[int], code: int, topic_id=ZERO_UUID):
    Topics = OffsetFetchResponse.OffsetFetchResponseTopics
    Partitions = OffsetFetchResponse.OffsetFetchResponsePartitions
    return Topics(name=name, topic_id=topic_id, partitions=[
        Partitions(partition_index=i, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=code)
        for i in indexes])
