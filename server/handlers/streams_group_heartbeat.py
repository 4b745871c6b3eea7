"""StreamsGroupHeartbeat (key 88), v0-1: a Kafka Streams client of a streams group (KIP-1071) joins
with its topology, heartbeats with the tasks it owns, or leaves (coordinator/streams_group_manager.py);
answered once the group's records are in `__consumer_offsets`. The internal topics (repartition,
changelog) the topology lacks are then created (GroupService.streams_group_heartbeat), as Kafka's
AutoTopicCreationManager creates them, if the sender may CREATE them. READ on the group, DESCRIBE on
the topology's topics. Served while streams.version is finalized (server/features.py).
TopologyDescriptionRequired is never set: Kafka sets it only with a topology description plugin
(coordinator/streams_topology_description.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import STREAMS_GROUPS
from ..security.authorizer import DESCRIBE, GROUP, READ, TOPIC
from . import handler

StreamsGroupHeartbeatResponse = response_class(ApiKey.STREAMS_GROUP_HEARTBEAT)


@handler(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, 1, feature=STREAMS_GROUPS)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return StreamsGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if request.topology is not None:
        names = {t for s in request.topology.subtopologies
                 for t in list(s.source_topics) + list(s.repartition_sink_topics)
                 + [i.name for i in list(s.repartition_source_topics) + list(s.state_changelog_topics)]}
        if len(ctx.authorized(DESCRIBE, TOPIC, names)) < len(names):
            return StreamsGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return await ctx.services.groups.streams_group_heartbeat(ctx, request)
