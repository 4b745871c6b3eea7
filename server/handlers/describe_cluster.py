"""DescribeCluster (key 60), v0-2: this broker, as the cluster's only broker and its controller.
Follows KafkaApis.handleDescribeCluster: cluster authorized operations only with DESCRIBE on the
cluster; v1 asking for controller endpoints gets UNSUPPORTED_ENDPOINT_TYPE; v2 (KIP-1073) may ask for fenced
brokers too, each broker saying whether it is fenced: no broker Samsa knows of is fenced (a single
broker serves, and a ZooKeeper cluster's are the live brokers), so every one is listed unfenced.
Deviations: none known (a single broker: controller_id is this broker's id; in a ZooKeeper cluster
the live brokers and the controller of the last UpdateMetadata).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from . import handler
from .metadata import AUTHORIZED_OPERATIONS_OMITTED, brokers_and_controller, cluster_authorized_operations

DescribeClusterResponse = response_class(ApiKey.DESCRIBE_CLUSTER)
BrokerEntry = DescribeClusterResponse.DescribeClusterBroker
BROKERS_ENDPOINT = 1


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 2)
async def handle(ctx, request):
    services = ctx.services
    if ctx.api_version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message="The broker only handles BROKER endpoints",
                                       endpoint_type=request.endpoint_type, cluster_id=services.cluster_id)
    brokers, controller_id = brokers_and_controller(ctx)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, endpoint_type=BROKERS_ENDPOINT,
        cluster_id=services.cluster_id, controller_id=controller_id,
        brokers=[BrokerEntry(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False) for b in brokers],
        cluster_authorized_operations=(cluster_authorized_operations(ctx) if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
