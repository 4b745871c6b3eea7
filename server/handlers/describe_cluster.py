"""DescribeCluster (key 60), v0-1: this broker, as the cluster's only broker and its controller.
Follows KafkaApis.handleDescribeCluster: cluster authorized operations only with DESCRIBE on the
cluster; v1 asking for controller endpoints gets UNSUPPORTED_ENDPOINT_TYPE.
Deviations: none known (a single broker: controller_id is this broker's id).
"""

from __future__ import annotations

from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from . import handler
from .metadata import AUTHORIZED_OPERATIONS_OMITTED, cluster_authorized_operations

DescribeClusterResponse = response_class(ApiKey.DESCRIBE_CLUSTER)
BrokerEntry = DescribeClusterResponse.DescribeClusterBroker
BROKERS_ENDPOINT = 1


@handler(ApiKey.DESCRIBE_CLUSTER, 0, 1)
async def handle(ctx, request):
    services = ctx.services
    if ctx.api_version >= 1 and request.endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message="The broker only handles BROKER endpoints",
                                       endpoint_type=request.endpoint_type, cluster_id=services.cluster_id)
    me = services.broker_info(ctx.listener)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, endpoint_type=BROKERS_ENDPOINT,
        cluster_id=services.cluster_id, controller_id=services.node_id,
        brokers=[BrokerEntry(broker_id=me.node_id, host=me.host, port=me.port, rack=me.rack)],
        cluster_authorized_operations=(cluster_authorized_operations(ctx) if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_OMITTED),
    )
