"""OffsetFetch (key 9): a group's committed offsets, every version: v0-7 ask for one group, v8+ for
several (each with its own error); topics null (v2+) means every partition with an offset."""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
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


@handler(ApiKey.OFFSET_FETCH)
async def handle(ctx, request):
    coordinator = ctx.broker.groups.coordinator
    info = ctx.broker.groups.request_info(ctx)
    if ctx.api_version < 8:
        topics = None if request.topics is None else [(t.name, t.partition_indexes) for t in request.topics]
        group = coordinator.fetch_offsets(info, request.group_id, topics, request.require_stable)
        if ctx.api_version < 2 and group.error_code != ErrorCode.NONE:
            # No top-level error before v2: every partition asked for carries it.
            group.topics = [group_topic(name, indexes, group.error_code) for name, indexes in topics or []]
        return one_group_response(group)
    groups = []
    for wanted in request.groups:
        topics = None if wanted.topics is None else [(t.name, t.partition_indexes) for t in wanted.topics]
        groups.append(coordinator.fetch_offsets(info, wanted.group_id, topics, request.require_stable,
                                                wanted.member_id, wanted.member_epoch))
    return OffsetFetchResponse(throttle_time_ms=0, groups=groups)


def group_topic(name: str, indexes: list[int], code: int):
    Topics = OffsetFetchResponse.OffsetFetchResponseTopics
    Partitions = OffsetFetchResponse.OffsetFetchResponsePartitions
    return Topics(name=name, partitions=[Partitions(partition_index=i, committed_offset=-1, committed_leader_epoch=-1,
                                                    metadata="", error_code=code) for i in indexes])
