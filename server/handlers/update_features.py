"""UpdateFeatures (key 57), v0-2: upgrade or downgrade finalized feature levels (KIP-584, KIP-778).
ALTER on the cluster. A single broker decides as Kafka 4.4's controller does (QuorumController.
updateFeatures, FeatureControlManager: coordinator/feature_control.py): all the updates or none, the
first invalid one's INVALID_UPDATE_VERSION and message for the whole request; v0 and v1 list each
feature's result on success, v2 none. The new levels are kept in the metadata image and take effect
at once: ApiVersions lists them with a new epoch, the APIs of a feature at level 0 answer
UNSUPPORTED_VERSION (server/features.py). v0's AllowDowngrade is ignored, as Kafka 4.4 ignores it
(the upgrade type is v1's field: a v0 downgrade is refused).

In a ZooKeeper cluster, as Kafka 3.9's KafkaApis.handleUpdateFeatures and KafkaController: the
controller answers each feature on its own, and since a ZooKeeper-mode broker supports no feature,
refuses every update (INVALID_REQUEST); another broker answers NOT_CONTROLLER.
Deviations: in a ZooKeeper cluster v2 is served (Kafka 3.9: v0-1), and the /feature znode's levels
are taken as none (Kafka 3.9's controller writes none there either).
"""

from __future__ import annotations

from ...coordinator.feature_control import SAFE_DOWNGRADE, UPGRADE, update_features, zk_update_features
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER, CLUSTER
from . import ListenerType, handler

UpdateFeaturesResponse = response_class(ApiKey.UPDATE_FEATURES)
Result = UpdateFeaturesResponse.UpdatableFeatureResult
# Kafka's Errors.NONE.message(), which QuorumController puts in v0-1's results.
NONE_MESSAGE = "NONE"


@handler(ApiKey.UPDATE_FEATURES, 0, 2, forwarded=True)
async def handle(ctx, request):
    services = ctx.services
    if not ctx.authorize(ALTER, CLUSTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return UpdateFeaturesResponse(error_code=code, error_message=code.message, results=[])
    if services.listener_type == ListenerType.ZK_BROKER:
        return _zookeeper_mode(ctx, request)
    features = services.features
    updates = {u.feature: (u.max_version_level, u.upgrade_type) for u in request.feature_updates}
    result = update_features(features.finalized, features.supported, services.node_id, updates)
    if result.error_code != ErrorCode.NONE:
        return UpdateFeaturesResponse(
            error_code=result.error_code, results=[],
            error_message=f"The update failed for all features since the following feature had an error: "
                          f"{result.error_message}")
    if updates and not request.validate_only:
        # Kafka writes a record for each update, a level unchanged or not: its epoch moves either way.
        epoch = features.epoch + 1
        services.metadata.set_features(result.levels, epoch)
        features.finalize(result.levels, epoch)
    results = [Result(feature=u.feature, error_code=ErrorCode.NONE, error_message=NONE_MESSAGE)
               for u in request.feature_updates] if ctx.api_version <= 1 else []
    return UpdateFeaturesResponse(error_code=ErrorCode.NONE, error_message=None, results=results)


def _zookeeper_mode(ctx, request):
    controller = ctx.services.controller
    if controller is None or not controller.is_active:
        code = ErrorCode.NOT_CONTROLLER
        return UpdateFeaturesResponse(error_code=code, error_message=code.message, results=[])
    updates = [(u.feature, u.max_version_level,
                (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if ctx.api_version == 0 else u.upgrade_type)
               for u in request.feature_updates]
    # A ZooKeeper-mode broker supports no feature (Kafka 3.9's BrokerFeatures in ZooKeeper mode), so
    # no update succeeds and /feature is never written.
    errors, _ = zk_update_features({}, {}, updates)
    return UpdateFeaturesResponse(error_code=ErrorCode.NONE, error_message=None, results=[
        Result(feature=name, error_code=code, error_message=message) for name, (code, message) in errors.items()])
