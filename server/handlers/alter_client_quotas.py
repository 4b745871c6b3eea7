"""AlterClientQuotas (key 49), v0-1: set or remove client quotas, applied at once to clients already
connected; each entry succeeds or fails whole, all successful ones are stored in one step. Follows
ControllerApis.handleAlterClientQuotas and ClientQuotaControlManager: ALTER_CONFIGS on the cluster.
In a ZooKeeper cluster the quotas are written to /config/{users,clients,ips} with a /config/changes
notification, as Kafka 3.9's ZkAdminManager.alterClientQuotas (server/zookeeper/shared_metadata.py).
Deviations: none known.
"""

from __future__ import annotations

from ...coordinator.client_quotas import QuotaRequestError, describe_entity, plan_alteration
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security.authorizer import ALTER_CONFIGS, CLUSTER
from . import handler
from .describe_client_quotas import CLUSTER_AUTHORIZATION_FAILED_MESSAGE

AlterClientQuotasResponse = response_class(ApiKey.ALTER_CLIENT_QUOTAS)
Entry = AlterClientQuotasResponse.EntryData
EntityData = AlterClientQuotasResponse.EntityData


@handler(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, forwarded=True)
async def handle(ctx, request):
    services = ctx.services
    authorized = ctx.authorize(ALTER_CONFIGS, CLUSTER)
    changes = {}
    results = []
    for entry in request.entries:
        parts = [(e.entity_type, e.entity_name) for e in entry.entity]
        code: int = ErrorCode.NONE
        message: str | None = None
        try:
            if not authorized:
                raise QuotaRequestError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED_MESSAGE)
            entity, entity_changes = plan_alteration(parts, [(op.key, op.value, op.remove) for op in entry.ops])
            if entity in changes:
                raise QuotaRequestError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {describe_entity(entity)}")
            changes[entity] = entity_changes
        except QuotaRequestError as e:
            code, message = e.code, str(e)
        results.append(Entry(error_code=code, error_message=message,
                             entity=[EntityData(entity_type=kind, entity_name=name) for kind, name in parts]))
    if changes and not request.validate_only:
        await services.admin.alter_client_quotas(services, changes)
        services.quotas.refresh()
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=results)
