"""OffsetFetch (key 9), v0-9: a group's committed offsets; v0-7 ask for one group, v8+ for several
(each with its own error); topics null (v2+) means every partition with an offset. Follows
KafkaApis.handleOffsetFetchRequest and GroupMetadataManager: DESCRIBE on the group, and on a topic:
left out of "every partition", TOPIC_AUTHORIZATION_FAILED when asked for.
Deviations: v0 is served as in Kafka 3.9 (Kafka 4.0 removed it, KIP-896), reading
`__consumer_offsets` like later versions (Kafka's ZooKeeper mode read v0 offsets from ZooKeeper).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from . import handler

OffsetFetchResponse = response_class(ApiKey.OFFSET_FETCH)


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


def fetch_offsets(ctx, info, group_id: str, topics: list[tuple[str, list[int]]] | None, *args):
    """One group's result (the v8+ shape), with the checks of Kafka's KafkaApis.fetchOffsets."""
    Group = OffsetFetchResponse.OffsetFetchResponseGroup
    if not ctx.authorize(DESCRIBE, GROUP, group_id):
        return Group(group_id=group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.services.groups.coordinator_for(group_id)
    if topics is None:
        group = coordinator.fetch_offsets(info, group_id, None, *args)
        visible = ctx.authorized(DESCRIBE, TOPIC, [t.name for t in group.topics], log_if_denied=False)
        group.topics = [t for t in group.topics if t.name in visible]
        return group
    visible = ctx.authorized(DESCRIBE, TOPIC, [name for name, _ in topics])
    group = coordinator.fetch_offsets(info, group_id, [t for t in topics if t[0] in visible], *args)
    if group.error_code == ErrorCode.NONE:
        group.topics += [group_topic(name, indexes, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                         for name, indexes in topics if name not in visible]
    return group


@handler(ApiKey.OFFSET_FETCH, 0, 9)
async def handle(ctx, request):
    info = ctx.services.groups.request_info(ctx)
    if ctx.api_version < 8:
        topics = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
        group = fetch_offsets(ctx, info, request.group_id, topics, request.require_stable)
        if ctx.api_version < 2 and group.error_code != ErrorCode.NONE:
            # No top-level error before v2: every partition asked for carries it.
            group.topics = [group_topic(name, indexes, group.error_code) for name, indexes in topics or []]
        return one_group_response(group)
    groups = []
    for wanted in request.groups:
        topics = None if wanted.topics is None else [(t.name, t.partition_indexes) for t in wanted.topics]
        groups.append(fetch_offsets(ctx, info, wanted.group_id, topics, request.require_stable,
                                    wanted.member_id, wanted.member_epoch))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def group_topic(name: str, indexes: list[int], code: int):
    Topics = OffsetFetchResponse.OffsetFetchResponseTopics
    Partitions = OffsetFetchResponse.OffsetFetchResponsePartitions
    return Topics(name=name, partitions=[Partitions(partition_index=i, committed_offset=-1, committed_leader_epoch=-1,
                                                    metadata="", error_code=code) for i in indexes])
