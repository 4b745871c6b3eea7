"""ListConfigResources (key 74), v0-1; v0 is Kafka 3.x's ListClientMetricsResources (the client-metrics
resources only), v1 (KIP-1142, Kafka 4.1) lists the config resources of the types asked for (none:
every type it knows): groups with configs, client-metrics resources, brokers (BROKER_LOGGER and
BROKER), topics, in Kafka's order. A type v1 does not know is UNSUPPORTED_VERSION for the request.
Follows KafkaApis.handleListConfigResources: DESCRIBE_CONFIGS on the cluster.
Served as a KRaft-mode broker serves it: not in a ZooKeeper cluster (Kafka 3.9's ZooKeeper mode
has no client-metrics resources).
GROUP resources are the groups with configs (server/config/group_configs.py).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE_CONFIGS
from ..config.config_resources import ResourceType
from . import handler

ListConfigResourcesResponse = response_class(ApiKey.LIST_CONFIG_RESOURCES)
ConfigResource = ListConfigResourcesResponse.ConfigResource

# ListConfigResourcesRequest.supportedResourceTypes, by version.
V0_TYPES = (ResourceType.CLIENT_METRICS,)
V1_TYPES = (ResourceType.TOPIC, ResourceType.BROKER, ResourceType.BROKER_LOGGER, ResourceType.CLIENT_METRICS,
            ResourceType.GROUP)


@handler(ApiKey.LIST_CONFIG_RESOURCES, 0, 1, kraft_only=True)
async def handle(ctx, request):
    if not ctx.authorize(DESCRIBE_CONFIGS, CLUSTER):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    supported = V0_TYPES if ctx.api_version == 0 else V1_TYPES
    wanted = set(request.resource_types if ctx.api_version >= 1 and request.resource_types else supported)
    if not wanted <= set(supported):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION)
    services = ctx.services
    found: list[tuple[str, int]] = []
    if ResourceType.GROUP in wanted:
        found += [(name, ResourceType.GROUP) for name in services.group_configs.group_ids()]
    if ResourceType.CLIENT_METRICS in wanted:
        found += [(name, ResourceType.CLIENT_METRICS) for name in services.client_telemetry.subscription_names()]
    brokers = [str(services.node_id)]
    for kind in (ResourceType.BROKER_LOGGER, ResourceType.BROKER):
        if kind in wanted:
            found += [(name, kind) for name in brokers]
    if ResourceType.TOPIC in wanted:
        found += [(name, ResourceType.TOPIC) for name in services.metadata_cache.topics]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[
        ConfigResource(resource_name=name, resource_type=kind) for name, kind in found])
