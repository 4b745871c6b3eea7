"""ConsumerGroupHeartbeat (key 68), v0-1: a member of a KIP-848 consumer group joins, heartbeats,
acknowledges its assignment or leaves (coordinator/consumer_group_manager.py); answered once the
group's records are in `__consumer_offsets`. Follows GroupMetadataManager.consumerGroupHeartbeat:
READ on the group, DESCRIBE on the subscribed topics. v1: regex subscriptions (KIP-848; a regex
resolves to the topics it matches, internal ones too, that the sender may DESCRIBE) and
client-generated member ids (KIP-1082).
Deviations: server assignors `uniform` and `range` only; no online upgrade of a classic group with
members (GROUP_ID_NOT_FOUND); UNSUPPORTED_VERSION when the consumer protocol is disabled.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import GroupCoordinator
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import DESCRIBE, GROUP, READ, TOPIC
from ..coordinators.consumer_groups import consumer_protocol_enabled
from ..features import CONSUMER_GROUPS
from . import handler

ConsumerGroupHeartbeatResponse = response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, feature=CONSUMER_GROUPS)
async def handle(ctx, request):
    if not consumer_protocol_enabled(ctx.services.config.get):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(READ, GROUP, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = request.subscribed_topic_names or []
    if len(ctx.authorized(DESCRIBE, TOPIC, names)) < len(set(names)):
        # Kafka's answer: a member may not learn of topics it cannot describe.
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return await ctx.services.groups.submit(ctx, GroupCoordinator.consumer_group_heartbeat, request.group_id, request)
