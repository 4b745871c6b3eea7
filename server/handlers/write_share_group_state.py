"""WriteShareGroupState (key 85), v0-1, an inter-broker API of share groups (KIP-932): a share
partition's leader records its changed state batches (v1: with the delivery complete count,
KIP-1226), as a ShareUpdate or, every share.coordinator.snapshot.update.records.per.snapshot
updates, a ShareSnapshot. Answered by the share coordinator (server/coordinators/share_service.py).
Follows KafkaApis.handleWriteShareGroupStateRequest: CLUSTER_ACTION on the cluster, else every
partition CLUSTER_AUTHORIZATION_FAILED. Served whatever share.version's level, as Kafka 4.4 serves
it. Deviations: Kafka's schema lists only KRaft brokers' listeners; a Samsa broker of a ZooKeeper
cluster serves it too, its share coordinator and persisters talking to each other with it.
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey
from ..coordinators.share_service import global_error_response
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from . import handler


@handler(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1)
async def handle(ctx, request):
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return global_error_response(ApiKey.WRITE_SHARE_GROUP_STATE, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return await ctx.services.share_coordinator.write_state(request)
