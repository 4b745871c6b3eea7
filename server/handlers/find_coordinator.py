"""FindCoordinator (key 10), v0-6: the coordinator of a group, a transactional id or (v6, key type
SHARE, KIP-932) a share partition is the leader of the key's partition of `__consumer_offsets`,
`__transaction_state` or `__share_group_state`, as the AdminManager finds it
(server/metadata/admin_manager.py: the single broker leads every partition; a ZooKeeper cluster's
is the leader the controller last told, COORDINATOR_NOT_AVAILABLE without one, as Kafka 3.9's
getCoordinator); a missing coordinator topic is created on first need. v4+ asks for many keys at
once (KIP-699). Follows KafkaApis.handleFindCoordinatorRequest: DESCRIBE on the group or
transactional id; a share key ("groupId:topicId:partition", the share coordinator's brokers ask
for it) needs v6 (else INVALID_REQUEST), CLUSTER_ACTION on the cluster (else the whole request is
refused) and a valid key (else INVALID_REQUEST), and maps to its partition by Kafka's hash of the
key as SharePartitionKey writes it. Deviations: the single broker creates the coordinator topic and
answers at once, where Kafka answers COORDINATOR_NOT_AVAILABLE until AutoTopicCreationManager has
created it.
"""

from __future__ import annotations

from ...coordinator.group_coordinator import OFFSETS_TOPIC, partition_for
from ...coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC, parse_coordinator_key
from ...coordinator.transaction_coordinator import TRANSACTION_STATE_TOPIC
from ...wire.errors import ErrorCode
from ...wire.protocol import ApiKey, response_class
from ..security import authorizer as acl
from ..security.authorizer import CLUSTER, CLUSTER_ACTION
from . import ListenerType, handler

FindCoordinatorResponse = response_class(ApiKey.FIND_COORDINATOR)
Coordinator = FindCoordinatorResponse.Coordinator
GROUP, TRANSACTION, SHARE = 0, 1, 2
SHARE_MIN_VERSION = 6


async def group_coordinator(ctx, key: str):
    services = ctx.services
    return await services.admin.coordinator(services, OFFSETS_TOPIC, services.groups.partition_for(key), ctx.listener)


async def transaction_coordinator(ctx, key: str):
    services = ctx.services
    return await services.admin.coordinator(services, TRANSACTION_STATE_TOPIC,
                                            partition_for(key, services.transactions.num_partitions()), ctx.listener)


async def share_coordinator(ctx, key: str):
    services = ctx.services
    try:
        share_key = parse_coordinator_key(key)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, None
    return await services.admin.coordinator(services, SHARE_GROUP_STATE_TOPIC,
                                            services.share_coordinator.partition_for(share_key), ctx.listener)


async def find(ctx, key_type: int, key: str):
    """(error code, error message, node or None) for one key."""
    if key_type == GROUP:
        if not ctx.authorize(acl.DESCRIBE, acl.GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED.message, None
        code, node = await group_coordinator(ctx, key)
    elif key_type == TRANSACTION:
        if not ctx.authorize(acl.DESCRIBE, acl.TRANSACTIONAL_ID, key):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return code, code.message, None
        code, node = await transaction_coordinator(ctx, key)
    elif key_type == SHARE and ctx.api_version >= SHARE_MIN_VERSION:
        code, node = await share_coordinator(ctx, key)
    elif key_type == SHARE:
        code, node = ErrorCode.INVALID_REQUEST, None
    elif ctx.services.listener_type == ListenerType.ZK_BROKER:
        return ErrorCode.INVALID_REQUEST, f"Invalid coordinator type: {key_type}", None
    else:  # Kafka 4.4: the error's own message
        return ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST.message, None
    # Kafka's Errors.message(): the exception's text, "NONE" for success.
    return code, code.message or code.name, node


@handler(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle(ctx, request):
    if ctx.api_version < 4:
        code, message, node = await find(ctx, request.key_type, request.key)
        return FindCoordinatorResponse(
            throttle_time_ms=0, error_code=code, error_message=message, node_id=node.node_id if node else -1,
            host=node.host if node else "", port=node.port if node else -1)
    if request.key_type == SHARE and ctx.api_version >= SHARE_MIN_VERSION \
            and not ctx.authorize(CLUSTER_ACTION, CLUSTER):
        # Kafka's authorizeClusterOperation throws: the request's error response, every key refused.
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=code.message)
            for key in request.coordinator_keys])
    coordinators = []
    for key in request.coordinator_keys:
        code, message, node = await find(ctx, request.key_type, key)
        if request.key_type == SHARE:
            message = ""  # Kafka 4.4 sets none: the default, empty (v6 and its key type are 4.x's only)
        coordinators.append(Coordinator(key=key, node_id=node.node_id if node else -1, host=node.host if node else "",
                                        port=node.port if node else -1, error_code=code, error_message=message))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
