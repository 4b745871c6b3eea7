"""DescribeClientQuotas (key 48), v0-1: the configured client quotas a filter matches (users, client
ids, their defaults, IPs). Follows KafkaApis.handleDescribeClientQuotasRequest and
ClientQuotaControlManager / ClientQuotasImage.describe: DESCRIBE_CONFIGS on the cluster.
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.client_quotas import QuotaRequestError, describe
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import CLUSTER, DESCRIBE_CONFIGS
from . import handler

DescribeClientQuotasResponse = response_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
Entry = DescribeClientQuotasResponse.EntryData
EntityData = DescribeClientQuotasResponse.EntityData
ValueData = DescribeClientQuotasResponse.ValueData
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."  # Errors.CLUSTER_AUTHORIZATION_FAILED's


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
async def handle(ctx, request):
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        if not ctx.authorize(DESCRIBE_CONFIGS, CLUSTER):
            raise QuotaRequestError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED_MESSAGE)
        found = describe(ctx.services.metadata_cache.client_quotas, components, request.strict)
    except QuotaRequestError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.code, error_message=str(e), entries=None)
    entries = [Entry(entity=[EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                     values=[ValueData(key=key, value=value) for key, value in sorted(values.items())])
               for entity, values in found]
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
                                        entries=entries)
