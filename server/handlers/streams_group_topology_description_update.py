"""StreamsGroupTopologyDescriptionUpdate (key 93), v0 (KIP-1331): a Kafka Streams client pushes its
topology description when a heartbeat asked for it (TopologyDescriptionRequired). Kafka keeps
descriptions in a plugin and, without one (its default), refuses every update UNSUPPORTED_VERSION;
Samsa loads no plugin, so it answers as Kafka does without one
(coordinator/streams_topology_description.py). READ on the group. Served while streams.version is
finalized (server/features.py).
"""

from __future__ import annotations

from ...coordinator.streams_topology_description import validate_update
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..features import STREAMS_GROUPS
from ..security.authorizer import GROUP, READ
from . import handler

StreamsGroupTopologyDescriptionUpdateResponse = response_class(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)


@handler(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0, 0, feature=STREAMS_GROUPS)
async def handle(ctx, request):
    if not ctx.authorize(READ, GROUP, request.group_id):
        return StreamsGroupTopologyDescriptionUpdateResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = validate_update(request.group_id, request.member_id, request.topology_description,
                              plugin_configured=False)
    assert refused is not None  # without a plugin every update is refused before it reaches the group
    error_code, error_message = refused
    return StreamsGroupTopologyDescriptionUpdateResponse(error_code=error_code, error_message=error_message)
