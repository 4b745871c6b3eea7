"""UpdateMetadata (key 6), v0-8: the controller of a ZooKeeper cluster tells this broker the live
brokers and the partitions' leaders and ISRs (server/zookeeper/metadata_cache.py keeps them). Served in
cluster mode only. Follows Kafka 3.9's KafkaApis.handleUpdateMetadataRequest and
ReplicaManager.maybeUpdateMetadataCache: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED
otherwise); a broker epoch older than this broker's registration (v5+, -1 meaning unknown):
STALE_BROKER_EPOCH; a controller epoch older than the latest seen: STALE_CONTROLLER_EPOCH; neither
changes the cache.
Topics whose last partitions it deletes (leader -2) lose their share partitions' state in
`__share_group_state` on the brokers coordinating it, before the answer goes (the share
coordinator's onTopicsDeleted, as KRaft brokers call it on a topic's deletion: Kafka 3.9 has no
share groups).
Topics created, deleted or grown anywhere in the cluster are told to the group coordinators here
(the replica manager's on_topics_changed, which only this broker's own changes call otherwise),
so that a consumer group subscribed to one assigns its partitions.
Deviations: a KRaft controller's request (migration, isKRaftController) is treated as a ZooKeeper
controller's; the answer is not exempt from request quotas; deleted partitions are not yet handed to
the group coordinator (its offsets stay until the topic's local log goes).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from ..control_plane import UNKNOWN_BROKER_EPOCH
from ..metadata.cache import topic_layout
from . import handler

UpdateMetadataResponse = response_class(ApiKey.UPDATE_METADATA)


@handler(ApiKey.UPDATE_METADATA, 0, 8, cluster_only=True)
async def handle(ctx, request):
    services = ctx.services
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = request.broker_epoch if ctx.api_version >= 5 else UNKNOWN_BROKER_EPOCH
    if services.control_plane.is_broker_epoch_stale(broker_epoch, "UpdateMetadata", request):
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    layout = topic_layout(services.metadata_cache.topics)
    code, deleted = services.control_plane.update_metadata(request, ctx.api_version, ctx.correlation_id)
    if topic_layout(services.metadata_cache.topics) != layout:
        services.replica_manager.on_topics_changed()
    if deleted:
        await services.share_coordinator.topics_deleted(set(deleted.values()))
    return UpdateMetadataResponse(error_code=code)
