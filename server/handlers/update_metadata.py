"""UpdateMetadata (key 6), v0-8: the controller of a ZooKeeper cluster tells this broker the live
brokers and the partitions' leaders and ISRs (server/zk_metadata_cache.py keeps them). Served in
cluster mode only. Follows Kafka 3.9's KafkaApis.handleUpdateMetadataRequest and
ReplicaManager.maybeUpdateMetadataCache: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED
otherwise); a broker epoch older than this broker's registration (v5+, -1 meaning unknown):
STALE_BROKER_EPOCH; a controller epoch older than the latest seen: STALE_CONTROLLER_EPOCH; neither
changes the cache.
Deviations: a KRaft controller's request (migration, isKRaftController) is treated as a ZooKeeper
controller's; the answer is not exempt from request quotas; deleted partitions are not yet handed to
the group coordinator (its offsets stay until the topic's local log goes).
"""

from __future__ import annotations

import logging

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..authorizer import CLUSTER, CLUSTER_ACTION
from ..zk_metadata_cache import StaleControllerEpoch
from . import handler

log = logging.getLogger("samsa.update_metadata")
UpdateMetadataResponse = response_class(ApiKey.UPDATE_METADATA)
UNKNOWN_BROKER_EPOCH = -1  # Kafka's AbstractControlRequest.UNKNOWN_BROKER_EPOCH


def is_broker_epoch_stale(in_request: int, current: int) -> bool:
    """Kafka's ZkSupport.isBrokerEpochStale: only an older epoch is stale; a newer one is possible
    when the controller saw this broker's new registration before the broker learnt its czxid."""
    return in_request != UNKNOWN_BROKER_EPOCH and in_request < current


@handler(ApiKey.UPDATE_METADATA, 0, 8, cluster_only=True)
async def handle(ctx, request):
    services = ctx.services
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    broker_epoch = request.broker_epoch if ctx.api_version >= 5 else UNKNOWN_BROKER_EPOCH
    current = services.zookeeper.broker_epoch
    if is_broker_epoch_stale(broker_epoch, current):
        log.info("Received UpdateMetadata request with broker epoch %d smaller than the current broker epoch %d "
                 "from controller %d with epoch %d.", broker_epoch, current, request.controller_id,
                 request.controller_epoch)
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    try:
        services.zk_metadata.update_metadata(request, ctx.api_version, ctx.correlation_id)
    except StaleControllerEpoch as e:
        return UpdateMetadataResponse(error_code=e.error_code)
    return UpdateMetadataResponse(error_code=ErrorCode.NONE)
