"""StreamsGroupDescribe (key 89), v0-1: streams groups (KIP-1071) with their epochs, assignor
(`sticky`), topology (as configured against the topics, else as sent) and members with their
current and target tasks; groups of other types are GROUP_ID_NOT_FOUND ("Group g is not a streams
group."). DESCRIBE on each group, DESCRIBE on the topics of its topology. Served while
streams.version is finalized (server/features.py).
"""

from __future__ import annotations

from ...coordinator.streams_topology_description import NOT_STORED
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import STREAMS_GROUPS
from ..security.authorizer import DESCRIBE, GROUP, TOPIC
from . import handler

StreamsGroupDescribeResponse = response_class(ApiKey.STREAMS_GROUP_DESCRIBE)
DescribedGroup = StreamsGroupDescribeResponse.DescribedGroup


@handler(ApiKey.STREAMS_GROUP_DESCRIBE, 0, 1, feature=STREAMS_GROUPS)
async def handle(ctx, request):
    allowed = ctx.authorized(DESCRIBE, GROUP, request.group_ids)
    groups = []
    for group_id in request.group_ids:
        if group_id not in allowed:
            groups.append(DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        await ctx.services.groups.refresh_topics()
        [group] = ctx.services.groups.coordinator_for(group_id).streams.describe([group_id])
        topics: set[str] = set()
        if group.topology is not None:
            for s in group.topology.subtopologies or ():
                topics.update(s.source_topics, s.repartition_sink_topics,
                              (t.name for t in list(s.repartition_source_topics) + list(s.state_changelog_topics)))
        if group.error_code == ErrorCode.NONE and len(ctx.authorized(DESCRIBE, TOPIC, topics)) < len(topics):
            group = DescribedGroup(group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                   error_message="The described group uses topics that the client is not "
                                                 "authorized to describe.")
        elif group.error_code == ErrorCode.NONE:
            if request.include_authorized_operations:
                group.authorized_operations = ctx.authorized_operations(GROUP, group_id)
            if request.include_topology_description:
                # Kafka without a description plugin (its default, Samsa's only mode)
                group.topology_description_status = NOT_STORED
        groups.append(group)
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=groups)
